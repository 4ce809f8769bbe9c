"""W7: several statewright nodes on one PostgreSQL database.

- Scale-out: 1, 2 and 3 nodes, each capped by a cgroup (v1) CPU quota so the nodes, not PostgreSQL or the load
  generator, are the bottleneck; W1's chain is started round-robin over the nodes (as behind a load balancer: most
  starts are forwarded to the owner of their shard) and committed transitions/s are compared with one node's.
- Failover: SIGKILL of one of three nodes; the time until every shard is served again (the target is one lease
  period plus a second), read from the survivors' ``statewright_shards_owned``.
- Hand-over: SIGTERM of one of three nodes; the same time, which a graceful hand-over keeps to milliseconds.
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

from . import workloads
from .client import Pool
from .servers import Statewright, database_name

CGROUP = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000
SHARDS = 64


class Node(Statewright):
    """A cluster node on a shared database, optionally in a CPU-capped cgroup of its own."""

    def __init__(self, work: Path, index: int, store: str, quota: float | None) -> None:
        super().__init__(work / f"node-{index}", SHARDS)
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


def fresh_database(postgres: str, label: str) -> tuple[str, str]:
    name = database_name(label)
    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return name, postgres.rsplit("/", 1)[0] + f"/{name}"


def drop_database(postgres: str, name: str) -> None:
    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def start_nodes(work: Path, store: str, count: int, quota: float | None) -> list[Node]:
    nodes = [Node(work, index, store, quota) for index in range(count)]
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


async def chain_on(nodes: list[Node], n: int, concurrency: int) -> dict[str, Any]:
    """W1's chain, started round-robin over the nodes; committed transitions/s over all of them."""
    pools = [Pool(node.endpoint, max(concurrency // len(nodes), 1)) for node in nodes]
    try:
        machine = await workloads.create_machine(pools[0], "w7", workloads.chain_definition())
        scraped = [await workloads.scrape(pool) for pool in pools]
        cpu_before = [node.cpu_s() for node in nodes]
        began = time.time()
        runs = await asyncio.gather(*(workloads.start_closed_loop(
            pool, machine, n // len(nodes), max(concurrency // len(nodes), 1), workloads.chain_input, f"r{index}")
            for index, pool in enumerate(pools)))
        await workloads.wait_none_running(pools[0], machine, 900)
        elapsed = time.time() - began
        busy = [(node.cpu_s() - before) / elapsed for node, before in zip(nodes, cpu_before, strict=True)]
        after = [await workloads.scrape(pool) for pool in pools]
        transitions = sum(workloads.metric_delta(b, a, "statewright_state_transitions_committed_total")
                          for b, a in zip(scraped, after, strict=True))
        forwarded = sum(workloads.metric_delta(b, a, "statewright_forwarded_calls_total{outcome=answered}")
                        for b, a in zip(scraped, after, strict=True))
        return {"nodes": len(nodes), "transitions_per_s": transitions / elapsed, "elapsed_s": elapsed,
                "errors": sum(len(run.errors) for run in runs), "forwarded": forwarded,
                "node_cores": sum(busy) / len(busy)}
    finally:
        for pool in pools:
            pool.close()


async def w7(work: Path, postgres: str, n: int, concurrency: int, quota: float) -> dict[str, Any]:
    results: dict[str, Any] = {"quota": quota, "scale_out": []}
    for count in (1, 2, 3):
        name, store = fresh_database(postgres, f"w7-{count}")
        nodes = start_nodes(work, store, count, quota)
        try:
            results["scale_out"].append(await chain_on(nodes, n, concurrency))
        finally:
            stop_nodes(nodes)
            drop_database(postgres, name)
    for how, sig in (("failover_s", signal.SIGKILL), ("handover_s", signal.SIGTERM)):
        name, store = fresh_database(postgres, f"w7-{how}")
        nodes = start_nodes(work, store, 3, None)
        try:
            victim = max(nodes, key=Node.owned)
            victim.process.send_signal(sig)
            results[how] = wait_served([node for node in nodes if node is not victim], 60)
        finally:
            stop_nodes(nodes)
            drop_database(postgres, name)
    return results
