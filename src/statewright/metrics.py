"""Prometheus metrics: what the engine and the API record, and the text served on ``GET /metrics``.

One ``Metrics`` per engine (its own registry, so engines in one test process do not share counts). The engine
calls its hooks from its one thread: ``at_tick`` between commits, ``applied`` per command, ``timer_fired`` per
applied FireTimer, ``committed`` once per batch; the API calls ``ApiMetrics.request_done`` once per request.
Hooks only add to prometheus-client's counters and histograms; anything that needs a scan (per-shard timer lag,
open executions, the activity backlog) is computed at scrape time from values the engine and the API keep.

Open executions are counted once from the store (a read snapshot fixed on the engine thread between two commits,
so the count and the engine's later +1/-1 per commit line up exactly) and then maintained per commit.

Imports nothing from statewright: the engine and the API import this module, not the other way round.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger("statewright.metrics")

CONTENT_TYPE = CONTENT_TYPE_LATEST
_ENTERED = "StateEntered"
_OPENING = frozenset({"ExecutionStarted", "ExecutionRedriven"})  # an execution (re)opens: one more RUNNING
_CLOSING = frozenset({"ExecutionSucceeded", "ExecutionFailed", "ExecutionAborted", "ExecutionTimedOut"})
_THROTTLED = "ThrottlingException"
_SNAPSHOT_WAIT_S = 60.0  # the engine ticks at least once a second; give up counting if it never does

_SECONDS_FAST = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1)
_SECONDS_IO = (2.5e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5)
_SECONDS_API = (2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SECONDS_LATE = (1e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
_BATCH_WRITES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)


class _Window(Protocol):
    def next_due_ms(self) -> int | None: ...


class _Write(Protocol):  # the fields of store.base.ExecutionWrite read here
    arn: str
    expected_version: int
    status: str
    events: list[dict[str, Any]]
    dispatches_added: list[Any]
    dispatches_removed: list[Any]


class _Result(Protocol):  # store.base.CommitResult
    def committed(self, index: int, write: Any) -> bool: ...


class _OpenCount(Protocol):  # store.base.OpenCount
    def snapshot(self) -> None: ...

    def count(self) -> int: ...

    def close(self) -> None: ...


class Metrics:
    """Every statewright metric, in one registry."""

    def __init__(self, windows: Callable[[], dict[int, _Window]] = dict,
                 clock: Callable[[], int] = lambda: 0, outbox_held: Callable[[], int] = lambda: 0) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.transition_steps = Counter(
            "statewright_transition_steps_committed", "Transition steps committed: one write of an execution's "
            "state (a start, a run of pure states, a fired timer, a stop) each", registry=registry)
        self.state_transitions = Counter(
            "statewright_state_transitions_committed", "State transitions committed: states entered, as AWS counts "
            "them", registry=registry)
        self.account_transitions = Counter(
            "statewright_account_state_transitions_committed", "State transitions committed per account and region "
            "(the StateTransition quota's count)", ["account", "region"], registry=registry)
        self._account_transitions: dict[str, Any] = {}  # by the ARN's "region:account", its child (engine thread)
        self.express_closed = Counter(
            "statewright_express_executions_closed", "EXPRESS executions run to their end in memory, by how they "
            "were started (async: StartExecution, sync: StartSyncExecution)", ["start"], registry=registry)
        self.heavy_lane_steps = Counter(
            "statewright_heavy_lane_steps", "Steps of executions with heavy evaluation: sliced (past the engine "
            "thread's slice of evaluation), sent to the heavy lane's process, applied, stale (the execution moved "
            "on meanwhile: applied again) or failed (the lane's process failed: decided on the engine thread)",
            ["outcome"],
            registry=registry)
        self.commit_writes = Histogram(
            "statewright_commit_batch_writes", "Transition steps (execution writes) per group commit",
            buckets=_BATCH_WRITES, registry=registry)
        self.commit_seconds = Histogram(
            "statewright_commit_seconds", "Time of one group commit in the store, fsync included",
            buckets=_SECONDS_IO, registry=registry)
        self.gc_full_pass_seconds = Histogram(
            "statewright_gc_full_pass_seconds", "Full passes of the garbage collector (every thread stopped), run "
            "while the engine had nothing to do, or overdue under load (statewright/collector.py)",
            buckets=_SECONDS_IO, registry=registry)
        self.apply_seconds = Histogram(
            "statewright_engine_apply_seconds", "Engine time to apply one command before its commit: load the "
            "state (cache or store), decide, stage the write", buckets=_SECONDS_FAST, registry=registry)
        self.timer_lateness = Histogram(
            "statewright_timer_lateness_seconds", "When a fired timer is applied: its engine time minus its due time",
            buckets=_SECONDS_LATE, registry=registry)
        self.api_seconds = Histogram(
            "statewright_api_request_seconds", "API request time, body read to response sent, by operation",
            ["operation"], buckets=_SECONDS_API, registry=registry)
        self.api_requests = Counter(
            "statewright_api_requests", "API requests by operation and error code (empty when it succeeded)",
            ["operation", "error"], registry=registry)
        self.account_requests = Counter(
            "statewright_account_api_requests", "API requests per calling account and region, by error code (empty "
            "when it succeeded; ThrottlingException when its bucket was empty); a request whose caller was not "
            "recognized counts under an empty account", ["account", "region", "error"], registry=registry)
        self.throttled = Counter(
            "statewright_api_throttled_requests", "Requests answered ThrottlingException: the engine's inbox was full "
            "(--inbox-commands-max), or the caller's rate bucket was empty (--limits aws)", registry=registry)
        self.outbox = Gauge(
            "statewright_outbox_dispatches", "Dispatches in memory: committed, handed out (to a worker's poll, an "
            "HTTP call, the engine's own transfers) and not yet done; bounded by outbox_window_max",
            registry=registry)
        self.outbox.set_function(outbox_held)
        self.tick_budget = Gauge(
            "statewright_engine_tick_budget", "Items of work the engine's next tick may take: small while ticks are "
            "costly (a burst), so that each lasts about 25 ms and every kind of work gets its share", registry=registry)
        # several nodes on one store (statewright serve --store postgresql://...)
        self.shards_owned = Gauge(
            "statewright_shards_owned", "Shards this node serves now", registry=registry)
        self.lease_renewals = Counter(
            "statewright_lease_renewals", "Shard lease renewals by outcome: renewed, lost (another node holds the "
            "shard) or failed (the store did not answer)", ["outcome"], registry=registry)
        for outcome in ("renewed", "lost", "failed"):  # each series from the start, so an alert on it has one
            self.lease_renewals.labels(outcome)
        self.fenced_writes = Counter(
            "statewright_fenced_writes", "Execution writes the store rejected because another node took their "
            "shard (its range id moved): what a paused or cut-off node tried after losing its lease",
            registry=registry)
        self.forwarded_calls = Counter(
            "statewright_forwarded_calls", "Commands sent to the node that owns their shard, by outcome",
            ["outcome"], registry=registry)
        self.retention_swept = Counter(
            "statewright_retention_executions", "Closed executions the retention sweep handled: deleted (their "
            "retention ended) or compacted (their history moved to the payload store)", ["outcome"],
            registry=registry)
        self.retention_failures = Counter(
            "statewright_retention_sweep_failures", "Retention sweeps that failed (the store or the payload store "
            "did not answer; the next sweep tries again)", registry=registry)
        self.open_executions = _OpenExecutions()
        self._scrape_time = _ScrapeTime(windows, clock, self.open_executions)
        registry.register(self._scrape_time)

    # -- engine hooks (engine thread only)

    def at_tick(self) -> None:
        """Called at the top of every engine tick: no commit is in flight."""
        if self.open_executions.pending is not None:
            self.open_executions.take_snapshot()

    def timer_fired(self, due_ms: int, now_ms: int) -> None:
        self.timer_lateness.observe((now_ms - due_ms) / 1000)

    def committed(self, writes: Sequence[_Write], result: _Result, seconds: float) -> None:
        """One group commit landed: count what it made durable."""
        self.commit_seconds.observe(seconds)
        self.commit_writes.observe(len(writes))
        steps = entered = 0
        by_account: dict[str, int] = {}
        for index, write in enumerate(writes):
            if not result.committed(index, write):
                continue
            steps += 1
            opened = mine = 0
            for event in write.effects.events:
                kind = event["type"]
                if kind.endswith(_ENTERED):
                    mine += 1
                elif kind in _OPENING:
                    opened += 1
                elif kind in _CLOSING:
                    opened -= 1
            if mine:
                entered += mine
                scope = write.arn.split(":", 5)[3:5]
                key = f"{scope[0]}:{scope[1]}"
                by_account[key] = by_account.get(key, 0) + mine
            if opened:
                self.open_executions.moved(write.arn, opened)
        self.transition_steps.inc(steps)
        self.state_transitions.inc(entered)
        for key, count in by_account.items():
            child = self._account_transitions.get(key)
            if child is None:
                region, account = key.split(":")
                child = self._account_transitions[key] = self.account_transitions.labels(account, region)
            child.inc(count)

    # -- serving

    def count_open_executions(self, open_count: Callable[[], _OpenCount],
                              every_s: float | None = None) -> threading.Thread:
        """Count RUNNING executions in the background (the engine must be ticking); ``open_count`` is the store's
        ``Store.open_count``. Once, or every ``every_s``: on a store several nodes share, the others' commits reach
        this node's gauge only through a new count."""

        def count() -> None:
            while True:
                self.open_executions.count(open_count)
                if every_s is None:
                    return
                time.sleep(every_s)

        thread = threading.Thread(target=count, name="statewright-metrics-count", daemon=True)
        thread.start()
        return thread

    def api(self, operations: Iterable[str]) -> ApiMetrics:
        return ApiMetrics(self, operations)

    def watch_activity_backlog(self, backlog_size: Callable[[], int]) -> None:
        """Report the activity tasks waiting for a worker; ``backlog_size`` is read where /metrics is served."""
        self._scrape_time.activity_backlog = backlog_size

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class ApiMetrics:
    """The API's hook: one call per request, with label children cached so the hot path takes no extra lock."""

    def __init__(self, metrics: Metrics, operations: Iterable[str]) -> None:
        self.metrics = metrics
        self._operations = frozenset(operations)
        self._latency: dict[str, Any] = {}
        self._requests: dict[tuple[str, str], Any] = {}
        self._per_account: dict[tuple[tuple[str, str], str], Any] = {}
        self._throttled = metrics.throttled

    def request_done(self, scope: dict, status: int, body: dict, seconds: float,
                     caller: tuple[str, str] = ("", "")) -> None:
        """One request answered; ``caller``: the (account, region) it was admitted as, empty if it was not."""
        operation = "unknown"  # label values stay bounded: only the service model's operation names
        for name, value in scope["headers"]:
            if name == b"x-amz-target":
                named = value.decode("latin-1").removeprefix("AWSStepFunctions.")
                if named in self._operations:
                    operation = named
                break
        error = "" if status == 200 else str(body.get("__type", status)).rpartition("#")[2]
        latency = self._latency.get(operation)
        if latency is None:
            latency = self._latency[operation] = self.metrics.api_seconds.labels(operation)
        latency.observe(seconds)
        requests = self._requests.get((operation, error))
        if requests is None:
            requests = self._requests[(operation, error)] = self.metrics.api_requests.labels(operation, error)
        requests.inc()
        per_account = self._per_account.get((caller, error))
        if per_account is None:
            per_account = self._per_account[(caller, error)] = self.metrics.account_requests.labels(*caller, error)
        per_account.inc()
        if error == _THROTTLED:
            self._throttled.inc()

    def exposition(self) -> bytes:
        return self.metrics.exposition()


