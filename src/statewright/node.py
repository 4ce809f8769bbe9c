"""One statewright node, wired top to bottom: open the store, build the engine with its edges, the integrations,
membership and the API, then serve them with uvicorn until stopped. Nothing else builds these: ``statewright serve``
(cli.py) runs ``serve``; nodes in a test's own process (tests/asgi.py, tests/nodes.py) build theirs with
``build_node`` over a store and an engine of their own, and serve its service with ``api.app.App``.

Each part gets its collaborators as it is built, in the order of ``build_node``: the integrations, then the engine
with its edges (where its dispatches, history events and replies go, and in a cluster its forwarded stages and
removed dispatches) given to its constructor, then the service. Where two parts need each other (the engine and the
service behind the API, the engine and a cluster's forwarder), the one built first reaches the other through a name
bound later in ``build_node``, called only once the engine runs.

Imports every layer; only cli.py, testing/, sim/ and the tests import it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import socket
import sqlite3
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import orjson
import uvicorn

from . import logs
from .api.accounts import AccountsFileError
from .api.app import App
from .api.auth import Door, SigV4Door, door
from .api.clock import VirtualClock, iso
from .api.quotas import Quotas, preset, with_settings
from .api.retention import Retention
from .api.service import Service
from .api.transport import HttpLimits, protocol_class
from .cluster import channel
from .cluster.forwarding import Forwarder
from .cluster.loop import MembershipLoop
from .cluster.membership import ASSIGNMENT_RULE, EngineHooks, LeaseSettings, Membership
from .cluster.peers import poke, secret_check
from .collector import Collector
from .console import ConsoleSources, ExpressRing, HistoryFeed
from .console.pages import cluster_view
from .data_dir import DataDirInUse, lock_data_dir
from .decider.execution import DAY_MS, REDRIVABLE_MS
from .decider.mocks import InvalidMockConfig, MockConfig
from .engine.batch import Logged
from .engine.core import wall_clock_ms
from .engine.edges import Edges
from .engine.engine import Engine
from .engine.heavy_lane import HeavyLane
from .engine.limits import Limits
from .engine.retention import COMPACT_AFTER_DAYS, RETENTION_DAYS, RetentionSettings
from .integrations.activities import ActivityMatcher
from .integrations.aws import calls
from .integrations.aws.clients import AwsClients
from .integrations.aws.functions import LocalFunctions
from .integrations.aws.item_reader import ItemReader
from .integrations.aws.result_writer import ResultWriter
from .integrations.aws.tasks import AwsTasks
from .integrations.dispatcher import Dispatcher
from .integrations.execution_logs import ExecutionLogs
from .integrations.http import Connections, HttpTasks
from .integrations.payload_store import open_payload_store
from .integrations.status_events import StatusEvents, read_webhooks
from .integrations.traces import CallSpans, ExecutionTraces, Tracing, endpoint_of
from .logs import event
from .store import open_store
from .store.base import SchemaTooNew, ShardCountMismatch, Store, StoreUnavailable
from .store.payloads import Histories

ACCOUNT_ID = "123456789012"  # the account in ARNs unless --account-id names another
CONSOLE_EXPRESS = 20  # Express executions the console keeps per state machine, by default
REGION = "us-east-1"  # the region of requests not signed for one unless --region names another
RECOUNT_OPEN_S = 30.0  # a cluster node counts RUNNING executions this often (the others commit too)
# A node built by ``build_node`` alone (in a test's process) keeps closed executions 90 days and never compacts.
NO_COMPACTION = RetentionSettings(compact_after_ms=None)

log = logging.getLogger("statewright")


@dataclass(slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8083
    data_dir: Path = Path.home() / ".local" / "share" / "statewright"
    shards: int = 64
    account_id: str = ACCOUNT_ID
    region: str = REGION
    connections: Path | None = None  # HTTP Task credentials by ConnectionArn (see README)
    limits: Limits = field(default_factory=Limits)
    store: str | None = None  # a postgresql:// URL: PostgreSQL instead of the data directory's SQLite
    # A node of a cluster (on PostgreSQL): the secret every node shares, the URL the others reach this one at
    # (default: http://host:port), and its shard leases.
    cluster_secret: str | None = None
    advertise: str | None = None
    leases: LeaseSettings = field(default_factory=LeaseSettings)
    http: HttpLimits = field(default_factory=HttpLimits)  # connection timeouts and the connection limit
    virtual_clock: bool = False  # --clock virtual: time moves forward on request too (see api/clock.py)
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
    log_level: str = "INFO"  # --log-level
    log_format: str = "text"  # --log-format: text or json (logs.py)
    otlp_endpoint: str | None = None  # --otlp-endpoint: where traces go (default: $OTEL_EXPORTER_OTLP_ENDPOINT)
    shard_weight: int = 1  # --shard-weight: a cluster node's share of the shards (cluster/membership.py)
    console_express: int = CONSOLE_EXPRESS  # --console-express-executions: kept per state machine for the console
    auth: str = "open"  # --auth: open (any caller, one account) or sigv4 (signed by the keys of --accounts)
    accounts: Path | None = None  # --accounts: the accounts file of --auth sigv4 (api/accounts.py)
    quota_mode: str | None = None  # --limits: aws, local or relaxed (None: aws with --auth sigv4, else local)
    quota_settings: dict[str, str] = field(default_factory=dict)  # --limit NAME=VALUE, over the mode's


class DataDirUnusable(Exception):
    """The data directory cannot be created or written."""

    def __init__(self, data_dir: Path, reason: str) -> None:
        super().__init__(f"cannot keep data in {data_dir} ({reason}); pass --data-dir a directory this process can "
                         f"write, or --store a PostgreSQL URL")


def serve(config: ServerConfig) -> int:
    """``statewright serve``: build the node ``config`` describes and serve it until SIGTERM or SIGINT; the exit
    status (1, with what to do on stderr, when the configuration or the store cannot be used)."""
    logs.configure(config.log_level, config.log_format)
    address = config.advertise or f"http://{_reachable_host(config.host)}:{config.port}"
    # The store, and the files the configuration names, read before anything starts.
    try:
        mocks = None if config.mock_config is None else _mocks(config.mock_config)
        connections = Connections(config.connections)
        functions = LocalFunctions(config.functions)
        webhooks = read_webhooks(config.webhooks) if config.webhooks else []
        otlp = endpoint_of(config.otlp_endpoint)
        front = door(config.auth, config.account_id, config.region, config.accounts)
        quotas = Quotas(with_settings(preset(config.quota_mode or ("aws" if config.auth == "sigv4" else "local")),
                                      config.quota_settings),
                        front.accounts.limits_of if isinstance(front, SigV4Door) else lambda account: None)
        store, lock, where = _open(config, address)
    except (DataDirInUse, DataDirUnusable, ShardCountMismatch, SchemaTooNew, StoreUnavailable, ValueError,
            OSError, AccountsFileError) as exc:  # InvalidFunctions and InvalidWebhooks are ValueErrors
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
    if config.virtual_clock and config.store:
        print("statewright: --clock virtual runs one server on SQLite (nodes would disagree on the time); drop "
              "--store", file=sys.stderr)
        store.close()
        return 1
    virtual = VirtualClock(store) if config.virtual_clock else None
    # The integrations, the engine with its edges leading to them, a cluster node's membership and forwarder, and
    # the service behind the API; the engine starts once they all exist.
    if config.store:
        refused = _cluster_refusal(config, store, address)
        if refused is not None:
            print(f"statewright: {refused}", file=sys.stderr)
            store.close()
            return 1

    tracing = None if otlp is None else Tracing(otlp, address)

    def join(engine: Engine) -> Cluster:
        membership = _join(store, engine, address, config)
        return Cluster(Forwarder(membership.membership, config.cluster_secret, store.shard_count(), engine.metrics),
                       membership)

    node = build_node(
        store, lambda edges, histories: Engine(
            store, node_id=address, limits=config.limits, clock=virtual or wall_clock_ms, edges=edges,
            histories=histories, wait_scale=config.wait_scale, mocks=mocks, resource_check=calls.resource_problems,
            redrivable_ms=config.redrivable_days * DAY_MS,
            status_events=config.status_events_bus is not None or bool(webhooks), heavy_lane=HeavyLane,
            transition_rate=None if not _budgets_transitions(quotas, front) else (
                lambda region, account: _transition_rate(quotas, node.service, region, account))),
        account_id=config.account_id, region=config.region, limits=config.limits, connections=connections,
        functions=functions, assume_machine_role=config.assume_machine_role,
        status_events={"bus": config.status_events_bus, "webhooks": webhooks},
        cluster=join if config.store else None,
        retention=RetentionSettings(round(config.retention_days * DAY_MS), round(config.compact_after_days * DAY_MS)),
        payload_store=config.payload_store, own_endpoint=f"http://{_local_host(config.host)}:{config.port}",
        tracing=tracing, console_express=config.console_express,
        own_keys=front.own_keys if isinstance(front, SigV4Door) else None, quotas=quotas)
    engine, service, membership = node.engine, node.service, node.membership
    # The process's full collections, while the engine has nothing to do
    collector = Collector(observed=engine.metrics.gc_full_pass_seconds.observe)
    collector.install()
    engine.start(all_shards=membership is None, collector=collector)
    if membership is not None:
        membership.start()
    engine.metrics.count_open_executions(store.open_count, None if membership is None else RECOUNT_OPEN_S)
    # The API, then serve.
    app = App(service, config.region, virtual, front)
    if isinstance(front, SigV4Door):
        count = len(front.accounts.accounts)
        event(log, "auth", "requests must be signed (SigV4) with a key of the %d account%s in %s; SIGHUP reads it "
              "again", count, "" if count == 1 else "s", front.accounts.path, accounts=count)
    _report(config, service, store, where, address, functions, mocks, virtual, tracing)
    server = _Server(uvicorn.Config(app, host=config.host, port=config.port, log_level="warning", access_log=False,
                                    lifespan="on", proxy_headers=False, server_header=False,
                                    http=protocol_class(config.http),
                                    timeout_keep_alive=config.http.keep_alive_ms / 1000,
                                    ws_max_size=channel.MESSAGE_BYTES_MAX,
                                    ws_max_queue=channel.MESSAGES_QUEUED_MAX),
                     on_exit=lambda: _on_exit(service), on_hangup=lambda: _reread_accounts(front))
    try:
        server.run(sockets=[listening])
    finally:
        engine.stop()
        event(log, "stopped", "stopped: the engine's last tick committed; %d dispatches stay in the outbox for the "
              "next start", len(engine.outbox), dispatches=len(engine.outbox))
        collector.uninstall()
        if node.traces is not None:
            node.traces.close()
        if tracing is not None:
            tracing.close()
        service.close()
        store.close()
        if lock is not None:
            os.close(lock)
    return 0


@dataclass(slots=True)
class Cluster:
    """What makes a node one of several: the ``forwarder`` to the shards the others serve; the ``membership`` that
    steps when told and is left on shutdown (None: a test hands shards out itself); the other nodes' addresses
    (``peers``, by default the membership's)."""
    forwarder: Forwarder
    membership: MembershipLoop | None = None
    peers: Callable[[], list[str]] | None = None


@dataclass(slots=True)
class Node:
    engine: Engine
    service: Service
    membership: MembershipLoop | None
    traces: ExecutionTraces | None = None  # the history's spans (closed after the engine stops)


def build_node(store: Store, engine: Callable[[Edges, Histories], Engine], *, account_id: str = ACCOUNT_ID,
               region: str = REGION, limits: Limits | None = None, connections: Connections | None = None,
               functions: LocalFunctions | None = None, assume_machine_role: bool = False,
               status_events: dict[str, Any] | None = None, cluster: Callable[[Engine], Cluster] | None = None,
               retention: RetentionSettings = NO_COMPACTION, payload_store: str | None = None,
               own_endpoint: str | None = None, tracing: Tracing | None = None,
               console_express: int = CONSOLE_EXPRESS,
               own_keys: Callable[[str], dict[str, str] | None] | None = None,
               quotas: Quotas | None = None) -> Node:
    """The integrations, then the engine (``engine(edges, histories)``) with its edges leading to them, then the
    service behind the API (start the engine after this). ``cluster``: several nodes, their membership and
    forwarder built over the engine. ``status_events``: where the engine's status change events go ({"bus": ...,
    "webhooks": [...]}); ``payload_store``: where compacted histories go (None: the store's own);
    ``own_endpoint``: this node's API, where the workflows' Step Functions calls go; ``tracing``: where traced
    executions' spans go (None: nowhere, though their trace context still travels on their calls);
    ``console_express``: the Express executions the console keeps per state machine (0: none); ``own_keys``: the
    credentials each account's workflows sign their calls of this node's API with (--auth sigv4); ``quotas``: AWS's
    quotas as --limits sets them (None: --limits local's)."""
    limits = limits or Limits()
    # What the integrations hand the engine and the service goes through names bound below (the engine needs its
    # edges to be built, the service the engine): commands (integrations' ones are tied to dispatches the outbox
    # window already bounds: never throttled), dispatches given back, claims of the tasks of other nodes' shards,
    # state machine records. Their first call comes once the engine runs.
    dispatcher = Dispatcher(lambda command: service.run(command, throttle=False),
                            lambda dispatch: built.give_back(dispatch))
    matcher = ActivityMatcher(dispatcher.start_attempt, limits,
                              None if cluster is None else lambda activity_arn: service.claim_task(activity_arn))
    matcher.on_room = lambda: built.room_again()  # tasks it refused while full wait in the outbox until then
    dispatcher.register("activity", matcher.offer)
    connections = connections or Connections()
    spans = CallSpans(tracing)
    HttpTasks(dispatcher, connections, limits, spans)
    aws_clients = AwsClients(limits, own_endpoint=own_endpoint, own_keys=own_keys)
    aws = AwsTasks(dispatcher, aws_clients, functions, assume_machine_role, spans)
    ItemReader(dispatcher, aws_clients, limits)
    ResultWriter(dispatcher, aws_clients)
    logs = ExecutionLogs(aws_clients, lambda machine_arn: service.logging_of(machine_arn))
    # Retention, into the payload store (a directory beside SQLite's file, a table of PostgreSQL's database, which
    # every node reads, or the one configured). The engine reads compacted histories from the same place (a redrive).
    histories = Histories(store, open_payload_store(payload_store, store, aws_clients, region))
    traces = None if tracing is None else ExecutionTraces(tracing, histories.whole)
    # The engine's edges, in one place: committed dispatches to the dispatcher, committed history events to the
    # execution logs, the console's pages and the traces, replies through the service's event loop; several nodes:
    # stages bound for another node's execution to the forwarder, removed dispatches to the matcher (which drops
    # copies another node started).
    feed, ring = HistoryFeed(), ExpressRing(console_express)
    consumers = [logs.offer, feed.offer, ring.offer] + ([] if traces is None else [traces.offer])
    edges = Edges(dispatch=dispatcher.submit, history=_each(consumers),
                  replies=lambda replies: service.deliver_replies(replies),
                  forward=None if cluster is None else lambda commands: joined.forwarder.engine_hook(commands),
                  removed=None if cluster is None else lambda keys: service.removed(keys))
    built = engine(edges, histories)
    joined = None if cluster is None else cluster(built)
    StatusEvents(dispatcher, aws_clients, built.room_again, built.metrics.registry,
                 **(status_events or {}))
    membership = None if joined is None else joined.membership
    peers = None if joined is None else joined.peers or (membership.others if membership else None)
    service = Service(store, built, account_id, limits, dispatcher=dispatcher, matcher=matcher,
                      connections=connections, aws_clients=aws_clients, aws=aws, logs=logs,
                      retention=Retention(built, histories, retention),
                      forwarder=None if joined is None else joined.forwarder, peers=peers,
                      membership_changed=None if membership is None else membership.wake,
                      leave=None if membership is None else membership.stop,
                      console=ConsoleSources(feed, ring, matcher.waiting,
                                             lambda: cluster_view(store, built.node_id, built.clock())),
                      quotas=quotas)
    return Node(built, service, membership, traces)


def _each(consumers: list[Callable[[list[Logged]], None]]) -> Callable[[list[Logged]], None]:
    """One history edge that hands a tick's history to each consumer in turn."""
    def offer(logged: list[Logged]) -> None:
        for consumer in consumers:
            consumer(logged)
    return offer


def _open(config: ServerConfig, address: str) -> tuple[Store, int | None, str]:
    """The store, the data directory's lock (None on PostgreSQL, which several nodes share), and where the data
    is, for the log."""
    if config.store:
        store = open_store(config.store, config.shards, address)
        return store, None, f"{store.location} ({store.shard_count()} shards, PostgreSQL)"
    data_dir = config.data_dir.expanduser().resolve()
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        lock = lock_data_dir(data_dir)
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


def _cluster_refusal(config: ServerConfig, store: Store, address: str) -> str | None:
    """Why a node on PostgreSQL cannot join its cluster (no secret, or not the live nodes' one); None if it can."""
    if not config.cluster_secret:
        return ("a node on PostgreSQL needs the cluster's secret: pass --cluster-secret S (or set "
                "STATEWRIGHT_CLUSTER_SECRET), the same on every node")
    if not store.adopt_cluster_secret(secret_check(config.cluster_secret.encode()), address, wall_clock_ms()):
        return (f"the live nodes on {store.location} share another cluster secret: start this node with theirs "
                f"(--cluster-secret or STATEWRIGHT_CLUSTER_SECRET); to change it, stop every node first")
    return None


def _join(store: Store, engine: Engine, address: str, config: ServerConfig) -> MembershipLoop:
    """A cluster node's membership: it takes the shards assigned to it as their leases come free."""
    renewals = engine.metrics.lease_renewals
    hooks = EngineHooks(engine.gain_shard, engine.renewed, engine.drop_shards,
                        lambda outcome, shards: renewals.labels(outcome).inc(shards))
    membership = Membership(store, address, address, hooks, config.leases, wait_for_drops_s=1.0,
                            weight=config.shard_weight)
    secret = config.cluster_secret.encode()
    return MembershipLoop(membership, engine.clock, lambda addresses: poke(secret, addresses),
                          engine.tokens.refresh)


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


def _local_host(host: str) -> str:
    """The host this process reaches its own API at."""
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def _reachable_host(host: str) -> str:
    """The host other nodes reach this one at, when it listens on every interface."""
    return socket.getfqdn() if host in ("0.0.0.0", "::", "") else host


def _report(config: ServerConfig, service: Service, store: Store, where: str, address: str, functions: LocalFunctions,
            mocks: MockConfig | None, virtual: VirtualClock | None, tracing: Tracing | None) -> None:
    """What the node serves and the settings that matter, logged as it starts."""
    limits = config.limits
    event(log, "store", "data in %s", where, store=where, shards=config.shards)
    for advice in store.advice():
        event(log, "advice", "warning: %s", advice, level=logging.WARNING)
    if config.store:
        event(log, "cluster", "cluster node %s (leases %d ms, renewed every %d ms; shard weight %d, assignment "
              "rule %d)", address, config.leases.lease_ms, config.leases.renew_ms, config.shard_weight,
              ASSIGNMENT_RULE, node=address, lease_ms=config.leases.lease_ms, renew_ms=config.leases.renew_ms,
              shard_weight=config.shard_weight, rule=ASSIGNMENT_RULE)
    if len(functions):
        event(log, "functions", "%d Lambda functions served at the URLs in %s", len(functions), config.functions,
              functions=len(functions), file=str(config.functions))
    if mocks is not None:
        event(log, "mocks", "mocked responses from %s (%d state machines with test cases); start executions on "
              "STATE_MACHINE_ARN#TestCase", config.mock_config, len(mocks.cases), file=str(config.mock_config))
    event(log, "retention", "closed executions kept %g days, their histories compacted into %s after %g days",
          config.retention_days, service.retention.payloads_location, config.compact_after_days,
          retention_days=config.retention_days, compact_after_days=config.compact_after_days)
    event(log, "limits", "limits: %d commands may wait, %d HTTP calls at once, evaluation %d steps / %d ms a step, "
          "%d connections (%d from one address)", limits.inbox_commands_max, limits.http_calls_concurrent_max,
          limits.evaluation_steps_max, limits.evaluation_ms_max, config.http.connections_max,
          config.http.connections_per_address_max, inbox_commands_max=limits.inbox_commands_max,
          http_calls_concurrent_max=limits.http_calls_concurrent_max,
          evaluation_steps_max=limits.evaluation_steps_max, evaluation_ms_max=limits.evaluation_ms_max,
          connections_max=config.http.connections_max)
    quotas = service.quotas.base
    mode = config.quota_mode or ("aws" if config.auth == "sigv4" else "local")
    event(log, "quotas", "quotas (--limits %s%s): %s state machines, %s tags a resource, %s open executions, API rate "
          "buckets %s", mode, " with --limit" if config.quota_settings else "", quotas.state_machines or "any",
          quotas.tags_per_resource or "any", quotas.open_executions or "any", "on" if quotas.rates else "off",
          mode=mode, settings=dict(config.quota_settings))
    if tracing is not None:
        event(log, "traces", "traces of state machines with tracing enabled go to %s (OTLP/HTTP)", tracing.endpoint,
              endpoint=tracing.endpoint)
    if virtual is not None:
        event(log, "clock", "virtual clock at %s; move it with `statewright clock advance 1d --endpoint-url "
              "http://%s:%d`", iso(virtual()), config.host, config.port, clock=iso(virtual()))
    event(log, "serving", "serving the Step Functions API on http://%s:%d", config.host, config.port,
          url=f"http://{config.host}:{config.port}")


class _Server(uvicorn.Server):
    """uvicorn's server, answering waiting long polls at once when asked to stop (they would hold it 60 s)."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None], on_hangup: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit
        self._on_hangup = on_hangup
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.add_signal_handler(signal.SIGHUP, self._on_hangup)
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
        # uvicorn raises the signal again once it has shut down, which would end the process before ``serve``
        # stops the engine and closes the store: the stop is graceful, the exit status 0.
        self._captured_signals.clear()


def _budgets_transitions(quotas: Quotas, front: Door) -> bool:
    """Whether any account may have a StateTransition budget: the server's quotas give one, or an accounts file
    (read again on SIGHUP) may. Without, the engine skips the budget's bookkeeping altogether."""
    return isinstance(front, SigV4Door) or quotas.base.rate("StateTransition", "us-east-1") is not None


def _transition_rate(quotas: Quotas, service: Service, region: str, account: str) -> tuple[float, float] | None:
    """The account's StateTransition bucket and refill per second, this node's share of them (1/N on N nodes)."""
    rate = quotas.of(account).rate("StateTransition", region)
    if rate is None:
        return None
    share = 1.0 / (1 + len(service.peers()))
    return rate.bucket * share, rate.refill * share


def _reread_accounts(front: Door) -> None:
    """SIGHUP: read the accounts file of --auth sigv4 again (a file that is wrong leaves the accounts as they were)."""
    if not isinstance(front, SigV4Door):
        event(log, "hangup", "SIGHUP: nothing to read again (the accounts file is read with --auth sigv4)")
        return
    try:
        front.accounts.reload()
    except AccountsFileError as exc:
        event(log, "accounts", "SIGHUP: %s; the accounts read before stay in use", exc, level=logging.ERROR,
              error=str(exc))
        return
    count = len(front.accounts.accounts)
    event(log, "accounts", "SIGHUP: read %d account%s from %s", count, "" if count == 1 else "s",
          front.accounts.path, accounts=count)


def _on_exit(service: Service) -> None:
    """SIGTERM or SIGINT, on the event loop: answer waiting long polls now, end the console's streams, and hand the
    shards over at once (on a thread: the engine drains meanwhile) rather than after uvicorn has closed every
    connection."""
    event(log, "stopping", "stopping: waiting long polls answered empty, shards handed over, the engine drains")
    service.matcher.release()
    if service.console is not None:
        service.console.feed.close()  # the console's streams end: uvicorn waits for every connection
    threading.Thread(target=service.leave, name="statewright-leave", daemon=True).start()
