"""W15: bursts beside a neighbour. The neighbour is a steady caller: a StartExecution of a one-state machine every
50 ms (its call latency: how long another caller's command is held) and W1 chains at a fixed rate (their end-to-end
latency). It runs alone, then beside a burst; the burst runs alone too, so its drain rate beside the neighbour is
compared with its own in the same run.

The bursts: (a) ``timer_burst``, executions whose Waits all end in the same second; (b) ``bomb_burst``, executions
whose first state is a JSONata expression that runs until its evaluation budget stops it; and, through
``burst_case``, (c) Tasks whose runaway Arguments fail and retry every second, (d) a wide inline Map and Parallels,
(e) nested executions started by Map iterations, (f) activity task results sent all at once.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

from .client import Pool
from .servers import Statewright
from .workloads import (
    TIMER_DEFINITION,
    Run,
    activity_definition,
    chain_definition,
    chain_input,
    completions,
    create_machine,
    iso_ms,
    percentile,
    start_closed_loop,
    start_one,
    wait_none_running,
)

PROBE_EVERY_S = 0.05
PROBE_DEFINITION = {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}
# A first state whose one expression builds 900,000 items: stopped by the evaluation budget (steps or 1 s), it fails
# the execution with States.QueryEvaluationError.
BOMB_DEFINITION = {"QueryLanguage": "JSONata", "StartAt": "Bomb", "States": {
    "Bomb": {"Type": "Pass", "Output": "{% $count($map([1..900000], function($v) { $v * 2 })) %}", "End": True}}}


async def neighbour(pool: Pool, rate_per_s: float, stop: asyncio.Event, label: str) -> dict[str, Any]:
    """The steady caller until ``stop`` is set: probe starts every 50 ms and W1 chains at ``rate_per_s``."""
    probe_machine = await create_machine(pool, f"w15-probe-{label}", PROBE_DEFINITION)
    chain_machine = await create_machine(pool, f"w15-chain-{label}", chain_definition())
    probes, chains = Run(0), Run(0)
    tasks: list[asyncio.Task] = []
    loop = asyncio.get_running_loop()
    origin = loop.time()
    next_probe = next_chain = 0.0
    index = 0
    chains.began = time.time()
    while not stop.is_set():
        elapsed = loop.time() - origin
        if elapsed >= next_probe:
            tasks.append(asyncio.create_task(start_one(pool, probe_machine, f"p-{index}", "{}", probes, True)))
            next_probe += PROBE_EVERY_S
        if elapsed >= next_chain:
            tasks.append(asyncio.create_task(start_one(pool, chain_machine, f"c-{index}", chain_input(index),
                                                        chains, True)))
            next_chain += 1 / rate_per_s
        index += 1
        await asyncio.sleep(max(min(next_probe, next_chain) - (loop.time() - origin), 0))
    await asyncio.gather(*tasks)
    chains.starts_done = time.time()
    await wait_none_running(pool, chain_machine, 120)
    calls = [probes.answered[name] - sent for name, sent in probes.sent.items()]
    ends = await completions(pool, chain_machine, chains)
    return {"probe_calls": len(calls), "probe_p50_s": percentile(calls, 0.5), "probe_p99_s": percentile(calls, 0.99),
            "probe_max_s": max(calls, default=float("nan")), "chains": ends["succeeded"],
            "chain_p50_s": ends["p50_s"], "chain_p99_s": ends["p99_s"],
            "errors": len(probes.errors) + len(chains.errors)}


class Neighbour:
    """``neighbour`` in a process of its own (``python -m bench.bursts``), as another caller is: its latency is the
    server's, not the wait for a connection of the burst's pool or for the burst client's own event loop."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    @classmethod
    async def start(cls, endpoint: str, rate_per_s: float, label: str) -> Neighbour:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.bursts", endpoint, str(rate_per_s), label, cwd=Path(__file__).parent.parent,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        return cls(process)

    async def finish(self) -> dict[str, Any]:
        """Stop calling (its stdin closes) and return its figures."""
        out, _ = await self._process.communicate(b"")
        if self._process.returncode != 0:
            raise RuntimeError(f"the neighbour process failed ({self._process.returncode})")
        return orjson.loads(out)

    @classmethod
    async def alone(cls, endpoint: str, rate_per_s: float, label: str, seconds: float) -> dict[str, Any]:
        running = await cls.start(endpoint, rate_per_s, label)
        await asyncio.sleep(seconds)
        return await running.finish()