class _OpenExecutions:
    """RUNNING executions, in all and per (region, account): one store count at a snapshot, plus the engine's
    +1/-1 per commit since then.

    The snapshot is fixed on the engine thread between commits (``take_snapshot``), where ``delta`` is exact;
    the slow count then runs on another thread inside that snapshot while the engine goes on. Other threads read
    the totals and one scope at a time (``of``), never iterate what the engine thread writes.
    """

    def __init__(self) -> None:
        self.delta = 0  # written by the engine thread only
        self._delta_by: dict[tuple[str, str], int] = {}  # the same, per (region, account)
        self.pending: _OpenCount | None = None  # a count waiting for its snapshot
        self._counting: _OpenCount | None = None
        self._delta_at_snapshot = 0
        self._delta_by_at_snapshot: dict[tuple[str, str], int] = {}
        self._snapshot_taken = threading.Event()
        self._base: int | None = None  # RUNNING rows at the snapshot minus delta at the snapshot
        self._base_by: dict[tuple[str, str], int] = {}

    def value(self) -> int | None:
        return None if self._base is None else self._base + self.delta

    def of(self, region: str, account: str) -> int | None:
        """RUNNING executions of one account in one region (None until the first count finishes)."""
        if self._base is None:
            return None
        scope = (region, account)
        return self._base_by.get(scope, 0) + self._delta_by.get(scope, 0)

    def by_scope(self) -> dict[tuple[str, str], int]:
        """Every (region, account) this node has counted or seen an execution of, with its RUNNING executions."""
        if self._base is None:
            return {}
        scopes = set(self._base_by) | set(self._delta_by)  # set() of a dict copies it in one step of the GIL
        return {scope: self._base_by.get(scope, 0) + self._delta_by.get(scope, 0) for scope in scopes}

    def moved(self, arn: str, change: int) -> None:
        """On the engine thread: a committed write opened (+1) or closed (-1) the execution ``arn``."""
        self.delta += change
        scope = _scope_of(arn)
        self._delta_by[scope] = self._delta_by.get(scope, 0) + change

    def request(self, open_count: Callable[[], _OpenCount]) -> None:
        self._snapshot_taken.clear()
        self._counting = self.pending = open_count()  # connecting, if it must, happens here: not on the engine

    def take_snapshot(self) -> None:
        counting, self.pending = self.pending, None
        try:
            counting.snapshot()
            self._delta_at_snapshot = self.delta
            self._delta_by_at_snapshot = dict(self._delta_by)
        except Exception:  # the store's error: the count is given up, the engine goes on
            log.exception("could not open a snapshot to count open executions")
            counting.close()
            self._counting = None
        self._snapshot_taken.set()

    def finish(self) -> None:
        counting, self._counting = self._counting, None
        if counting is not None:
            counted = counting.count()
            at_snapshot = self._delta_by_at_snapshot
            self._base_by = {scope: counted.get(scope, 0) - at_snapshot.get(scope, 0)
                             for scope in counted.keys() | at_snapshot.keys()}
            self._base = sum(counted.values()) - self._delta_at_snapshot

    def count(self, open_count: Callable[[], _OpenCount]) -> None:
        try:
            self.request(open_count)
            if not self._snapshot_taken.wait(_SNAPSHOT_WAIT_S):
                log.warning("the engine did not tick within %.0f s; open executions stay uncounted",
                            _SNAPSHOT_WAIT_S)
                self.pending = None
                self._counting.close()
                return
            self.finish()
        except Exception:
            log.exception("counting open executions failed")


