"""Several statewright nodes in the test's process: each its own store connection to ONE SQLite file (or one
PostgreSQL schema, given its URL), its own engine
and its own uvicorn server on a free port, with the shards split between them by hand (the shard leases in the
store, then ``Engine.gain_shard``), as membership will do it.

``StoreDirectory`` finds a shard's owner the way the cluster does: the lease holder in the store's shard rows and
that node's address in its node record, as of the last ``refresh``.
"""

from __future__ import annotations

import time
from pathlib import Path

import boto3
from botocore.config import Config

from asgi import ACCOUNT, Threaded
from statewright.api.app import App
from statewright.cluster.forwarding import Forwarder
from statewright.engine.engine import Engine
from statewright.engine.limits import Limits
from statewright.engine.shards import shard_for
from statewright.node import Cluster, build_node
from statewright.store import open_store
from statewright.store.base import Store

SHARDS = 4
SECRET = "cluster-secret-for-tests"
_FOR_GOOD_MS = 3_600_000  # the tests' leases outlast them: nothing renews them


class StoreDirectory:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.refreshes = 0
        self._owners: dict[int, str] = {}
        self._addresses: dict[str, str] = {}
        self.refresh()

    def owner_address(self, shard_id: int) -> str | None:
        return self._owners.get(shard_id)

    def others(self, node_id: str) -> list[str]:
        """Every registered node's address but ``node_id``'s, as of the last refresh (the tests' nodes live on)."""
        return [address for node, address in self._addresses.items() if node != node_id]

    def refresh(self) -> None:
        self._addresses = addresses = {node.node_id: node.address for node in self.store.nodes()}
        self._owners = {lease.shard_id: addresses[lease.owner] for lease in self.store.shard_leases()
                        if lease.owner in addresses}
        self.refreshes += 1


class Node:
    def __init__(self, db: Path | str, node_id: str, *, secret: str | None = SECRET, deadline_s: float = 15.0,
                 limits: Limits | None = None) -> None:
        self.node_id = node_id
        self.store = open_store(db, SHARDS)
        self.directory = StoreDirectory(self.store)

        def cluster(engine: Engine) -> Cluster:
            return Cluster(Forwarder(self.directory, secret, SHARDS, engine.metrics, deadline_s=deadline_s),
                           peers=lambda: self.directory.others(node_id))
        node = build_node(self.store, lambda edges, histories: Engine(self.store, node_id=node_id, limits=limits,
                                                                      edges=edges, histories=histories),
                          account_id=ACCOUNT, limits=limits, cluster=None if secret is None else cluster)
        self.engine, self.service = node.engine, node.service
        self.server = Threaded(App(self.service), lifespan="on")
        self.endpoint = self.server.endpoint
        self.running = False

    def start(self) -> Node:
        self.store.register_node(self.node_id, self.endpoint, _now_ms() + _FOR_GOOD_MS)
        self.engine.start(all_shards=False)  # shards come from ``take``
        self.server.__enter__()
        self.running = True
        return self

    def stop(self) -> None:
        """Shut the server down (its lifespan stops the engine); its port refuses connections from then on."""
        if self.running:
            self.running = False
            self.server.__exit__(None, None, None)
            self.engine.stop()  # in case uvicorn did not get to its lifespan shutdown

    def close(self) -> None:
        self.stop()
        self.service.close()
        self.store.close()

    def take(self, shards: set[int]) -> None:
        """Acquire the shards' leases (fencing out their last owner) and serve them."""
        for shard in shards:
            range_id = self.store.acquire_shard(shard, self.node_id, _now_ms() + _FOR_GOOD_MS)
            self.engine.gain_shard(shard, range_id, None)
        self.wait_until(lambda: all(self.engine.owns(shard) for shard in shards))

    def give_up(self, shards: set[int]) -> None:
        """Stop serving the shards and release their leases, as a graceful handoff does."""
        range_ids = {shard: self.engine.range_ids[shard] for shard in shards}
        self.engine.drop_shards(shards).result(timeout=30)
        self.store.release_shards(self.node_id, range_ids)

    def client(self, **config: object):
        return boto3.client(
            "stepfunctions", endpoint_url=self.endpoint, region_name="us-east-1", aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(retries={"max_attempts": 0}, inject_host_prefix=False, **config))

    def metric(self, text: str) -> float:
        """The value of one sample line of this node's /metrics (0 when absent)."""
        for line in self.engine.metrics.exposition().decode().splitlines():
            if line.startswith(text + " "):
                return float(line.rpartition(" ")[2])
        return 0.0

    @staticmethod
    def wait_until(condition, deadline_s: float = 30) -> None:
        """A bounded wait for something another thread does, not a timing assertion."""
        deadline = time.monotonic() + deadline_s
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError("the condition did not come true within the bounded wait")
            time.sleep(0.01)


def name_on(machine_arn: str, shards: set[int], prefix: str) -> str:
    """An execution name whose ARN lands on one of ``shards``."""
    base = machine_arn.replace(":stateMachine:", ":execution:", 1)
    for n in range(10_000):
        if shard_for(f"{base}:{prefix}-{n}", SHARDS) in shards:
            return f"{prefix}-{n}"
    raise AssertionError("no name found")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
