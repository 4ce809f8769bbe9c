"""A short seeded chaos run (./dev chaos, tools/chaos.py) as CI runs it: three nodes on a PostgreSQL of the run's
own under the mixed workload (redrives included), one fault of every kind but the pause (test_cluster_processes.py
pauses a node past its lease) and the full database disk (the longest: docs/benchmarks.md reports it), then the
check of every acknowledged execution."""

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # three real nodes on PostgreSQL, with faults: not in the fast tier

TOOL = Path(__file__).resolve().parent.parent / "tools" / "chaos.py"


def test_a_short_chaos_run_loses_and_doubles_nothing(tmp_path, postgres_database):
    spec = importlib.util.spec_from_file_location("chaos", TOOL)
    chaos = sys.modules["chaos"] = importlib.util.module_from_spec(spec)  # (its dataclasses look it up)
    spec.loader.exec_module(chaos)
    # A full database disk (PostgreSQL stops, is started again, every lease runs out) takes 15 s: ./dev chaos's
    counts = dict.fromkeys(set(chaos.FAULTS) - {"pause", "db-disk-full"}, 1)
    outcome = chaos.run(None, 3, tmp_path, postgres_database, say=lambda line: None, counts=counts,
                        span_s=(0.5, 1.0), calm_s=(0.1, 0.3))
    assert outcome.faults == counts and outcome.executions > 0 and outcome.redrives > 0, outcome.line()
    assert (outcome.lost, outcome.doubled, outcome.problems) == ([], [], []), outcome.line()
