"""Running transfers (transfers.py): the ones ready for their next stage, stages sent to the node that owns their
execution, and those sent again when that node could not take them.

A stage runs in the engine's batch like any command; the transfer goes on with its next stage only once every write
of this one landed, ahead of the work its stage caused. A stage whose writes did not land, a shard re-read or lost,
and a failed read all end the transfer: its dispatch is read back from the outbox and it starts over (every stage
is safe to repeat). Used on the engine thread only; the answers of remote stages come back through the inbox.
Must not import the API, the integrations or the cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ..store.base import Dispatch, StoreUnavailable
from .batch import HELD, Batch, Reply
from .commands import Command, CompleteAttempt, EngineUnavailable
from .edges import Edges
from .inbox import AccountQueues, Inbox
from .outbox import OutboxWindow
from .shards import Shards
from .transfers import Stages, TransferContext, stages

log = logging.getLogger("statewright.engine")

FORWARD_RETRY_MS = 500  # the pause before a transfer stage another node could not take is sent again


class HeldStage(Future):
    """The reply a transfer waits on while the heavy lane decides its stage: the engine resolves it itself, after
    the lane's decision committed, instead of handing it to its replies edge (which answers callers)."""


@dataclass(slots=True)
class Transfer:
    """Engine-to-engine work in progress: its dispatch, its stages, the last stage's replies."""

    dispatch: Dispatch
    stages: Stages
    replies: list[object] | None = None
    remote: list[Command] | None = None  # a stage sent to the node that owns its execution, awaiting replies
    held: bool = False  # its stage's step went to the heavy lane: it goes on once the lane's decision commits