def _scope_of(arn: str) -> tuple[str, str]:
    """The (region, account) of a Step Functions ARN."""
    parts = arn.split(":", 5)
    return parts[3], parts[4]


class _ScrapeTime(Collector):
    """Gauges computed when scraped: per-shard timer lag and open executions."""

    def __init__(self, windows: Callable[[], dict[int, _Window]], clock: Callable[[], int],
                 open_executions: _OpenExecutions) -> None:
        self._windows = windows
        self._clock = clock
        self._open = open_executions
        self.activity_backlog: Callable[[], int] | None = None

    def describe(self) -> list[Metric]:
        return [GaugeMetricFamily("statewright_timer_lag_seconds", ""),
                GaugeMetricFamily("statewright_open_executions", ""),
                GaugeMetricFamily("statewright_account_open_executions", ""),
                GaugeMetricFamily("statewright_activity_backlog_tasks", "")]

    def collect(self) -> Iterator[Metric]:
        lag = GaugeMetricFamily("statewright_timer_lag_seconds", "Per shard: age of the oldest timer that is due "
                                "and not yet fired in its timer window (0 when none is due)", labels=["shard"])
        now_ms = self._clock()
        for shard, due_ms in _oldest_due(self._windows()):
            lag.add_metric([str(shard)], max(now_ms - due_ms, 0) / 1000 if due_ms is not None else 0.0)
        yield lag
        running = GaugeMetricFamily("statewright_open_executions", "Executions with status RUNNING (absent until "
                                    "the count taken at start-up finishes)")
        value = self._open.value()
        if value is not None:
            running.add_metric([], value)
        yield running
        per_account = GaugeMetricFamily("statewright_account_open_executions", "Executions with status RUNNING per "
                                        "account and region (the open-executions quota's count)",
                                        labels=["account", "region"])
        for (region, account), count in sorted(self._open.by_scope().items()):
            per_account.add_metric([account, region], count)
        yield per_account
        backlog = GaugeMetricFamily("statewright_activity_backlog_tasks", "Activity tasks dispatched and waiting "
                                    "for a worker's GetActivityTask (the in-memory backlog)")
        if self.activity_backlog is not None:
            backlog.add_metric([], self.activity_backlog())
        yield backlog


def _oldest_due(windows: dict[int, _Window]) -> list[tuple[int, int | None]]:
    """Each window's earliest timer, read from another thread without a lock: a racing change costs one sample."""
    found = []
    for shard, window in sorted(windows.copy().items()):
        try:
            found.append((shard, window.next_due_ms()))
        except IndexError:  # the heap emptied between the check and the read
            found.append((shard, None))
    return found
