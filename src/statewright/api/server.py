"""Run statewright: open the store, start the engine, serve the API with uvicorn until stopped."""

from __future__ import annotations

import asyncio
import fcntl
import gc
import logging
import os
import socket
import sqlite3
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import orjson
import uvicorn

from ..cluster import channel, peers
from ..cluster.forwarding import Forwarder
from ..cluster.loop import MembershipLoop
from ..cluster.membership import EngineHooks, LeaseSettings, Membership
from ..decider.execution import DAY_MS, REDRIVABLE_MS
from ..decider.mocks import InvalidMockConfig, MockConfig
from ..engine.core import Engine, wall_clock_ms
from ..engine.heavy_lane import HeavyLane
from ..engine.limits import Limits
from ..engine.retention import COMPACT_AFTER_DAYS, RETENTION_DAYS, RetentionSettings
from ..integrations.aws import calls
from ..integrations.aws.functions import LocalFunctions
from ..integrations.http import Connections
from ..integrations.payload_store import open_payload_store
from ..integrations.status_events import read_webhooks
from ..store import open_store
from ..store.base import SchemaTooNew, ShardCountMismatch, Store, StoreUnavailable
from ..store.payloads import Histories
from .app import App
from .clock import VirtualClock, iso
from .retention import Retention
from .service import Service
from .transport import HttpLimits, protocol_class

log = logging.getLogger("statewright")

RECOUNT_OPEN_S = 30.0  # a cluster node counts RUNNING executions this often (the others commit too)


