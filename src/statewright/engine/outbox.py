"""The outbox window: which committed dispatches are in memory, bounded by ``Limits.outbox_window_max`` over all
shards. The outbox rows are the truth; this is their cache.

A dispatch is *held* from the moment it is handed out until a commit removes its row (the attempt started, the
dispatch was acknowledged) or the engine learns its attempt is not pending any more. Activity tasks are the
exception: they may wait for workers without end, so they are not held (which would let one activity nobody polls
block every other dispatch); the activity matcher bounds them itself and gives back what it cannot keep.

A shard is *behind* when its rows may hold dispatches that are not in memory: at start, when the window was full as
they committed, and when memory can no longer be trusted (a commit failed or its outcome is unknown). Then new
dispatches are not handed out directly; ``read`` pages through the shard's rows in seq order and hands out those
not held, and a read that reaches the end while there is room catches the shard up. ``reread`` first lets go of
everything held for the shard, so whatever the rows still hold goes out again: an integration may then get a
dispatch twice, and its StartAttempt refuses the second (the matcher keeps one copy of a task). A shard is
*spilled* when the matcher gave one of its tasks back: its activity rows are passed over until ``room_again``, and
then read again from the first. Since a shard's seqs only grow, every row a read has not reached sorts after its
cursor: none is missed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

from ..store.base import Dispatch
from .limits import Limits

Key = tuple[str, str]  # (execution ARN, dispatch id)
# (shard, after_seq, limit) -> dispatches, as Store.pending_dispatches
Reader = Callable[[int, int, int], list[Dispatch]]


class OutboxWindow:
    def __init__(self, limits: Limits | None = None) -> None:
        self._limits = limits or Limits()
        self._held: dict[Key, int] = {}  # -> shard
        self._held_per_shard: Counter[int] = Counter()
        self._behind: dict[int, int] = {}  # shard -> the seq its read has passed
        self._spilled: set[int] = set()  # shards whose activity rows wait for room_again

    def __len__(self) -> int:
        return len(self._held)

    def has_room(self) -> bool:
        return len(self._held) < self._limits.outbox_window_max

    def committed(self, dispatch: Dispatch) -> bool:
        """A dispatch whose commit landed: True if it is to be handed out now (it is then held, unless a task)."""
        if _is_task(dispatch):
            return dispatch.shard_id not in self._spilled
        if dispatch.shard_id in self._behind:
            return False  # the shard's read reaches it in seq order
        if not self.has_room():
            self._behind[dispatch.shard_id] = 0
            return False
        self._hold((dispatch.execution_arn, dispatch.dispatch_id), dispatch.shard_id)
        return True

    def release(self, execution_arn: str, dispatch_id: str) -> None:
        """Its row is gone, or its attempt is no longer pending: it leaves memory."""
        shard = self._held.pop((execution_arn, dispatch_id), None)
        if shard is not None:
            self._held_per_shard[shard] -= 1

    def _hold(self, key: Key, shard_id: int) -> None:
        self._held[key] = shard_id
        self._held_per_shard[shard_id] += 1

    def holds(self, execution_arn: str, dispatch_id: str) -> bool:
        return (execution_arn, dispatch_id) in self._held

    def read_again(self, dispatch: Dispatch) -> None:
        """What memory did with a dispatch came to nothing (a transfer's write did not land, an integration failed
        to take it): it leaves memory and its shard's rows are read back."""
        self.release(dispatch.execution_arn, dispatch.dispatch_id)
        self._behind[dispatch.shard_id] = 0

    def spill(self, dispatch: Dispatch) -> None:
        """The matcher was full and gave a task back: the shard's tasks wait in its rows until ``room_again``."""
        self._spilled.add(dispatch.shard_id)

    def room_again(self) -> None:
        """The matcher has room: read the spilled shards' rows again from the first."""
        for shard in self._spilled:
            self._behind[shard] = 0
        self._spilled.clear()

    def reread(self, shard_id: int) -> None:
        """Distrust what memory says of the shard: let go of what it holds and read its rows again from the first."""
        self.forget(shard_id)
        self._behind[shard_id] = 0

    def forget(self, shard_id: int) -> None:
        """Nothing of the shard stays (it was lost, or is about to be read again)."""
        self._behind.pop(shard_id, None)
        self._spilled.discard(shard_id)
        for key in [key for key, shard in self._held.items() if shard == shard_id]:
            del self._held[key]
        self._held_per_shard.pop(shard_id, None)

    def behind(self) -> list[int]:
        """Shards to read back now."""
        return list(self._behind)

    def read(self, shard_id: int, reader: Reader) -> Iterator[Dispatch]:
        """One page of a behind shard's rows: yields (and holds) each row to hand out, while there is room."""
        after_seq = self._behind.get(shard_id)
        room = self._limits.outbox_window_max - len(self._held)
        if after_seq is None or room <= 0:
            return
        # Rows past the room (and the held ones, which are passed over) would only be read again next time.
        limit = min(self._limits.outbox_page_rows_max, room + self._held_per_shard[shard_id])
        page = reader(shard_id, after_seq, limit)
        for dispatch in page:
            key = (dispatch.execution_arn, dispatch.dispatch_id)
            if _is_task(dispatch):
                if shard_id not in self._spilled:
                    yield dispatch  # not held: the matcher bounds tasks and keeps one copy of each
            elif key not in self._held:
                if not self.has_room():
                    return  # the cursor stays before this row
                self._hold(key, shard_id)
                yield dispatch
            self._behind[shard_id] = dispatch.seq
        if len(page) < limit:
            del self._behind[shard_id]  # caught up: rows from now on are handed out as they commit


def _is_task(dispatch: Dispatch) -> bool:
    """An activity task: it waits for a worker for as long as it takes, so the window does not hold it."""
    return dispatch.payload.get("kind") == "activity"
