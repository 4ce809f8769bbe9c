"""``./dev bench --against REV``: the chosen workloads on REV and on the working tree, alternated, in one run.

REV is checked out in a git worktree of its own (removed at the end). Each round runs the same load generator (this
working tree's ``bench``) twice, once with REV's ``src`` first on ``PYTHONPATH`` and once with the working tree's,
so only the server differs; the sides alternate (REV, tree, REV, tree, ...) so that a machine that drifts during
the run drifts on both. The table printed at the end puts each figure of every round side by side, with the change
of the tree's mean against REV's where the figure is a number: a regression shows before it lands (W5 once lost
3.2x unseen, because nobody ran the commit it came from beside the one it went to).
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
TREE = "tree"
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_COLUMNS = re.compile(r"\s{2,}")
_MEASURED = re.compile(r"\([^)]*\)")  # a label's parenthesis, where a figure names what the run measured


def run_against(rev: str, argv: list[str], rounds: int, keep: bool) -> int:
    """Run ``./dev bench ARGV`` on ``rev`` and on the working tree, ``rounds`` times each, alternated."""
    work = Path(tempfile.mkdtemp(prefix="statewright-against-"))
    checkout = work / "rev"
    added = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(checkout), rev],
                           capture_output=True, text=True)
    if added.returncode != 0:
        print(f"bench: cannot check out {rev!r}: {added.stderr.strip()}", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)
        return 2
    tables: dict[str, list[str]] = {rev: [], TREE: []}
    try:
        for round_index in range(rounds):
            for side, source in ((rev, checkout / "src"), (TREE, ROOT / "src")):
                out = work / f"{'rev' if side == rev else 'tree'}-{round_index + 1}.json"
                print(f"bench: round {round_index + 1} of {rounds}, {side}", flush=True)
                env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                    [str(source), *filter(None, [os.environ.get("PYTHONPATH")])])}
                finished = subprocess.run([sys.executable, "-m", "bench", *argv, "--out", str(out)], cwd=ROOT, env=env)
                if finished.returncode != 0:
                    print(f"bench: the {side} run failed (exit {finished.returncode})", file=sys.stderr)
                    return finished.returncode
                tables[side].append(orjson.loads(out.read_bytes())["table"])
        print()
        print(compare(tables, rev))
        return 0
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(checkout)], capture_output=True)
        if keep:
            print(f"bench: the rounds' figures are in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def side_arguments(argv: list[str]) -> list[str]:
    """What each side's run gets of ``./dev bench``'s arguments: all but --against, --rounds and --out (each round
    writes its own)."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg.split("=", 1)[0] in ("--against", "--rounds", "--out"):
            skip = "=" not in arg
            continue
        kept.append(arg)
    return kept


def rows(table: str) -> dict[tuple[str, str], tuple[str, str]]:
    """A bench table's rows by (workload, figure with the numbers in its parentheses blanked: a rate measured in
    the run may be named there): the figure as printed, and statewright's value (the table's third column)."""
    found = {}
    for line in table.splitlines():
        cells = _COLUMNS.split(line.strip())
        if len(cells) >= 3 and cells[0] != "workload" and not set(cells[0]) <= {"-", " "}:
            found.setdefault((cells[0], _MEASURED.sub(lambda m: _NUMBER.sub("#", m.group()), cells[1])),
                             (cells[1], cells[2]))
    return found


def _first_number(value: str) -> float | None:
    match = _NUMBER.search(value)
    return None if match is None else float(match.group().replace(",", ""))


def compare(tables: dict[str, list[str]], rev: str) -> str:
    """Every figure of the first round's table, each side's rounds beside it, and the tree's change in its mean."""
    sides = {side: [rows(table) for table in runs] for side, runs in tables.items()}
    keys = list(sides[rev][0]) if sides[rev] else []
    lines = [("workload", "figure", f"{rev} (each round)", "working tree (each round)", "change")]
    for key in keys:
        values = {side: [runs.get(key, ("", ""))[1] for runs in rounds_] for side, rounds_ in sides.items()}
        numbers = {side: [n for n in map(_first_number, found) if n is not None] for side, found in values.items()}
        change = ""
        if numbers[rev] and numbers[TREE] and len(numbers[rev]) == len(values[rev]):
            before, after = statistics.mean(numbers[rev]), statistics.mean(numbers[TREE])
            change = f"{(after - before) / before * 100:+.1f} %" if before else ""
        lines.append((key[0], sides[rev][0][key][0], " | ".join(values[rev]), " | ".join(values[TREE]), change))
    widths = [max(len(line[column]) for line in lines) for column in range(5)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
                     for line in lines)
