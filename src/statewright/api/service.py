"""The service behind the API: the operation registry and what every handler needs (store, engine, clock).

Handlers run on the event loop and never call the store there: ``Service.store_call`` runs a store call on a
small thread pool of the service's own (a networked store would otherwise stall every request while one waits);
TestState evaluates on another (``Service.evaluation_call``), so a heavy evaluation holds neither.
The one read on the hot path, StartExecution's state machine (or the version or alias it names), comes from a
one-second cache that answers a hit without leaving the loop. A change through any node reaches every node's cache
before its client hears of it (``changed``); a change to a state machine also drops its versions and aliases.

Every command bound for the engine goes through ``Service.run``. With several nodes (a ``Forwarder``), a command
whose shard this node's engine does not serve is forwarded to the node that does; so is one the engine answers
"not my shard" (the shard moved between the check and the engine's tick): callers never see a shard move.

node.py builds it, with the integrations its handlers reach; it imports the engine, the integrations and
cluster/ (the forwarder, the kinds of change), never node.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..cluster.forwarding import Forwarder
from ..cluster.peers import ACTIVITY, STATE_MACHINE, change
from ..console import ConsoleSources
from ..engine.commands import Command, EngineUnavailable, ShardNotOwned
from ..engine.edges import answer
from ..engine.engine import Engine
from ..engine.limits import Limits
from ..engine.shards import shard_for
from ..integrations.activities import ActivityMatcher
from ..integrations.aws.clients import AwsClients
from ..integrations.aws.tasks import AwsTasks
from ..integrations.dispatcher import Dispatcher
from ..integrations.execution_logs import ExecutionLogs
from ..integrations.http import Connections
from ..store.base import AliasRecord, Dispatch, StateMachineRecord, Store, VersionRecord
from . import arns
from .arns import Scope
from .quotas import Quotas, RateLimiter, preset
from .retention import Retention

# A task claimed from another node's shard is kept from other claims this long: time for its start to reach the
# owner (which decides who gets it); a claimer that died frees it after this.
CLAIM_MS = 5_000
LOOK_AGAIN_S = 1.0  # how often waiting polls look in the store in case word of a task was lost
STANDARD, EXPRESS = "STANDARD", "EXPRESS"  # the state machine types (fixed when a state machine is created)
_MACHINE_CACHE_S = 1.0
_MACHINE_CACHE_SIZE = 10_000
# Store calls running at once for API handlers; more wait in the pool's queue. SQLite gives each thread its own
# connection, so this is also the number of connections the API holds.
STORE_THREADS_MAX = 8
Handler = Callable[["Service", dict, Scope], dict | Awaitable[dict]]
Target = StateMachineRecord | VersionRecord | AliasRecord  # what a state machine, version or alias ARN names
HANDLERS: dict[str, Handler] = {}
T = TypeVar("T")


def handler(operation: str) -> Callable[[Handler], Handler]:
    """Register the function that serves ``operation`` (its name as in the AWS API)."""

    def register(function: Handler) -> Handler:
        HANDLERS[operation] = function
        return function

    return register


def seconds(epoch_ms: int) -> float:
    """AWS's JSON protocol sends timestamps as epoch seconds."""
    return epoch_ms / 1000


