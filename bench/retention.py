"""W12 "retention": the hot database of n closed W1 executions, with their histories in it and once compacted.

One statewright server on the virtual clock (SQLite: ``--clock virtual`` runs one server). n W1 executions run to
the end; the database is measured (``VACUUM INTO`` a copy: what the rows take, without the free pages a file keeps
after deletes). The clock then moves two days, so the background sweep compacts every history into the payload
directory; the database is measured again, with the payload directory. The peer is the same data before compaction.
Also: how fast the sweep compacts, and W1 while it does, beside W1 on the same server with nothing to compact.

The figures are per million closed executions (the issue's unit), whatever n ran; ``--w12-n 1000000`` measures a
million (the waits below grow with n; the database and the copy VACUUM makes of it take about 10 GB each in the work
directory, under ``$TMPDIR``).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

from statewright import clock_client

from .client import Pool
from .servers import Statewright
from .workloads import chain_definition, chain_input, create_machine, run_to_end, start_closed_loop, wait_none_running

PER = 1_000_000  # the figures are per this many closed executions
RATE_FLOOR_PER_S = 50.0  # the slowest start, completion or compaction rate the waits allow for
POLL_S = 1.0  # how often the waits count rows (a count of a million rows is not free, and the server shares the disk)


def hot_bytes(data_dir: Path, scratch: Path) -> dict[str, int]:
    """The database's size as VACUUM would leave it, and its history table's share (rows counted)."""
    scratch.unlink(missing_ok=True)
    with sqlite3.connect(f"file:{data_dir / 'statewright.db'}?mode=ro", uri=True) as db:
        db.execute("VACUUM INTO ?", (str(scratch),))
        history_rows = db.execute("SELECT COUNT(*) FROM history").fetchone()[0]
    size = scratch.stat().st_size
    scratch.unlink()
    return {"bytes": size, "history_rows": history_rows}


# The store's own conditions, so the counts read its partial indexes (executions_closed, executions_uncompacted).
CLOSED = "stop_ms IS NOT NULL AND status <> 'RUNNING'"


def uncompacted(data_dir: Path) -> int:
    with sqlite3.connect(f"file:{data_dir / 'statewright.db'}?mode=ro", uri=True) as db:
        return db.execute(f"SELECT COUNT(*) FROM executions WHERE {CLOSED} AND compacted_stop_ms IS NOT stop_ms"
                          ).fetchone()[0]


def closed(data_dir: Path) -> int:
    with sqlite3.connect(f"file:{data_dir / 'statewright.db'}?mode=ro", uri=True) as db:
        return db.execute(f"SELECT COUNT(*) FROM executions WHERE {CLOSED}").fetchone()[0]


def deadline_s(n: int) -> float:
    """How long a wait for n executions (started, run or compacted) may take: half an hour, or more for a large n."""
    return max(1800.0, n / RATE_FLOOR_PER_S)


def directory_bytes(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


async def compacted_down_to(data_dir: Path, left: int, n: int) -> float:
    """Wait until at most ``left`` of n closed executions keep their history rows; seconds waited."""
    began = time.monotonic()
    while uncompacted(data_dir) > left and time.monotonic() - began < deadline_s(n):
        await asyncio.sleep(POLL_S)
    return time.monotonic() - began


async def w1_wall_s(server: Statewright, pool: Pool, n: int, concurrency: int, label: str) -> float:
    """Wall seconds for n W1 executions to run to the end (their own timestamps follow the virtual clock)."""
    began = time.monotonic()
    await run_to_end(server, pool, chain_definition(), chain_input, n, concurrency, label, 600)
    return time.monotonic() - began


async def w12(work: Path, n: int, w1_n: int, concurrency: int) -> dict[str, Any]:
    """Sizes per PER closed executions before and after compaction; compactions/s; W1 executions/s with nothing
    to compact and while the sweep compacts (each W1 run closes ``w1_n`` more, compacted too before the end)."""
    server = Statewright(work / "w12-statewright", extra_args=("--clock", "virtual"))
    server.start()
    pool = Pool(server.endpoint, concurrency)
    scratch = work / "w12-vacuumed.db"
    data = server.data_dir
    try:
        machine = await create_machine(pool, "w12", chain_definition())
        run = await start_closed_loop(pool, machine, n, concurrency, chain_input, "closed", record=False)
        await wait_none_running(pool, machine, deadline_s(n), POLL_S)
        without = hot_bytes(data, scratch) | {"executions": closed(data)}
        quiet_s = await w1_wall_s(server, pool, w1_n, concurrency, "quiet")
        due = closed(data)
        clock_client.call(server.endpoint, "AdvanceClock", {"by": "2d"})  # every execution so far is due for compaction
        began = time.monotonic()
        beside_s = await w1_wall_s(server, pool, w1_n, concurrency, "beside")
        compacted_during_w1 = closed(data) - uncompacted(data)
        compaction_s = time.monotonic() - began + await compacted_down_to(data, closed(data) - due, due)
        clock_client.call(server.endpoint, "AdvanceClock", {"by": "2d"})  # and the executions of the run beside
        await compacted_down_to(data, 0, w1_n)
        compacted = hot_bytes(data, scratch) | {"executions": closed(data)}
        payload_bytes = directory_bytes(data / "payloads")
    finally:
        pool.close()
        server.stop()
    return {"n": n, "errors": len(run.errors), "without": without, "with": compacted, "payload_bytes": payload_bytes,
            "compaction_s": compaction_s, "compacted_per_s": due / compaction_s,
            "compacted_during_w1": compacted_during_w1, "w1_quiet_per_s": w1_n / quiet_s,
            "w1_beside_per_s": w1_n / beside_s, "w1_n": w1_n,
            "without_per": without["bytes"] / without["executions"] * PER,
            "with_per": compacted["bytes"] / compacted["executions"] * PER,
            "payload_per": payload_bytes / compacted["executions"] * PER}