async def _neighbour_main(endpoint: str, rate_per_s: float, label: str) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    pool = Pool(endpoint, 16)

    async def until_stdin_closes() -> None:
        await reader.read()
        stop.set()
    watcher = asyncio.create_task(until_stdin_closes())
    try:
        result = await neighbour(pool, rate_per_s, stop, label)
    finally:
        watcher.cancel()
        pool.close()
    sys.stdout.write(orjson.dumps(result).decode())


async def _timers_due_together(pool: Pool, n: int, concurrency: int, label: str) -> tuple[str, float, Run]:
    """n executions whose Waits end in the same second, started ahead of it; (machine, due time in s, their run)."""
    machine = await create_machine(pool, f"w15-timers-{label}", TIMER_DEFINITION)
    guess_s = n / 2_000 + 5  # time to start them all, at a rate well below what a quiet server takes
    due_ms = (int(time.time() + guess_s) + 1) * 1000
    run = await start_closed_loop(pool, machine, n, concurrency,
                                  lambda _: orjson.dumps({"due": iso_ms(due_ms)}).decode(), "t", record=False)
    return machine, due_ms / 1000, run


async def _drained(pool: Pool, machine: str, due_s: float) -> dict[str, Any]:
    """How long after ``due_s`` the last of the burst's executions closed."""
    finished = await wait_none_running(pool, machine, 600, poll_s=0.2)
    return {"finished": finished, "drain_s": time.time() - due_s}


async def timer_burst(server: Statewright, n: int, rate_per_s: float, alone_s: float,
                      concurrency: int) -> dict[str, Any]:
    """(a): the burst alone; the neighbour alone for ``alone_s``; the neighbour beside the burst until it drained."""
    pool = Pool(server.endpoint, concurrency)
    try:
        machine, due_s, run = await _timers_due_together(pool, n, concurrency, "alone")
        await asyncio.sleep(max(due_s - time.time(), 0))
        burst_alone = await _drained(pool, machine, due_s)
        burst_alone["start_errors"] = len(run.errors)
        neighbour_alone = await Neighbour.alone(server.endpoint, rate_per_s, "alone", alone_s)
        machine, due_s, run = await _timers_due_together(pool, n, concurrency, "beside")
        await asyncio.sleep(max(due_s - 1 - time.time(), 0))  # the neighbour starts a second before the burst
        beside = await Neighbour.start(server.endpoint, rate_per_s, "beside")
        burst_beside = await _drained(pool, machine, due_s)
        burst_beside["start_errors"] = len(run.errors)
        neighbour_beside = await beside.finish()
    finally:
        pool.close()
    return {"n": n, "rate_per_s": rate_per_s, "burst_alone": burst_alone, "burst_beside": burst_beside,
            "neighbour_alone": neighbour_alone, "neighbour_beside": neighbour_beside}


async def bomb_burst(server: Statewright, bombs: int, rate_per_s: float, phase_s: float,
                     concurrency: int) -> dict[str, Any]:
    """(b): the neighbour alone for ``phase_s``; then beside ``bombs`` executions started at once, each a runaway
    first state, for as long; then how long the bombs took to fail, and how."""
    pool = Pool(server.endpoint, concurrency)
    loop = asyncio.get_running_loop()
    try:
        machine = await create_machine(pool, "w15-bombs", BOMB_DEFINITION)
        neighbour_alone = await Neighbour.alone(server.endpoint, rate_per_s, "bombs-alone", phase_s)
        began = loop.time()
        beside = await Neighbour.start(server.endpoint, rate_per_s, "bombs-beside")
        await asyncio.sleep(1)  # the neighbour runs first
        run = Run(bombs)
        run.began = time.time()
        await asyncio.gather(*(start_one(pool, machine, f"bomb-{index}", "{}", run, True) for index in range(bombs)))
        run.starts_done = time.time()
        await asyncio.sleep(max(phase_s - (loop.time() - began), 0))
        neighbour_beside = await beside.finish()
        finished = await wait_none_running(pool, machine, 600, poll_s=0.2)
        ends = await completions(pool, machine, run)
    finally:
        pool.close()
    return {"bombs": bombs, "rate_per_s": rate_per_s, "neighbour_alone": neighbour_alone,
            "neighbour_beside": neighbour_beside, "finished": finished, "statuses": ends["statuses"],
            "bombs_done_s": ends["elapsed_s"], "start_errors": len(run.errors)}



