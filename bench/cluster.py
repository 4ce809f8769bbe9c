"""W7: several statewright nodes on one PostgreSQL database.

- Scale-out: 1, 2 and 3 nodes, each capped by a cgroup (v1) CPU quota so the nodes, not PostgreSQL or the load
  generator, are the bottleneck; W1's chain is started round-robin over the nodes (as behind a load balancer: most
  named starts are forwarded to the owner of their shard), each node with clients of its own, and committed
  transitions/s are compared with one node's, in rounds (see ``w7``).
- Failover: SIGKILL of one of three nodes; the time until every shard is served again (the target is one lease
  period plus a second), read from the survivors' ``statewright_shards_owned``.
- Hand-over: SIGTERM of one of three nodes; the same time, which a graceful hand-over keeps to milliseconds.
- Dispatch across nodes: workers long-poll one node only, executions of an activity Task are started over all
  three at a moderate rate and at a busy one; the dispatch latency (ActivityScheduled to ActivityStarted, from
  histories) of the tasks whose execution another node owns, beside those it owns itself.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from statewright.engine.shards import shard_for

from . import workloads
from .client import Pool
from .servers import Statewright, database_name

CGROUP = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 10_000
SHARDS = 64
# Dispatch across nodes at a moderate rate, where the machine (3 nodes, PostgreSQL, the load generator and the
# workers on 2 cores) is mostly idle, and at a busy one, where it is three quarters busy: (tasks/s, seconds).
DISPATCH_RATES = ((50, 20), (200, 10))
MODERATE_RATE_PER_S = 50


class Node(Statewright):
    """A cluster node on a shared database, optionally in a CPU-capped cgroup of its own."""

    def __init__(self, work: Path, index: int, store: str, quota: float | None,
                 extra_args: tuple[str, ...] = ()) -> None:
        super().__init__(work / f"node-{index}", SHARDS, extra_args=extra_args)
        self.store = store
        self.quota = quota
        self.cgroup = CGROUP / f"statewright-bench-{os.getpid()}-{index}"

    def start(self) -> float:
        took = super().start()
        if self.quota is not None:
            self.cgroup.mkdir(exist_ok=True)
            (self.cgroup / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.cgroup / "cpu.cfs_quota_us").write_text(str(int(PERIOD_US * self.quota)))
            (self.cgroup / "cgroup.procs").write_text(str(self.pid))
        return took

    def remove_cgroup(self) -> None:
        if self.cgroup.exists():
            for pid in (self.cgroup / "cgroup.procs").read_text().split():  # back to the root group first
                (CGROUP / "cgroup.procs").write_text(pid)
            self.cgroup.rmdir()

    def owned(self) -> int:
        try:
            text = urllib.request.urlopen(self.endpoint + "/metrics", timeout=2).read().decode()
        except OSError:
            return 0
        for line in text.splitlines():
            if line.startswith("statewright_shards_owned "):
                return int(float(line.split()[1]))
        return 0


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy (not idle or waiting for I/O), from /proc/stat."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def fresh_database(postgres: str, label: str) -> tuple[str, str]:
    name = database_name(label)
    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return name, postgres.rsplit("/", 1)[0] + f"/{name}"


def drop_database(postgres: str, name: str) -> None:
    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def start_nodes(work: Path, store: str, count: int, quota: float | None,
                extra_args: tuple[str, ...] = ()) -> list[Node]:
    nodes = [Node(work, index, store, quota, extra_args) for index in range(count)]
    for node in nodes:  # the default leases: 10 s, renewed every 3 s
        node.start()
    wait_served(nodes, 120)
    return nodes


def wait_served(nodes: list[Node], deadline_s: float) -> float:
    """Seconds until the nodes together serve every shard."""
    began = time.monotonic()
    while sum(node.owned() for node in nodes) < SHARDS:
        if time.monotonic() - began > deadline_s:
            raise RuntimeError("the nodes did not come to serve every shard")
        time.sleep(0.005)
    return time.monotonic() - began


def stop_nodes(nodes: list[Node]) -> None:
    for node in nodes:
        node.kill()
        node.remove_cgroup()


async def chain_on(nodes: list[Node], n: int, concurrency: int, named: bool) -> dict[str, Any]:
    """W1's chain, started round-robin over the nodes; committed transitions/s over all of them. ``named``: each
    start names its execution (most are forwarded to the owner of its shard); otherwise the node that gets the
    start names it, on a shard of its own. Each node gets ``concurrency`` clients of its own: with a fixed total,
    each of three nodes would have a third of them, too few to keep it busy while its starts wait on another node,
    and the figure would measure that wait instead of what the nodes can do."""
    pools = [Pool(node.endpoint, concurrency) for node in nodes]
    try:
        machine = await workloads.create_machine(pools[0], "w7", workloads.chain_definition())
        scraped = [await workloads.scrape(pool) for pool in pools]
        cpu_before = [node.cpu_s() for node in nodes]
        began = time.time()
        runs = await asyncio.gather(*(workloads.start_closed_loop(
            pool, machine, n // len(nodes), concurrency, workloads.chain_input,
            f"r{index}" if named else None)
            for index, pool in enumerate(pools)))
        await workloads.wait_none_running(pools[0], machine, 900)
        elapsed = time.time() - began
        busy = [(node.cpu_s() - before) / elapsed for node, before in zip(nodes, cpu_before, strict=True)]
        after = [await workloads.scrape(pool) for pool in pools]
        transitions = sum(workloads.metric_delta(b, a, "statewright_state_transitions_committed_total")
                          for b, a in zip(scraped, after, strict=True))
        forwarded = sum(workloads.metric_delta(b, a, "statewright_forwarded_calls_total{outcome=answered}")
                        for b, a in zip(scraped, after, strict=True))
        return {"nodes": len(nodes), "named": named, "transitions_per_s": transitions / elapsed, "elapsed_s": elapsed,
                "errors": sum(len(run.errors) for run in runs), "forwarded": forwarded,
                "node_cores": sum(busy) / len(busy)}
    finally:
        for pool in pools:
            pool.close()


async def dispatch_across(nodes: list[Node], store: str, rate_per_s: float, seconds: float,
                          workers: int) -> dict[str, Any]:
    """Activity tasks started over every node, polled at the first only: dispatch latency by where they live."""
    pools = [Pool(node.endpoint, 64) for node in nodes]
    worker_pool = Pool(nodes[0].endpoint, workers * 2)
    answered: list[float] = []
    errors: list[str] = []
    busy_before = machine_busy_s()
    began = time.monotonic()
    try:
        activity = (await pools[0].call("CreateActivity", {"name": f"w7-{os.getpid()}"}))["activityArn"]
        machine = await workloads.create_machine(pools[0], "w7d", workloads.activity_definition(activity))
        polling = [asyncio.create_task(workloads.answer_tasks(worker_pool, activity, f"w{index}", answered, errors))
                   for index in range(workers)]
        try:
            runs = await asyncio.gather(*(workloads.start_open_loop(
                pool, machine, rate_per_s / len(pools), seconds, lambda index: f'{{"i": {index}}}', f"d{number}")
                for number, pool in enumerate(pools)))
            await workloads.wait_none_running(pools[0], machine, 120)
            busy = (machine_busy_s() - busy_before) / (time.monotonic() - began) / os.cpu_count()
        finally:
            for task in polling:
                task.cancel()
            await asyncio.gather(*polling, return_exceptions=True)
        with psycopg.connect(store, autocommit=True) as db:
            owners = dict(db.execute("SELECT shard_id, owner FROM shards").fetchall())
        prefix = machine.replace(":stateMachine:", ":execution:", 1)
        latencies: dict[bool, list[float]] = {True: [], False: []}  # across nodes -> ms
        for run in runs:
            for name in run.sent:
                arn = f"{prefix}:{name}"
                history = await pools[0].call("GetExecutionHistory", {"executionArn": arn, "maxResults": 20})
                times = {event["type"]: event["timestamp"] for event in history["events"]}
                if "ActivityScheduled" in times and "ActivityStarted" in times:
                    across = owners[shard_for(arn, SHARDS)] != nodes[0].endpoint
                    latencies[across].append((times["ActivityStarted"] - times["ActivityScheduled"]) * 1000)
    finally:
        worker_pool.close()
        for pool in pools:
            pool.close()
    return {"rate_per_s": rate_per_s, "workers": workers, "reply_errors": len(errors), "machine_busy": busy,
            **{f"{where}_{stat}_ms": (workloads.percentile(values, fraction) if fraction else max(values, default=0))
               for where, values in (("across", latencies[True]), ("local", latencies[False]))
               for stat, fraction in (("p50", 0.5), ("p99", 0.99), ("max", None))},
            "across_n": len(latencies[True]), "local_n": len(latencies[False])}


def _served_again_after(work: Path, postgres: str, sig: signal.Signals) -> float:
    """Seconds from ``sig`` to the node of three holding most shards until the others serve every shard."""
    name, store = fresh_database(postgres, f"w7-{sig.name.lower()}")
    nodes = start_nodes(work, store, 3, None)
    try:
        victim = max(nodes, key=Node.owned)
        victim.process.send_signal(sig)
        return wait_served([node for node in nodes if node is not victim], 60)
    finally:
        stop_nodes(nodes)
        drop_database(postgres, name)


async def w7(work: Path, postgres: str, n: int, concurrency: int, quota: float, rounds: int) -> dict[str, Any]:
    """Scale-out and hand-over once per round: throttled processes on 2 shared cores make the host's speed drift
    from one phase to the next, so each node count is measured in every round, in turn, and the figures given are
    the rounds' means (with each round's own ratio)."""
    results: dict[str, Any] = {"quota": quota, "rounds": rounds, "scale_out": [], "scale_out_unnamed": [],
                               "handover_s": []}
    runs: dict[tuple[bool, int], list[dict[str, Any]]] = {(named, count): [] for named in (True, False)
                                                          for count in (1, 2, 3)}
    for _ in range(rounds):
        for count in (1, 2, 3):
            name, store = fresh_database(postgres, f"w7-{count}")
            nodes = start_nodes(work, store, count, quota)
            try:
                for named in (True, False):
                    runs[(named, count)].append(await chain_on(nodes, n, concurrency, named))
            finally:
                stop_nodes(nodes)
                drop_database(postgres, name)
        results["handover_s"].append(_served_again_after(work, postgres, signal.SIGTERM))
    for named, key in ((True, "scale_out"), (False, "scale_out_unnamed")):
        for count in (1, 2, 3):
            mine, ones = runs[(named, count)], runs[(named, 1)]
            results[key].append({
                "nodes": count, "named": named, "runs": mine,
                "transitions_per_s": sum(run["transitions_per_s"] for run in mine) / rounds,
                "node_cores": sum(run["node_cores"] for run in mine) / rounds,
                "round_ratios": [run["transitions_per_s"] / one["transitions_per_s"]
                                 for run, one in zip(mine, ones, strict=True)]})
    results["failover_s"] = _served_again_after(work, postgres, signal.SIGKILL)
    name, store = fresh_database(postgres, "w7-dispatch")
    nodes = start_nodes(work, store, 3, None)
    try:
        results["dispatch"] = [await dispatch_across(nodes, store, rate, seconds, 16)
                               for rate, seconds in DISPATCH_RATES]
    finally:
        stop_nodes(nodes)
        drop_database(postgres, name)
    return results