class Service:
    def __init__(self, store: Store, engine: Engine, account_id: str, limits: Limits, *, dispatcher: Dispatcher,
                 matcher: ActivityMatcher, connections: Connections, aws_clients: AwsClients, aws: AwsTasks,
                 logs: ExecutionLogs, retention: Retention, forwarder: Forwarder | None = None,
                 peers: Callable[[], list[str]] | None = None, membership_changed: Callable[[], None] | None = None,
                 leave: Callable[[], None] | None = None, console: ConsoleSources | None = None,
                 quotas: Quotas | None = None) -> None:
        """The integrations the handlers reach (built by node.py), and with several nodes: the ``forwarder`` to the
        shards other nodes serve, the other live nodes' addresses (``peers``), a call that steps the membership now
        (``membership_changed``: another node joined or left), and one that hands the shards over (``leave``);
        ``console``: what the web console reads of this node beside the API; ``quotas``: AWS's quotas as set
        (quotas.py; by default --limits local's)."""
        self.store = store
        self.console = console
        self.engine = engine
        self.account_id = account_id
        self.clock = engine.clock
        self.mocks = engine.services.mocks  # --mock-config: the test cases executions may be started on
        self.limits = limits
        self.quotas = quotas or Quotas(preset("local"))
        # Each node keeps its share of every bucket: 1/N of the account's rate on N live nodes
        self.rates = RateLimiter(self.quotas, share=lambda: 1.0 / (1 + len(self.peers())))
        self.dispatcher = dispatcher
        self.matcher = matcher  # several nodes: its polls also claim the tasks of other nodes' shards (claim_task)
        self.connections = connections
        self.aws_clients = aws_clients
        self.aws = aws
        self.logs = logs
        self.retention = retention  # how long closed executions are kept, and where compacted histories go
        self.forwarder = forwarder
        self.peers = peers or (lambda: [])
        self.membership_changed = membership_changed or (lambda: None)
        self.leave = leave or (lambda: None)
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop replies go through (the last one run on)
        self._attached: asyncio.AbstractEventLoop | None = None  # the server's loop, between attach and detach
        self._store_threads = ThreadPoolExecutor(STORE_THREADS_MAX, thread_name_prefix="statewright-api-store")
        # TestState's evaluation: threads of its own, so a heavy one neither blocks the loop nor takes the store's.
        self._evaluation_threads = ThreadPoolExecutor(limits.test_states_concurrent_max,
                                                      thread_name_prefix="statewright-api-evaluation")
        self._machines: dict[str, tuple[Target | None, float]] = {}
        self._machine_reads: dict[str, asyncio.Future[Target | None]] = {}
        self._machines_forgotten = 0  # bumped by every forget: a read that started before it must not be cached
        self._stop_watching: Callable[[], None] | None = None
        self._looking: asyncio.TimerHandle | None = None

    async def logging_of(self, machine_arn: str) -> dict[str, Any] | None:
        """The execution logs' way to a state machine's logging configuration (from the record cache)."""
        record = await self.state_machine(machine_arn)
        return None if record is None else record.logging_configuration

    async def store_call(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` (a store read or write) on the service's store threads, off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self._store_threads, function, *args)

    async def evaluation_call(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` (TestState's evaluation, on the engine's evaluation budget) on the service's
        evaluation threads, off the event loop; at most ``Limits.test_states_concurrent_max`` at once."""
        return await asyncio.get_running_loop().run_in_executor(self._evaluation_threads, function, *args)

    async def state_machine(self, arn: str) -> Target | None:
        """The record of a state machine, version or alias ARN (checked by the caller), cached for a second:
        StartExecution reads it on every call, and a change through any node drops it at once. A hit returns without
        suspending (no thread hop); concurrent misses for one ARN share one store read."""
        cached = self._machines.get(arn)
        if cached is not None and time.monotonic() - cached[1] < _MACHINE_CACHE_S:
            return cached[0]
        read = self._machine_reads.get(arn)
        if read is None:
            read = self._machine_reads[arn] = asyncio.ensure_future(self._read_machine(arn))
        return await asyncio.shield(read)  # a caller that goes away does not cancel the others' read

    async def _read_machine(self, arn: str) -> Target | None:
        forgotten = self._machines_forgotten
        try:
            record = await self.store_call(self._read_target, arns.qualified(arn))
        finally:
            if self._machine_reads.get(arn) is asyncio.current_task():
                del self._machine_reads[arn]
        if forgotten == self._machines_forgotten:
            if len(self._machines) >= _MACHINE_CACHE_SIZE:
                self._machines.clear()
            self._machines[arn] = (record, time.monotonic())
        return record

    async def changed(self, kind: str, arn: str) -> None:
        """A change to a state machine or an activity committed through this node: refresh what this node keeps
        of it and tell every other live node to (best effort, bounded), before the client hears it is done."""
        await self.refresh(kind, arn)
        if self.forwarder is not None:
            await self.forwarder.announce(self.peers(), change(kind, arn))

    async def refresh(self, kind: str, arn: str) -> None:
        """Drop or re-read what this node keeps of a resource that changed (``kind``: CHANGED_KINDS). Reading the
        store, rather than taking the change from the message, keeps the last word right when messages cross."""
        if kind == STATE_MACHINE:
            self.forget_state_machine(arn)
            self.logs.forget(arn)
        elif kind == ACTIVITY:
            self.engine.note_activity(arn, await self.store_call(self.store.get_activity, arn) is not None)
        else:
            raise ValueError(f"not a kind of change: {kind!r}")

    def _read_target(self, target: arns.MachineArn) -> Target | None:
        if target.version is not None:
            return self.store.get_version(target.machine, target.version)
        if target.alias is not None:
            return self.store.get_alias(target.machine, target.alias)
        return self.store.get_state_machine(target.machine)

    def forget_state_machine(self, arn: str) -> None:
        """Drop a state machine's, version's or alias's record; a state machine's takes its versions and aliases
        with it (deleting it deletes them)."""
        self._machines_forgotten += 1
        qualifier = arn + ":"
        for cached in (self._machines, self._machine_reads):
            for key in [key for key in cached if key == arn or key.startswith(qualifier)]:
                del cached[key]  # the next caller reads again, after the change

    async def claim_task(self, activity_arn: str) -> Dispatch | None:
        """Several nodes, the matcher's: a task of this activity from a shard another node serves (this node's own
        reach the matcher from its engine), claimed for CLAIM_MS."""
        now_ms = self.clock()
        served = [shard for shard in range(self.engine.shard_count) if self.engine.owns(shard)]
        return await self.store_call(self.store.claim_activity_task, activity_arn, now_ms, now_ms + CLAIM_MS, served)

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve on ``loop`` (the server's, at start): replies, dispatches and forwarded calls go through it.
        Several nodes: watch for other nodes' activity tasks, and look again now and then."""
        self._use_loop(loop)
        self.dispatcher.attach(loop)
        self.logs.attach(loop)
        self.retention.attach(loop, self.store_call)
        if self.forwarder is not None:
            self._attached = loop
            self._stop_watching = self.store.watch_activity_tasks(
                lambda activity_arn: loop.call_soon_threadsafe(self.matcher.notice, activity_arn))
            self._looking = loop.call_later(LOOK_AGAIN_S, self._look_again)

    def _look_again(self) -> None:
        self.matcher.look_again()
        self._looking = asyncio.get_running_loop().call_later(LOOK_AGAIN_S, self._look_again)

    async def detach(self) -> None:
        """The server is stopping: stop watching, close the connections to other nodes (the engine has stopped)."""
        self._attached = None
        self.retention.detach()
        if self._looking is not None:
            self._looking.cancel()
        if self._stop_watching is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._stop_watching)
        if self.forwarder is not None:
            await self.forwarder.aclose()

    async def run(self, command: Command, *, throttle: bool = True) -> Any:
        """Hand a command to the engine serving its shard (here or, through the forwarder, on another node) and
        wait for the commit that holds it; with ``throttle`` raises InboxFull (the API answers
        ThrottlingException) when that engine's inbox is full."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._use_loop(loop)
        forwarder = self.forwarder
        if forwarder is None or self._serves(command):
            try:
                return await self.engine.submit(command, loop.create_future(), throttle=throttle)
            except ShardNotOwned:  # it took or let go of the shard meanwhile: the forwarder finds the owner (this
                if forwarder is None:  # node too, once its engine serves it)
                    raise
            except EngineUnavailable:
                if forwarder is None or self._serves(command):
                    raise
        return await forwarder.forward(command, throttle=throttle)

    async def run_here(self, commands: list[Command], *, throttle: bool) -> list[object]:
        """This node's engine's replies to ``commands`` once committed, in order, errors as exception instances.
        An engine that failed a command because it does not serve its shard (any more) answers ShardNotOwned, so
        the caller knows to find the owner."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._use_loop(loop)
        replies = await asyncio.gather(
            *(self.engine.submit(command, loop.create_future(), throttle=throttle) for command in commands),
            return_exceptions=True)
        for index, reply in enumerate(replies):
            if isinstance(reply, EngineUnavailable) and not self._serves(commands[index]):
                replies[index] = ShardNotOwned(shard_for(commands[index].arn, self.engine.shard_count))
        return replies

    def _serves(self, command: Command) -> bool:
        """Whether this node's engine serves the command's shard now."""
        return self.engine.owns(shard_for(command.arn, self.engine.shard_count))

    def close(self) -> None:
        """Wait for running store calls and evaluations to finish; call before closing the store."""
        self._evaluation_threads.shutdown(wait=True)
        self._store_threads.shutdown(wait=True)
        self.aws_clients.close()

    def _use_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop  # the engine replies through this loop
        if self.forwarder is not None:
            self.forwarder.attach(loop)

    def deliver_replies(self, replies: list[tuple[asyncio.Future, object]]) -> None:
        """``Edges.replies``, on the engine thread: pass a tick's replies to the event loop in one hop."""
        self._loop.call_soon_threadsafe(answer, replies)

    def removed(self, keys: list[tuple[str, str]]) -> None:
        """``Edges.removed`` (several nodes), on the engine thread: while serving, the matcher drops its copies
        of the dispatches a commit removed (a worker at another node started them)."""
        loop = self._attached
        if loop is not None:
            loop.call_soon_threadsafe(self.matcher.discard, keys)