# -- (c) to (f): a burst alone, the neighbour alone, then the neighbour beside the burst

# (prepare: (pool, label) -> what the burst needs, made ahead; fire: (pool, that) -> when it drained, s)
Prepare = Callable[[Pool, str], Awaitable[Any]]
Fire = Callable[[Pool, Any], Awaitable[float]]


async def burst_case(server: Statewright, name: str, prepare: Prepare, fire: Fire, rate_per_s: float,
                     phase_s: float, concurrency: int) -> dict[str, Any]:
    """The burst alone (its drain time), the neighbour alone for ``phase_s``, then the neighbour beside the burst
    (started a second into it) for ``phase_s`` or until the burst drained, whichever is longer."""
    pool = Pool(server.endpoint, concurrency)
    loop = asyncio.get_running_loop()
    try:
        burst_alone_s = await fire(pool, await prepare(pool, f"{name}-alone"))
        neighbour_alone = await Neighbour.alone(server.endpoint, rate_per_s, f"{name}-alone", phase_s)
        ready = await prepare(pool, f"{name}-beside")
        began = loop.time()
        beside = await Neighbour.start(server.endpoint, rate_per_s, f"{name}-beside")
        await asyncio.sleep(1)
        burst_beside_s = await fire(pool, ready)
        await asyncio.sleep(max(phase_s - (loop.time() - began), 0))
        neighbour_beside = await beside.finish()
    finally:
        pool.close()
    return {"burst_alone_s": burst_alone_s, "burst_beside_s": burst_beside_s, "neighbour_alone": neighbour_alone,
            "neighbour_beside": neighbour_beside}


async def _all_closed(pool: Pool, machines: list[str], began: float) -> float:
    for machine in machines:
        if not await wait_none_running(pool, machine, 900, poll_s=0.2):
            raise TimeoutError(f"{machine} still has executions running after 900 s")
    return time.time() - began


async def _start_all(pool: Pool, machine: str, count: int, input_text: str = "{}") -> Run:
    run = Run(count)
    await asyncio.gather(*(start_one(pool, machine, None, input_text, run, False) for _ in range(count)))
    if run.errors:
        raise RuntimeError(f"starts refused: {run.errors[:3]}")
    return run


def retrying_bombs(tasks: int) -> tuple[Prepare, Fire]:
    """(c): ``tasks`` executions of a Task whose Arguments are the runaway expression, retried every second on
    States.ALL three times (each attempt fails with States.QueryEvaluationError before any call)."""
    async def prepare(pool: Pool, label: str) -> str:
        activity = (await pool.call("CreateActivity", {"name": f"w15-{label}"}))["activityArn"]
        return await create_machine(pool, f"w15-{label}", {"QueryLanguage": "JSONata", "StartAt": "Work", "States": {
            "Work": {"Type": "Task", "Resource": activity,
                     "Arguments": {"n": BOMB_DEFINITION["States"]["Bomb"]["Output"]},
                     "Retry": [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 1, "MaxAttempts": 3,
                                "BackoffRate": 1}], "End": True}}})

    async def fire(pool: Pool, machine: str) -> float:
        began = time.time()
        await _start_all(pool, machine, tasks)
        return await _all_closed(pool, [machine], began)
    return prepare, fire


