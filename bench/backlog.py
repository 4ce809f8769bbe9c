"""W6 "backlog": activity tasks dispatched while no worker polls, across a kill -9, then drained.

Three phases on one statewright data directory. *Start*: n executions of a one-Task machine on an activity, no
worker polling, the server's RSS sampled after every tenth of the starts. The activity matcher holds at most
``Limits.activity_backlog_tasks_max`` tasks in memory; the rest stay only in the outbox rows, so RSS is to flatten
once the backlog (and the cache of open executions) is full: the figure is the growth per 1,000 tasks past
``GROWTH_FROM_TASKS``. *Restart*: SIGKILL, spawn on the same directory, time to serving and to the outbox read-back
filling the backlog again, and RSS then. *Drain*: long-polling workers answer every task; tasks/s, RSS peak, and
each execution counted once (none lost, none delivered twice).

The peer is probed first (does an activity Task wait, with a task for GetActivityTask?); only if it does is the
start phase run on it. Uses the helpers of ``workloads``; imports nothing from the server but its ``Limits``.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from collections import Counter
from statistics import linear_regression
from typing import Any

import orjson

from statewright.engine.limits import Limits

from .client import Pool, list_all
from .servers import Child, Statewright
from .workloads import (
    activity_definition,
    answer_tasks,
    create_machine,
    metric_delta,
    scrape,
    start_closed_loop,
    wait_none_running,
)

# Past the matcher's backlog limit (20,000) and the cache of open executions (10,000): by then both are full, so
# whatever RSS still gains per task is what the bounds did not catch.
GROWTH_FROM_TASKS = Limits().activity_backlog_tasks_max + Limits().activity_backlog_tasks_max // 5
SAMPLES = 10
SETTLE_STILL_S = 2.0  # the read-back has settled when the backlog's size has not changed for this long
DRAIN_STALL_S = 60.0  # no task answered for this long while some are left: the drain is reported as stalled


async def create_activity_machine(pool: Pool, label: str) -> tuple[str, str]:
    activity = (await pool.call("CreateActivity", {"name": f"{label}-{uuid.uuid4().hex[:8]}"}))["activityArn"]
    return activity, await create_machine(pool, label, activity_definition(activity))


async def gauges(server: Child, pool: Pool) -> dict[str, float]:
    """statewright's in-memory queues: dispatches held by the outbox window, tasks in the matcher's backlog."""
    if not isinstance(server, Statewright):
        return {}
    found = await scrape(pool)
    return {"outbox_held": found.get("statewright_outbox_dispatches"),
            "activity_backlog": found.get("statewright_activity_backlog_tasks")}


async def start_waiting(server: Child, pool: Pool, machine: str, n: int, concurrency: int) -> dict[str, Any]:
    """n executions started closed-loop in tenths; RSS (and statewright's queue gauges) after each tenth."""
    step = max(n // SAMPLES, 1)
    samples: list[dict[str, Any]] = [{"started": 0, **server.memory(), **await gauges(server, pool)}]
    errors: list[str] = []
    began = time.time()
    started = 0
    while started < n:
        size, base = min(step, n - started), started
        run = await start_closed_loop(pool, machine, size, concurrency,
                                      lambda index, base=base: f'{{"i": {base + index}}}', f"b{base}", record=False)
        errors += run.errors
        started += size
        samples.append({"started": started, **server.memory(), **await gauges(server, pool)})
    elapsed = time.time() - began
    return {"n": n, "start_errors": len(errors), "first_error": errors[0] if errors else None,
            "start_rate_per_s": n / elapsed, "samples": samples, **growth(samples, n)}


def growth(samples: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """RSS gained per 1,000 tasks: the least-squares slope over the samples from GROWTH_FROM_TASKS on (from the
    first tenth when n is too small to have two such samples), so one noisy sample does not make the figure."""
    past = [sample for sample in samples if sample["started"] >= GROWTH_FROM_TASKS]
    basis = "from_bound"
    if len(past) < 2:
        past, basis = samples[1:], "from_first_tenth"
    if len(past) < 2:
        return {"growth_per_1000_bytes": None, "growth_anon_per_1000_bytes": None, "growth_from": None}
    thousands = [sample["started"] / 1000 for sample in past]
    return {"growth_per_1000_bytes": linear_regression(thousands, [sample["VmRSS"] for sample in past]).slope,
            "growth_anon_per_1000_bytes": linear_regression(thousands, [sample["RssAnon"] for sample in past]).slope,
            "growth_from": past[0]["started"], "growth_basis": basis}


def outbox_rows(server: Statewright) -> int:
    """Rows in the outbox, read from the running server's database (read-only: nothing is checkpointed)."""
    db = sqlite3.connect(f"file:{server.data_dir / 'statewright.db'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT count(*) FROM outbox").fetchone()[0]
    finally:
        db.close()


async def restart(server: Statewright, expected_held: int) -> dict[str, Any]:
    """SIGKILL and spawn on the same data directory; then wait for the outbox read-back to fill the backlog."""
    server.kill()
    serving_s = server.start()
    spawned = time.monotonic() - serving_s
    pool = Pool(server.endpoint, 4)
    try:
        last, still_since = None, time.monotonic()
        while time.monotonic() - spawned < 300:
            found = await gauges(server, pool)
            now = time.monotonic()
            if found != last:
                last, still_since = found, now
            if found.get("activity_backlog") == expected_held or (found.get("activity_backlog") and now - still_since
                                                                  >= SETTLE_STILL_S):
                break
            await asyncio.sleep(0.05)
        settled_s = time.monotonic() - spawned
        memory = server.memory()
    finally:
        pool.close()
    return {"restart_to_serving_s": serving_s, "restart_to_settled_s": settled_s, "held_after_restart": last,
            "rss_after_restart_bytes": memory["VmRSS"], "anon_after_restart_bytes": memory["RssAnon"]}


async def drain(server: Statewright, machine: str, activity: str, expected: int, workers: int) -> dict[str, Any]:
    """``workers`` long-poll GetActivityTask and answer SendTaskSuccess until every task is answered (or none is
    for DRAIN_STALL_S); then every execution's status from ListExecutions."""
    pool = Pool(server.endpoint, 8)
    worker_pool = Pool(server.endpoint, workers * 2)
    received: Counter[int] = Counter()
    answered: list[float] = []
    errors: list[str] = []

    def note(task: dict) -> None:
        received[orjson.loads(task["input"])["i"]] += 1


    rss_peak = 0
    before = await scrape(pool)
    cpu = server.cpu_s()
    began = time.time()
    running = [asyncio.create_task(answer_tasks(worker_pool, activity, f"d{index}", answered, errors, note))
               for index in range(workers)]
    stalled = False
    try:
        progress, progress_at = 0, time.monotonic()
        while len(answered) < expected:
            await asyncio.sleep(0.25)
            rss_peak = max(rss_peak, server.memory()["VmRSS"])
            if len(answered) > progress:
                progress, progress_at = len(answered), time.monotonic()
            elif time.monotonic() - progress_at > DRAIN_STALL_S:
                stalled = True
                break
    finally:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        worker_pool.close()
    elapsed = (max(answered) if answered else time.time()) - began
    cpu = server.cpu_s() - cpu
    memory = server.memory()
    none_running = await wait_none_running(pool, machine, 60, poll_s=0.5)
    statuses = Counter(item["status"] for item in await list_all(pool, machine))
    after = await scrape(pool)
    pool.close()
    steps = metric_delta(before, after, "statewright_transition_steps_committed_total")
    commits = metric_delta(before, after, "statewright_commit_seconds_count")
    return {"tasks": len(answered), "tasks_per_s": len(answered) / max(elapsed, 1e-9), "elapsed_s": elapsed,
            "stalled": stalled, "none_running": none_running, "statuses": dict(statuses),
            "succeeded": statuses.get("SUCCEEDED", 0), "delivered_twice": sum(1 for c in received.values() if c > 1),
            "reply_errors": len(errors), "first_reply_error": errors[0] if errors else None,
            "rss_peak_drain_bytes": rss_peak, "rss_hwm_since_restart_bytes": memory["VmHWM"],
            "rss_after_drain_bytes": memory["VmRSS"],
            "open_gauge_after": after.get("statewright_open_executions"),
            "writes_per_commit": steps / commits if commits else float("nan"),
            "server_cpu_per_task_us": cpu / max(len(answered), 1) * 1e6}


async def statewright(server: Statewright, n: int, workers: int, concurrency: int) -> dict[str, Any]:
    pool = Pool(server.endpoint, concurrency)
    try:
        activity, machine = await create_activity_machine(pool, "w6")
        result = await start_waiting(server, pool, machine, n, concurrency)
        result["outbox_rows"] = outbox_rows(server)
    finally:
        pool.close()
    started = n - result["start_errors"]
    result.update(await restart(server, min(started, Limits().activity_backlog_tasks_max)))
    result.update(await drain(server, machine, activity, started, workers))
    result.update(workers=workers, lost=started - result["succeeded"])
    return result


async def probe(server: Child) -> dict[str, Any]:
    """Does the server keep an execution on an activity Task RUNNING, with its task for GetActivityTask?"""
    pool = Pool(server.endpoint, 2)
    try:
        activity, machine = await create_activity_machine(pool, "w6-probe")
        execution = (await pool.call("StartExecution", {"stateMachineArn": machine, "name": "probe",
                                                        "input": "{}"}))["executionArn"]
        await asyncio.sleep(1.0)
        described = await pool.call("DescribeExecution", {"executionArn": execution})
        if described["status"] != "RUNNING":
            return {"supported": False, "short": f"the Task's execution {described['status']} at once",
                    "reason": f"{described.get('error')}: {str(described.get('cause'))[:160]}"}
        task = await asyncio.wait_for(pool.call("GetActivityTask", {"activityArn": activity}), 70)
        if not task.get("taskToken"):
            return {"supported": False, "short": "GetActivityTask gave no task", "reason": ""}
        await pool.call("SendTaskSuccess", {"taskToken": task["taskToken"], "output": "{}"})
        return {"supported": True}
    except Exception as exc:  # a peer that cannot do this is reported, not fatal
        return {"supported": False, "short": type(exc).__name__, "reason": str(exc)[:160]}
    finally:
        pool.close()


async def peer(server: Child, n: int, concurrency: int) -> dict[str, Any]:
    """The probe, then (only if activity tasks wait there) the same start phase at n."""
    found = await probe(server)
    if not found["supported"]:
        return found
    pool = Pool(server.endpoint, concurrency)
    try:
        _, machine = await create_activity_machine(pool, "w6")
        return {**found, **await start_waiting(server, pool, machine, n, concurrency)}
    finally:
        pool.close()