@dataclass(slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8083
    data_dir: Path = Path.home() / ".local" / "share" / "statewright"
    shards: int = 64
    account_id: str = "123456789012"
    region: str = "us-east-1"
    connections: Path | None = None  # HTTP Task credentials by ConnectionArn (see README)
    limits: Limits = field(default_factory=Limits)
    store: str | None = None  # a postgresql:// URL: PostgreSQL instead of the data directory's SQLite
    # A node of a cluster (on PostgreSQL): the secret every node shares, the URL the others reach this one at
    # (default: http://host:port), and its shard leases.
    cluster_secret: str | None = None
    advertise: str | None = None
    leases: LeaseSettings = field(default_factory=LeaseSettings)
    http: HttpLimits = field(default_factory=HttpLimits)  # connection timeouts and the connection limit
    virtual_clock: bool = False  # --clock virtual: time moves forward on request too (see clock.py)
    wait_scale: float = 1.0  # --wait-scale: Waits and Retry backoffs last this many times their length
    mock_config: Path | None = None  # --mock-config: mocked responses for executions started on ARN#TestCase
    functions: Path | None = None  # --functions: Lambda functions served at local URLs
    assume_machine_role: bool = False  # --assume-machine-role: AWS calls made as the state machine's role
    redrivable_days: int = REDRIVABLE_MS // DAY_MS  # --redrivable-days: how long after closing it can be redriven
    status_events_bus: str | None = None  # --status-events-bus: EventBridge bus of the status change events
    webhooks: Path | None = None  # --webhooks: URLs the status change events are POSTed to
    retention_days: float = RETENTION_DAYS  # --retention-days: a closed execution (history, name) is kept this long
    compact_after_days: float = COMPACT_AFTER_DAYS  # --compact-after-days: then its history goes to the payload store
    # --payload-store: s3://bucket/prefix or a directory (default: the store's own, store/payloads.py)
    payload_store: str | None = None


class DataDirInUse(Exception):
    pass


class DataDirUnusable(Exception):
    """The data directory cannot be created or written."""

    def __init__(self, data_dir: Path, reason: str) -> None:
        super().__init__(f"cannot keep data in {data_dir} ({reason}); pass --data-dir a directory this process can "
                         f"write, or --store a PostgreSQL URL")


def _lock_data_dir(data_dir: Path) -> int:
    """Hold an exclusive lock on the data directory for the life of the process."""
    descriptor = os.open(data_dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise DataDirInUse(f"another statewright process is serving {data_dir}; stop it or pass another "
                           f"--data-dir") from None
    return descriptor


class _Server(uvicorn.Server):
    """uvicorn's server, answering waiting long polls at once when asked to stop (they would hold it 60 s)."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    async def startup(self, sockets: list | None = None) -> None:
        await super().startup(sockets)
        # What is loaded by now (the service model, every module) lives as long as the process. Frozen, it is out
        # of the collector's way: a full collection walked it all, 20-40 ms with every thread stopped, twice a
        # second under load (a W11 p99 of 8-46 ms at half peak).
        gc.collect()
        gc.freeze()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._on_exit)
        super().handle_exit(sig, frame)


def _open(config: ServerConfig, address: str) -> tuple[Store, int | None, str]:
    """The store, the data directory's lock (None on PostgreSQL, which several nodes share), and where the data
    is, for the log."""
    if config.store:
        store = open_store(config.store, config.shards, address)
        return store, None, f"{store.location} ({store.shard_count()} shards, PostgreSQL)"
    data_dir = config.data_dir.expanduser().resolve()
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        lock = _lock_data_dir(data_dir)
    except OSError as exc:  # read-only, not a directory, no permission: say so, and what to do
        raise DataDirUnusable(data_dir, exc.strerror or str(exc)) from None
    try:
        store = open_store(data_dir / "statewright.db", config.shards)
    except sqlite3.Error as exc:  # e.g. a read-only database file in a writable directory
        os.close(lock)
        raise DataDirUnusable(data_dir, str(exc)) from None
    except BaseException:
        os.close(lock)
        raise
    return store, lock, f"{data_dir} ({store.shard_count()} shards, SQLite)"


def _join(store: Store, engine: Engine, address: str, config: ServerConfig) -> MembershipLoop:
    """A cluster node's membership: it takes the shards assigned to it as their leases come free."""
    renewals = engine.metrics.lease_renewals
    hooks = EngineHooks(engine.gain_shard, engine.renewed, engine.drop_shards,
                        lambda outcome, shards: renewals.labels(outcome).inc(shards))
    membership = Membership(store, address, address, hooks, config.leases, wait_for_drops_s=1.0)
    secret = config.cluster_secret.encode()
    return MembershipLoop(membership, engine.clock, lambda addresses: peers.poke(secret, addresses),
                          engine.tokens.refresh)


def _on_exit(service: Service) -> None:
    """SIGTERM or SIGINT, on the event loop: answer waiting long polls now, and hand the shards over at once (on
    a thread: the engine drains meanwhile) rather than after uvicorn has closed every connection."""
    service.matcher.release()
    threading.Thread(target=service.leave, name="statewright-leave", daemon=True).start()


def _mocks(path: Path) -> MockConfig:
    """The mock configuration file, checked; ValueError saying what is wrong with it."""
    try:
        return MockConfig.parse(orjson.loads(path.read_bytes()))
    except OSError as exc:
        raise ValueError(f"cannot read the mock configuration {path}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"the mock configuration {path} is not JSON: {exc}") from None
    except InvalidMockConfig as exc:
        raise ValueError(f"the mock configuration {path} cannot be used: {exc}") from None


def _retention(config: ServerConfig, store: Store, engine: Engine, service: Service) -> Retention:
    """Retention as configured, into the configured payload store or the store's own (a directory beside SQLite's
    file; a table of PostgreSQL's database, which every node reads). The engine reads compacted histories from
    the same place (a redrive)."""
    payloads = open_payload_store(config.payload_store, store, service.aws_clients, config.region)
    engine.histories = Histories(store, payloads)
    return Retention(engine, engine.histories, RetentionSettings(round(config.retention_days * DAY_MS),
                                                                 round(config.compact_after_days * DAY_MS)))


def _listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound and listening before anything starts: a second process on a port in use must
    fail before it takes any shard of its cluster (it would advertise the same address as the node serving there),
    and a node that tells this one of a membership change while it starts has its call wait in the backlog until
    the server accepts it, rather than refused (the change would then be seen only at the next renewal)."""
    listening = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host, port))
        listening.listen(socket.SOMAXCONN)
    except OSError:
        listening.close()
        raise
    return listening


def _reachable_host(host: str) -> str:
    """The host other nodes reach this one at, when it listens on every interface."""
    return socket.getfqdn() if host in ("0.0.0.0", "::", "") else host


def serve(config: ServerConfig) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per membership poke otherwise
    address = config.advertise or f"http://{_reachable_host(config.host)}:{config.port}"
    try:
        mocks = None if config.mock_config is None else _mocks(config.mock_config)
        connections = Connections(config.connections)
        functions = LocalFunctions(config.functions)
        webhooks = read_webhooks(config.webhooks) if config.webhooks else []
        store, lock, where = _open(config, address)
    except (DataDirInUse, DataDirUnusable, ShardCountMismatch, SchemaTooNew, StoreUnavailable, ValueError,
            OSError) as exc:  # InvalidFunctions and InvalidWebhooks are ValueErrors
        print(f"statewright: {exc}", file=sys.stderr)
        return 1
    try:
        listening = _listen(config.host, config.port)
    except OSError as exc:
        print(f"statewright: cannot listen on {config.host}:{config.port} ({exc.strerror or exc}): stop what serves "
              f"there or pass another --port", file=sys.stderr)
        store.close()
        if lock is not None:
            os.close(lock)
        return 1
    virtual = None
    if config.virtual_clock:
        if config.store:
            print("statewright: --clock virtual runs one server on SQLite (nodes would disagree on the time); drop "
                  "--store", file=sys.stderr)
            store.close()
            return 1
        virtual = VirtualClock(store)
    engine = Engine(store, node_id=address, limits=config.limits, clock=virtual or wall_clock_ms,
                    wait_scale=config.wait_scale, mocks=mocks, resource_check=calls.resource_problems,
                    redrivable_ms=config.redrivable_days * DAY_MS,
                    status_events=config.status_events_bus is not None or bool(webhooks), heavy_lane=HeavyLane)
    status_events = {"bus": config.status_events_bus, "webhooks": webhooks}
    node = None  # a cluster node's membership
    if config.store:
        if not config.cluster_secret:
            print("statewright: a node on PostgreSQL needs the cluster's secret: pass --cluster-secret S (or set "
                  "STATEWRIGHT_CLUSTER_SECRET), the same on every node", file=sys.stderr)
            store.close()
            return 1
        if not store.adopt_cluster_secret(peers.secret_check(config.cluster_secret.encode()), address,
                                          wall_clock_ms()):
            print(f"statewright: the live nodes on {store.location} share another cluster secret: start this node "
                  f"with theirs (--cluster-secret or STATEWRIGHT_CLUSTER_SECRET); to change it, stop every node "
                  f"first", file=sys.stderr)
            store.close()
            return 1
        node = _join(store, engine, address, config)
        service = Service(store, engine, config.account_id, connections, config.limits,
                          Forwarder(node.membership, config.cluster_secret, store.shard_count(), engine.metrics),
                          functions=functions, assume_machine_role=config.assume_machine_role,
                          status_events=status_events)
        service.membership_changed = node.wake
        service.leave = node.stop
        service.peers = node.others
    else:
        service = Service(store, engine, config.account_id, connections, config.limits, functions=functions,
                          assume_machine_role=config.assume_machine_role, status_events=status_events)
    service.retention = _retention(config, store, engine, service)
    if node is None:
        engine.start()
    else:
        engine.start(all_shards=False)
        node.start()
    engine.metrics.count_open_executions(store.open_count, None if node is None else RECOUNT_OPEN_S)
    app = App(service, config.region, virtual)
    print(f"statewright: data in {where}", flush=True)
    for advice in store.advice():
        print(f"statewright: warning: {advice}", flush=True)
    if node is not None:
        print(f"statewright: cluster node {address} (leases {config.leases.lease_ms} ms, renewed every "
              f"{config.leases.renew_ms} ms)", flush=True)
    if len(functions):
        print(f"statewright: {len(functions)} Lambda functions served at the URLs in {config.functions}", flush=True)
    if mocks is not None:
        print(f"statewright: mocked responses from {config.mock_config} ({len(mocks.cases)} state machines with "
              f"test cases); start executions on STATE_MACHINE_ARN#TestCase", flush=True)
    print(f"statewright: closed executions kept {config.retention_days:g} days, their histories compacted into "
          f"{service.retention.payloads_location} after {config.compact_after_days:g} days", flush=True)
    if virtual is not None:
        print(f"statewright: virtual clock at {iso(virtual())}; move it with `statewright clock advance 1d "
              f"--endpoint-url http://{config.host}:{config.port}`", flush=True)
    print(f"statewright: serving the Step Functions API on http://{config.host}:{config.port}", flush=True)
    server = _Server(uvicorn.Config(app, host=config.host, port=config.port, log_level="warning", access_log=False,
                                    lifespan="on", proxy_headers=False, server_header=False,
                                    http=protocol_class(config.http),
                                    timeout_keep_alive=config.http.keep_alive_ms / 1000,
                                    ws_max_size=channel.MESSAGE_BYTES_MAX,
                                    ws_max_queue=channel.MESSAGES_QUEUED_MAX),
                     on_exit=lambda: _on_exit(service))
    try:
        server.run(sockets=[listening])
    finally:
        engine.stop()
        service.close()
        store.close()
        if lock is not None:
            os.close(lock)
    return 0
