"""The ceilings under W1 and W3: how fast this machine's disk and Python let timers fire before the engine does
anything of its own (issue 31: "the commit rate is the floor: say what it is").

A server starts W3's executions (each waits for a moment a few seconds ahead), then stops before any is due. Each
measure then fires the same overdue timers in this process, on its own copy of the database:
- fsync: one-row commits in a loop (WAL, synchronous=FULL): how many commits a second the disk allows.
- store only: what each firing writes (its row, its history events, its timer's removal) straight through
  ``SqliteStore.commit``, in group commits of the engine's usual size.
- skeleton: the same, plus the least a decision does in Python: decode the state, change it, encode it, make its
  events.
- engine: the real engine, ticking in this process with no HTTP server beside it.
Figures are firings a second of wall time and CPU microseconds per firing (this process's, so the disk's own work
in the kernel shows only as wall time).
"""

from __future__ import annotations

import asyncio
import copy
import shutil
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson

from statewright.decider.effects import Effects
from statewright.engine.engine import Engine
from statewright.engine.heavy_lane import HeavyLane
from statewright.store.base import ExecutionWrite
from statewright.store.shared import with_row_fields
from statewright.store.sqlite import SqliteStore

from . import workloads
from .client import Pool
from .servers import Statewright

DB = "statewright.db"
FOREVER_MS = 1 << 60
START_RATE_GUESS = 1_500  # starts a second, at the least: the timers are due after the starts end


async def ceilings(work: Path, n: int, concurrency: int, group: int) -> dict[str, Any]:
    """Start ``n`` W3 executions on a server, stop it, and fire their timers each way (see the module)."""
    server = Statewright(work / "ceiling-statewright")
    server.start()
    try:
        pool = Pool(server.endpoint, concurrency)
        machine = await workloads.create_machine(pool, "ceiling", workloads.TIMER_DEFINITION)
        due_ms = int(time.time() * 1000) + int((n / START_RATE_GUESS + 5) * 1000)
        run = await workloads.start_closed_loop(pool, machine, n, concurrency,
                                                lambda _: orjson.dumps({"due": workloads.iso_ms(due_ms)}).decode(),
                                                "c")
        pool.close()
    finally:
        server.stop()  # a clean stop checkpoints the WAL: the copies below are whole
    if run.starts_done * 1000 >= due_ms:
        raise RuntimeError(f"the starts ran past the moment their timers were due: lower --w3-ceiling-n below {n}")
    await asyncio.sleep(max(due_ms / 1000 + 1 - time.time(), 0))
    source = server.data_dir
    found: dict[str, Any] = {"n": n, "group": group, "fsync": fsync_loop(work / "fsync.db", 2.0)}
    found["engine"] = _measured(_copy(source, work / "engine"), n, engine_firing)
    events = _fired_events(work / "engine" / DB)
    found["store_only"] = _measured(_copy(source, work / "store"), n,
                                    lambda path: direct_firing(path, group, events, decide=False))
    found["skeleton"] = _measured(_copy(source, work / "skeleton"), n,
                                  lambda path: direct_firing(path, group, events, decide=True))
    return found


def fsync_loop(path: Path, seconds: float) -> dict[str, float]:
    """One-row commits for ``seconds``, as the store opens its file: commits a second and ms per commit."""
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
        commits = 0
        began = time.perf_counter()
        while time.perf_counter() - began < seconds:
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO t (v) VALUES (?)", (b"x" * 100,))
            db.execute("COMMIT")
            commits += 1
        elapsed = time.perf_counter() - began
    return {"commits_per_s": commits / elapsed, "ms_per_commit": elapsed / commits * 1000}


def engine_firing(path: Path) -> dict[str, float]:
    """The real engine (its heavy lane too, as a server has it) fires every overdue timer: how many, in how many
    commits, and the seconds spent in them."""
    store = SqliteStore(path, None)
    engine = Engine(store, heavy_lane=HeavyLane)
    try:
        engine.acquire_all_shards()
        idle = 0
        while idle < 3:
            idle = idle + 1 if engine.tick(int(time.time() * 1000)) == 0 else 0
        commits = _sampled(engine.metrics.commit_writes)
        seconds = _sampled(engine.metrics.commit_seconds)
        return {"fired": _succeeded(store), "writes_per_commit": commits["sum"] / max(commits["count"], 1),
                "commit_s": seconds["sum"]}
    finally:
        engine.heavy.close()
        store.close()


