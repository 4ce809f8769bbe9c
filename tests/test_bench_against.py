"""``./dev bench --against REV``'s table: each figure of each side's rounds side by side, matched even where a
figure's label names a rate measured in that run, with the tree's change against REV."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location("bench_against", Path(__file__).parent.parent / "bench" / "against.py")
against = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(against)


def _table(rate: str, transitions: str, p99: str) -> str:
    return "\n".join([
        "workload    metric                                        statewright   moto       target",
        "--------    ------                                        -----------   ----       ------",
        f"W1 chain    committed transitions/s (DBOS: steps/s)       {transitions}        -          >= 10,000: MET",
        f"W1 chain    p99 end-to-end at half peak ({rate}/s), ms     {p99}",
        f"W1 chain    p50 end-to-end at half peak ({rate}/s), ms     {p99}0",
        "W3 timers   succeeded / lost / started after due          5,000 / 0 / 0"])


def test_rounds_of_both_sides_are_matched_by_figure_and_compared_on_their_means():
    table = against.compare({"abc123": [_table("1,305", "20,000", "17.4"), _table("1,481", "30,000", "12.6")],
                             "tree": [_table("1,322", "26,000", "11.1"), _table("1,398", "27,000", "25.8")]},
                            "abc123")
    lines = {line.split("  ")[0] + "|" + line.split("  ")[1].strip(): line for line in table.splitlines()[1:]}
    transitions = next(line for line in table.splitlines() if "committed transitions/s" in line)
    assert "20,000 | 30,000" in transitions and "26,000 | 27,000" in transitions and "+6.0 %" in transitions
    half_peak = next(line for line in table.splitlines() if "half peak" in line)
    assert "17.4 | 12.6" in half_peak and "11.1 | 25.8" in half_peak  # one figure, though each run's rate differs
    lost = next(line for line in table.splitlines() if "lost" in line)
    assert "5,000 / 0 / 0 | 5,000 / 0 / 0" in lost and lost.endswith("+0.0 %")
    assert len(lines) == 4  # p50 and p99 are two figures


def test_the_sides_runs_get_every_argument_but_against_rounds_and_out():
    assert against.side_arguments(["--quick", "--against", "HEAD~3", "--rounds=3", "--out", "x.json", "--only",
                                   "W1"]) == ["--quick", "--only", "W1"]