def wide_fan_outs(maps: int, items: int, parallels: int, branches: int) -> tuple[Prepare, Fire]:
    """(d): ``maps`` executions of an inline Map over ``items`` items (a Pass each; 5,000 is near the most a
    history of 25,000 events holds) and ``parallels`` executions of a Parallel of ``branches`` branches (a Pass
    each), all started together."""
    async def prepare(pool: Pool, label: str) -> tuple[str, str]:
        wide_map = await create_machine(pool, f"w15-map-{label}", {"StartAt": "M", "States": {"M": {
            "Type": "Map", "ItemsPath": "$.items", "ResultPath": None, "End": True,
            "ItemProcessor": {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}}}})
        parallel = await create_machine(pool, f"w15-par-{label}", {"StartAt": "B", "States": {"B": {
            "Type": "Parallel", "ResultPath": None, "End": True, "Branches": [
                {"StartAt": f"P{index}", "States": {f"P{index}": {"Type": "Pass", "End": True}}}
                for index in range(branches)]}}})
        return wide_map, parallel

    async def fire(pool: Pool, machines: tuple[str, str]) -> float:
        wide_map, parallel = machines
        began = time.time()
        await asyncio.gather(_start_all(pool, wide_map, maps, orjson.dumps({"items": list(range(items))}).decode()),
                             _start_all(pool, parallel, parallels))
        return await _all_closed(pool, [wide_map, parallel], began)
    return prepare, fire


def nested_starts(parents: int, children_each: int) -> tuple[Prepare, Fire]:
    """(e): ``parents`` executions, each a Map whose ``children_each`` iterations start a child execution and wait
    for it (startExecution.sync:2, all at once): a burst of engine-to-engine work."""
    async def prepare(pool: Pool, label: str) -> tuple[str, str]:
        child = await create_machine(pool, f"w15-child-{label}", PROBE_DEFINITION)
        parent = await create_machine(pool, f"w15-parent-{label}", {"StartAt": "M", "States": {"M": {
            "Type": "Map", "ItemsPath": "$.items", "ResultPath": None, "End": True, "ItemProcessor": {
                "StartAt": "Child", "States": {"Child": {
                    "Type": "Task", "Resource": "arn:aws:states:::states:startExecution.sync:2",
                    "Parameters": {"StateMachineArn": child, "Input": {"item.$": "$"}},
                    "ResultSelector": {"status.$": "$.Status"}, "End": True}}}}}})
        return parent, child

    async def fire(pool: Pool, machines: tuple[str, str]) -> float:
        parent, child = machines
        began = time.time()
        await _start_all(pool, parent, parents, orjson.dumps({"items": list(range(children_each))}).decode())
        return await _all_closed(pool, [parent, child], began)
    return prepare, fire


def results_at_once(tasks: int, concurrency: int) -> tuple[Prepare, Fire]:
    """(f): ``tasks`` executions waiting on an activity, their tasks taken by a worker ahead; then every
    SendTaskSuccess sent at once (``concurrency`` calls in flight)."""
    async def prepare(pool: Pool, label: str) -> tuple[str, list[str]]:
        activity = (await pool.call("CreateActivity", {"name": f"w15-{label}"}))["activityArn"]
        machine = await create_machine(pool, f"w15-{label}", activity_definition(activity))
        run = await start_closed_loop(pool, machine, tasks, concurrency, lambda _: "{}", None, record=False)
        if run.errors:
            raise RuntimeError(f"starts refused: {run.errors[:3]}")
        tokens: list[str] = []

        async def poll() -> None:
            while len(tokens) < tasks:
                task = await pool.call("GetActivityTask", {"activityArn": activity, "workerName": "w15"})
                if task.get("taskToken"):
                    tokens.append(task["taskToken"])
        await asyncio.gather(*(poll() for _ in range(concurrency)))
        return machine, tokens

    async def fire(pool: Pool, ready: tuple[str, list[str]]) -> float:
        machine, tokens = ready
        pending = iter(tokens)
        began = time.time()

        async def answer() -> None:
            for token in pending:
                await pool.call("SendTaskSuccess", {"taskToken": token, "output": "{}"})
        await asyncio.gather(*(answer() for _ in range(concurrency)))
        return await _all_closed(pool, [machine], began)
    return prepare, fire


if __name__ == "__main__":  # the neighbour's process: endpoint, W1 rate, label; calls until stdin closes
    asyncio.run(_neighbour_main(sys.argv[1], float(sys.argv[2]), sys.argv[3]))