def direct_firing(path: Path, group: int, events: list[dict[str, Any]], decide: bool) -> dict[str, float]:
    """Fire every due timer by writing what its firing writes through the store, ``group`` writes a commit. With
    ``decide``, each also decodes its state, changes it and encodes it again, and makes its events anew."""
    store = SqliteStore(path, None)
    try:
        range_ids = {shard: store.acquire_shard(shard, "ceiling", FOREVER_MS) for shard in range(store.shard_count())}
        rows = _rows(path)
        now_ms = int(time.time() * 1000)
        # In the order the engine takes them (timers.pop_due): due first, and those due together in the order of
        # their rows, whichever shard holds them, so a commit's rows lie close together.
        due = sorted((timer for shard in range_ids for timer in store.due_timers(shard, -1, now_ms)),
                     key=lambda timer: (timer.fire_at_ms, timer.after_key))
        for at in range(0, len(due), group):
            store.commit([_fired(rows[timer.execution_arn], events, now_ms, decide) for timer in due[at:at + group]],
                         range_ids)
        return {"fired": _succeeded(store)}
    finally:
        store.close()


def _fired(row: tuple, events: list[dict[str, Any]], now_ms: int, decide: bool) -> ExecutionWrite:
    arn, listed_under, name, start_ms, shard_id, version, blob, timers = row
    made = events
    if decide:
        state = orjson.loads(with_row_fields(blob, arn, listed_under, name, start_ms, shard_id, "RUNNING", version))
        state["status"], state["version"], state["timers"] = "SUCCEEDED", version + 1, {}
        for field in ("arn", "state_machine_arn", "name", "start_ms", "shard_id", "status", "version"):
            del state[field]
        blob = orjson.dumps(state)
        made = copy.deepcopy(events)
        for event in made:
            event["timestamp"] = now_ms
    # every timer of the execution goes (the one that fired, and its execution timeout's)
    effects = Effects(events=made, timers_removed=list(timers.items()))
    return ExecutionWrite(shard_id, arn, listed_under, name, "SUCCEEDED", start_ms, now_ms, version, version + 1,
                          blob, effects)


def _rows(path: Path) -> dict[str, tuple]:
    """Each execution's row, and its timers (from its state)."""
    with closing(sqlite3.connect(path)) as db:
        return {row[0]: (*row, orjson.loads(row[-1])["timers"]) for row in db.execute(
            "SELECT arn, state_machine_arn, name, start_ms, shard_id, version, state FROM executions")}


def _fired_events(path: Path) -> list[dict[str, Any]]:
    """The events the engine wrote when it fired one timer: the last history row of an execution."""
    with closing(sqlite3.connect(path)) as db:
        return orjson.loads(db.execute("SELECT events FROM history ORDER BY first_event_id DESC LIMIT 1").fetchone()[0])


def _sampled(histogram: Any) -> dict[str, float]:
    """A prometheus histogram's count and sum."""
    found = {}
    for metric in histogram.collect():
        for sample in metric.samples:
            for part in ("count", "sum"):
                if sample.name.endswith(f"_{part}"):
                    found[part] = sample.value
    return found


def _succeeded(store: SqliteStore) -> int:
    return store._rows("SELECT COUNT(*) FROM executions WHERE status = 'SUCCEEDED'")[0][0]


def _copy(source: Path, target: Path) -> Path:
    target.mkdir(parents=True)
    for file in source.glob(f"{DB}*"):
        shutil.copy(file, target / file.name)
    return target / DB


def _measured(path: Path, n: int, fire: Callable[[Path], dict[str, float]]) -> dict[str, float]:
    began, cpu = time.perf_counter(), time.process_time()
    found = fire(path)
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
    fired = found["fired"]
    return {**found, "per_s": fired / elapsed, "cpu_us": cpu / max(fired, 1) * 1e6, "lost": n - fired}
