"""W11: W1's ten-state chain as an EXPRESS state machine, through StartExecution (durable start, runs in memory)
and StartSyncExecution (answers with the result), against W1 as a STANDARD machine on the same server in the same
run.

Express executions cannot be listed (AWS refuses ListExecutions for them), so their completions are counted by the
server's ``statewright_express_executions_closed_total``; a StartSyncExecution's latency is its request's, since
it answers once the execution closed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from .client import AwsError, Pool
from .servers import Statewright
from .workloads import (
    ROLE,
    chain_definition,
    chain_input,
    percentile,
    run_to_end,
    scrape,
    start_closed_loop,
)

CLOSED = "statewright_express_executions_closed_total{start=async}"


ONE_PASS = {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}


async def express_machine(pool: Pool, definition: dict | None = None) -> str:
    """An EXPRESS machine of W1's chain, or of ``definition``."""
    created = await pool.call("CreateStateMachine", {
        "name": f"w11-{time.time_ns()}", "definition": orjson.dumps(definition or chain_definition()).decode(),
        "roleArn": ROLE, "type": "EXPRESS"})
    return created["stateMachineArn"]


async def async_express(server: Statewright, pool: Pool, machine: str, n: int, concurrency: int) -> dict[str, Any]:
    """n StartExecution calls (closed loop), until the server counts n more closed async executions."""
    before = (await scrape(pool)).get(CLOSED, 0.0)
    cpu = server.cpu_s()
    run = await start_closed_loop(pool, machine, n, concurrency, chain_input, "async", record=False)
    while (await scrape(pool)).get(CLOSED, 0.0) - before < n - len(run.errors):
        await asyncio.sleep(0.01)
    elapsed = time.time() - run.began
    return {"n": n, "errors": len(run.errors), "executions_per_s": (n - len(run.errors)) / elapsed,
            "server_cpu_per_execution_us": (server.cpu_s() - cpu) / n * 1e6}


async def _sync_one(pool: Pool, machine: str, index: int, latencies: list[float], errors: list[str]) -> None:
    sent = time.perf_counter()
    try:
        done = await pool.call("StartSyncExecution", {"stateMachineArn": machine, "input": chain_input(index)})
    except AwsError as error:
        errors.append(str(error))
        return
    if done["status"] != "SUCCEEDED":
        errors.append(f"status {done['status']}")
        return
    latencies.append(time.perf_counter() - sent)


async def sync_closed_loop(server: Statewright, pool: Pool, machine: str, n: int, concurrency: int
                           ) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[str] = []
    indexes = iter(range(n))

    async def worker() -> None:
        for index in indexes:
            await _sync_one(pool, machine, index, latencies, errors)

    cpu, began = server.cpu_s(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - began
    return {"n": n, "errors": len(errors), "executions_per_s": len(latencies) / elapsed,
            "p50_s": percentile(latencies, 0.5), "p99_s": percentile(latencies, 0.99),
            "server_cpu_per_execution_us": (server.cpu_s() - cpu) / n * 1e6}


async def sync_at_rate(pool: Pool, machine: str, rate_per_s: float, duration_s: float) -> dict[str, Any]:
    """StartSyncExecution at a fixed rate (open loop): latency at that load."""
    latencies: list[float] = []
    errors: list[str] = []
    loop = asyncio.get_running_loop()
    tasks = []
    origin = loop.time()
    for index in range(max(int(rate_per_s * duration_s), 1)):
        delay = origin + index / rate_per_s - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(_sync_one(pool, machine, index, latencies, errors)))
    await asyncio.gather(*tasks)
    return {"rate_per_s": rate_per_s, "n": len(tasks), "errors": len(errors), "p50_s": percentile(latencies, 0.5),
            "p99_s": percentile(latencies, 0.99)}


async def w11(server: Statewright, pool: Pool, n: int, concurrency: int, half_load_s: float) -> dict[str, Any]:
    """Standard, then async Express, then sync Express (closed loop), then sync Express at half its peak."""
    standard = await run_to_end(server, pool, chain_definition(), chain_input, n, concurrency, "w11-standard", 600)
    machine = await express_machine(pool)
    await sync_closed_loop(server, pool, machine, min(n, 200), min(concurrency, 10))  # warm-up
    started = await async_express(server, pool, machine, n, concurrency)
    synced = await sync_closed_loop(server, pool, machine, n, concurrency)
    half = await sync_at_rate(pool, machine, synced["executions_per_s"] / 2, half_load_s)
    # The floor under any execution: one request that runs one Pass (what an execution costs besides its states).
    floor = await sync_closed_loop(server, pool, await express_machine(pool, ONE_PASS), n, concurrency)
    return {"standard": standard, "async": started, "sync": synced, "sync_half_load": half, "floor": floor}