class TransferRunner:
    def __init__(self, context: TransferContext, outbox: OutboxWindow, shards: Shards, inbox: Inbox,
                 edges: Edges) -> None:
        """``edges.forward``: None on a single node (every execution is this engine's)."""
        self._context = context
        self._outbox = outbox
        self._shards = shards
        self._inbox = inbox
        self._edges = edges
        # (transfer, None) as the tick's work holds it, served per account: their dispatches are held in the outbox
        # window, so they are bounded
        self.ready = AccountQueues(None, _execution_arn)
        self._remote: dict[int, Transfer] = {}  # id -> transfers whose stage another node is applying
        self.retries: list[tuple[int, Transfer]] = []  # (not before ms, transfer) to send again
        self.reread_now: set[int] = set()  # shards re-read during this tick (their transfers start over)

    def start(self, dispatch: Dispatch) -> None:
        self.ready.append((Transfer(dispatch, stages(dispatch, self._context)), None))

    def take(self, work: list[tuple[Any, Reply]], n: int, now_ms: int) -> int:
        """Send again the remote stages due, then append at most ``n`` of the transfers ready; returns how many."""
        if self.retries:
            due = [transfer for at_ms, transfer in self.retries if at_ms <= now_ms]
            self.retries = [(at_ms, transfer) for at_ms, transfer in self.retries if at_ms > now_ms]
            for transfer in due:
                self._send_remote(transfer)
        return self.ready.take(work, n)

    def next_due_ms(self, now_ms: int) -> int | None:
        if self.ready:
            return now_ms
        return min((at_ms for at_ms, _ in self.retries), default=None)

    def advance(self, transfer: Transfer, batch: Batch, apply: Callable[[Command, Reply], object],
                store_failed: Callable[[str, Exception], None]) -> None:
        """Apply a transfer's next stage in this batch (``apply``: one command and its reply handle, as the engine
        applies it). A stage of one task result may be decided in the heavy lane like any other (its execution is
        heavy, or the step spent its slice): the transfer then waits, as for a remote stage, for the reply that
        comes once the lane's decision committed, and only then goes on (to acknowledge its dispatch)."""
        try:
            commands = next(transfer.stages) if transfer.replies is None else transfer.stages.send(transfer.replies)
        except StopIteration:
            return  # done: its last stage removed the dispatch's row
        except StoreUnavailable as exc:  # read back and tried again once the store answers
            store_failed(f"applying a {transfer.dispatch.payload['kind']} transfer", exc)
            self._outbox.read_again(transfer.dispatch)
            return
        except Exception:  # a bug: trying again would only repeat it; the execution's deadlines settle it
            log.exception("a %s transfer failed", transfer.dispatch.payload["kind"])
            self._outbox.release(transfer.dispatch.execution_arn, transfer.dispatch.dispatch_id)
            return
        if commands and self._edges.forward is not None and not self._shards.serves(self._shards.of(commands[0].arn)):
            transfer.remote = commands  # another node owns the execution this stage is for
            self._send_remote(transfer)
            return
        first = len(batch.writes)
        batch.group = len(batch.transfers) + 1
        try:
            if len(commands) == 1 and isinstance(commands[0], CompleteAttempt):  # may go to the heavy lane
                held = HeldStage()
                replies = [apply(commands[0], held)]
                if replies[0] is HELD:  # nothing of it is in this batch: it goes on when the reply comes
                    transfer.held = True
                    self._remote[id(transfer)] = transfer
                    held.add_done_callback(lambda done: self._inbox.forwarded(transfer, done))
                    return
            else:
                replies = [apply(command, None) for command in commands]
        finally:
            batch.group = 0
        if batch.merged_at is not None:  # folded into an earlier write of its execution: it goes on only if that lands
            # too (the writes between are others', whose failure only makes this stage run again)
            first, batch.merged_at = min(first, batch.merged_at), None
        batch.transfers.append((transfer, replies, first, len(batch.writes)))

    def after_commit(self, batch: Batch, failed: dict[int, Exception]) -> None:
        """Transfers whose stage landed go on, in the order they ran, ahead of the ones their stage caused (a child
        that closed at once), so a parent records its attempt started before the child's result reaches it."""
        going_on: list[Transfer] = []
        for transfer, replies, first, end in batch.transfers:
            dispatch = transfer.dispatch
            if not self._shards.serves(dispatch.shard_id):
                continue  # the shard was lost: its next owner reads the dispatch back
            landed = not any(index in failed for index in range(first, end)) and not any(
                isinstance(reply, EngineUnavailable) for reply in replies)  # e.g. a read failed: nothing staged
            if not landed:  # start over from the outbox row: every stage is safe to repeat
                self._outbox.read_again(dispatch)
            elif dispatch.shard_id not in self.reread_now:  # else its row is read back, and it starts again
                transfer.replies = replies
                going_on.append(transfer)
        self.ready.prepend([(transfer, None) for transfer in going_on])
        self.reread_now.clear()

    def drop(self, shards: set[int]) -> None:
        """Transfers of these shards come back with their rows; kept as well, they would apply twice."""
        self.ready.keep(lambda item: item[0].dispatch.shard_id not in shards)
        for key in [key for key, transfer in self._remote.items() if transfer.dispatch.shard_id in shards]:
            del self._remote[key]  # its replies, when they come, are dropped
        self.retries = [(at_ms, t) for at_ms, t in self.retries if t.dispatch.shard_id not in shards]

    def take_back(self, forwarded: list[tuple[Transfer, Future]], now_ms: int) -> None:
        """Remote stages answered (or failed): those answered go on; the others are sent again after a pause."""
        for transfer, done in forwarded:
            if self._remote.pop(id(transfer), None) is None:
                continue  # its shard was lost or re-read meanwhile: the row brings the transfer back
            if transfer.held:  # the lane's decision landed (its reply: a result or a refusal), or did not
                transfer.held = False
                reply = done.exception() or done.result()
                if isinstance(reply, EngineUnavailable):
                    self._outbox.read_again(transfer.dispatch)  # start over: every stage is safe to repeat
                else:
                    transfer.replies = [reply]
                    self.ready.append((transfer, None))
                continue
            replies = None if done.exception() is not None else done.result()
            if replies is None or any(isinstance(reply, EngineUnavailable) for reply in replies):
                self._send_again(transfer, now_ms)
                continue
            transfer.remote = None
            transfer.replies = list(replies)
            self.ready.append((transfer, None))

    def _send_again(self, transfer: Transfer, now_ms: int) -> None:
        log.warning("a %s stage for %s did not reach its node; sending it again",
                    transfer.dispatch.payload["kind"], transfer.remote[0].arn)
        self.retries.append((now_ms + FORWARD_RETRY_MS, transfer))

    def _send_remote(self, transfer: Transfer) -> None:
        forward = self._edges.forward
        assert forward is not None
        self._remote[id(transfer)] = transfer
        try:
            future = forward(transfer.remote)
        except Exception as exc:  # the forwarder refused at once (shutting down, say): try again later
            future = Future()
            future.set_exception(exc)
        future.add_done_callback(lambda done: self._inbox.forwarded(transfer, done))


def _execution_arn(item: tuple[Transfer, None]) -> str:
    return item[0].dispatch.execution_arn
