"""W14: a runaway account beside a steady one, on a server with ``--auth sigv4 --limits aws``.

The steady account runs W1 at a fixed rate, alone and then beside the runaway account, twice each (alternated, so
the host's drift falls on both sides). The runaway account meanwhile keeps ``loops`` executions of a tight loop of
Pass states running (started again as each one ends at its 25,000 history events) and floods StartExecution from
``flood`` callers at once. Both accounts sign every request (SigV4, botocore's signer in the load generator).
Reported: the steady account's p50 / p99 alone and beside (the target: p99 within 10 %), the runaway's starts
accepted per second against its StartExecution bucket (AWS's 1,300 tokens refilled at 300 a second), how many it was
refused, and the state transitions its loops made.

``timers_beside_a_burst`` (W14 (b)), on a server with ``--limits local`` (its starts not throttled): the runaway
account's executions whose Waits all end in one second, and the steady account's Waits ending a second later, while
the burst still drains: how late the steady account's timers fire against how long the burst takes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import Any

from .client import AwsError, Pool
from .servers import Statewright
from .workloads import (
    TIMER_DEFINITION,
    chain_definition,
    chain_input,
    create_machine,
    iso_ms,
    latency_at_rate,
    list_all,
    percentile,
    pooled_phases,
    scrape,
    start_closed_loop,
    stop_seconds,
    wait_none_running,
)

STEADY = ("111111111111", "AKIABENCHSTEADY0001", "steady-secret")
RUNAWAY = ("222222222222", "AKIABENCHRUNAWAY001", "runaway-secret")
LOOP = {"StartAt": "A", "States": {  # for ever (for an input without "stop"), until its history is full
    "A": {"Type": "Pass", "Next": "B"},
    "B": {"Type": "Choice", "Choices": [{"Variable": "$.stop", "IsPresent": False, "Next": "A"}], "Default": "Done"},
    "Done": {"Type": "Succeed"}}}
PASS = {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}


def accounts_file(folder: Path) -> Path:
    path = folder / "w14-accounts.json"
    path.write_text(json.dumps({"accounts": [
        {"accountId": account, "keys": [{"accessKeyId": key, "secretAccessKey": secret}]}
        for account, key, secret in (STEADY, RUNAWAY)]}))
    return path


def server(folder: Path, postgres: str | None, limits: str = "aws") -> Statewright:
    return Statewright(folder / f"w14-statewright-{limits}", postgres=postgres, extra_args=(
        "--auth", "sigv4", "--accounts", str(accounts_file(folder)), "--limits", limits))


class _Runaway:
    """The runaway account's load while ``running``: its loops kept at ``loops`` and its start flood, its callers
    spread over ``pools`` (one per node of a cluster)."""

    def __init__(self, pools: list[Pool], loop_machine: str, pass_machine: str, loops: int, flood: int) -> None:
        self.pools, self.pool, self.loop_machine, self.pass_machine = pools, pools[0], loop_machine, pass_machine
        self.loops, self.flood = loops, flood
        self.accepted = self.throttled = self.loops_started = 0
        self.running = False
        self._tasks: list[asyncio.Task] = []
        self._open: list[str] = []

    def start(self) -> None:
        self.running = True
        self._tasks = [asyncio.ensure_future(self._keep_looping())]
        self._tasks += [asyncio.ensure_future(self._flood(self.pools[index % len(self.pools)]))
                        for index in range(self.flood)]

    async def stop(self) -> None:
        self.running = False
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for arn in self._open:
            with contextlib.suppress(AwsError):  # closed already, or throttled: it ends at its history's limit
                await self.pool.call("StopExecution", {"executionArn": arn})
        self._open.clear()

    async def _keep_looping(self) -> None:
        while self.running:
            page = await self.pool.call("ListExecutions", {"stateMachineArn": self.loop_machine,
                                                           "statusFilter": "RUNNING", "maxResults": 1000})
            self._open = [run["executionArn"] for run in page["executions"]]
            for index in range(self.loops - len(self._open)):
                try:
                    started = await self.pools[index % len(self.pools)].call(
                        "StartExecution", {"stateMachineArn": self.loop_machine})
                    self._open.append(started["executionArn"])
                    self.loops_started += 1
                except AwsError as error:
                    if error.code != "ThrottlingException":
                        raise
            await asyncio.sleep(0.5)

    async def _flood(self, pool: Pool) -> None:
        while self.running:
            try:
                await pool.call("StartExecution", {"stateMachineArn": self.pass_machine, "input": "{}"})
                self.accepted += 1
            except AwsError as error:
                if error.code != "ThrottlingException":
                    raise
                self.throttled += 1


async def runaway_account_beside_w1(nodes: list[Statewright], concurrency: int, rate_per_s: float,
                                    duration_s: float, loops: int, flood: int) -> dict[str, Any]:
    """The steady account calls the first node; the runaway account's loops and callers are spread over all of
    them (one node, or the nodes of a cluster)."""
    statewright = nodes[0]
    steady = Pool(statewright.endpoint, concurrency, key=STEADY[1:])
    runaways = [Pool(node.endpoint, flood // len(nodes) + 8, key=RUNAWAY[1:]) for node in nodes]
    runaway = runaways[0]

    async def transitions_so_far() -> float:
        counts = [await scrape(pool) for pool in runaways]  # each node counts its own commits
        return sum(count.get("statewright_state_transitions_committed_total", 0.0) for count in counts)
    try:
        loop_machine = await create_machine(runaway, "w14-loop", LOOP)
        pass_machine = await create_machine(runaway, "w14-flood", PASS)
        phases: dict[str, list[dict[str, Any]]] = {"alone": [], "beside": []}
        flooding: list[dict[str, float]] = []
        for round_index in range(2):
            phases["alone"].append(await latency_at_rate(statewright, steady, chain_definition(), chain_input,
                                                         rate_per_s, duration_s, f"w14-alone-{round_index}", True))
            load = _Runaway(runaways, loop_machine, pass_machine, loops, flood)
            before, began = await transitions_so_far(), time.monotonic()
            load.start()
            phases["beside"].append(await latency_at_rate(statewright, steady, chain_definition(), chain_input,
                                                          rate_per_s, duration_s, f"w14-beside-{round_index}", True))
            await load.stop()
            elapsed, transitions = time.monotonic() - began, await transitions_so_far() - before
            flooding.append({"seconds": elapsed, "accepted": load.accepted, "throttled": load.throttled,
                             "loops_started": load.loops_started, "transitions": transitions})
    finally:
        steady.close()
        for pool in runaways:
            pool.close()
    found: dict[str, Any] = {"rate_per_s": rate_per_s, "duration_s": duration_s, "loops": loops, "flood": flood,
                             "nodes": len(nodes), "runaway": flooding}
    found.update(pooled_phases(phases))
    return found


async def timers_beside_a_burst(statewright: Statewright, burst: int, steady: int,
                                concurrency: int) -> dict[str, Any]:
    """The runaway account's ``burst`` Waits ending in one second, the steady account's ``steady`` Waits a second
    later: the steady timers' lateness (their executions' stop dates against their due time) and the burst's drain."""
    runaway_pool = Pool(statewright.endpoint, concurrency, key=RUNAWAY[1:])
    steady_pool = Pool(statewright.endpoint, 8, key=STEADY[1:])
    try:
        burst_machine = await create_machine(runaway_pool, "w14-burst", TIMER_DEFINITION)
        steady_machine = await create_machine(steady_pool, "w14-timers", TIMER_DEFINITION)
        due_ms = (int(time.time() + burst / 1_500 + 5) + 1) * 1000  # after every start, at a rate well below the
        # server's
        started = await start_closed_loop(runaway_pool, burst_machine, burst, concurrency,
                                          lambda _: json.dumps({"due": iso_ms(due_ms)}), "b", record=False)
        steady_due_ms = due_ms + 1000
        await start_closed_loop(steady_pool, steady_machine, steady, 8,
                                lambda _: json.dumps({"due": iso_ms(steady_due_ms)}), "s", record=False)
        if time.time() * 1000 >= due_ms:
            raise RuntimeError("the burst was not started before its Waits ended: give it fewer executions")
        await asyncio.sleep(max(due_ms / 1000 - time.time(), 0))
        drained = await wait_none_running(runaway_pool, burst_machine, 600, poll_s=0.2)
        drain_s = time.time() - due_ms / 1000
        await wait_none_running(steady_pool, steady_machine, 60, poll_s=0.2)
        lateness = [stop - steady_due_ms / 1000 for item in await list_all(steady_pool, steady_machine)
                    if (stop := stop_seconds(item)) is not None]
        burst_stops = [stop - due_ms / 1000 for item in await list_all(runaway_pool, burst_machine)
                       if (stop := stop_seconds(item)) is not None]
    finally:
        runaway_pool.close()
        steady_pool.close()
    return {"burst": burst, "steady": steady, "start_errors": len(started.errors), "burst_drained": drained,
            "burst_drain_s": drain_s, "burst_last_s": max(burst_stops, default=float("nan")),
            "steady_closed": len(lateness), "steady_late_p50_s": percentile(lateness, 0.5),
            "steady_late_p99_s": percentile(lateness, 0.99), "steady_late_max_s": max(lateness, default=float("nan"))}
