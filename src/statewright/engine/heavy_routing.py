"""Which executions are heavy, and what of theirs the heavy lane (heavy_lane.py) decides instead of the engine
thread.

An execution whose last step stopped on its evaluation share is *heavy*: its next continuation timer goes to the
lane, and its other continuations (a branch's, an iteration's) are held until the lane's answer is back, else that
answer would always be stale. An answer is applied only if the execution is still the one it was decided for (same
version, start and redrive) and nothing else of it is in the batch; an outgrown one is fired again, inline, on the
state as it is; a failed one (the lane process died) is decided on the engine thread. The execution stops being
heavy when its continuations go on lightly, or it closes. Used on the engine thread only. Must not import the API,
the integrations or the cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from ..decider import Decision
from ..decider.effects import TimerKind
from ..decider.execution import ExecutionState
from ..metrics import Metrics
from .caches import Definitions
from .commands import FireTimer
from .heavy_lane import Decided, Lane
from .tokens import TaskTokens

log = logging.getLogger("statewright.engine")


def continues(timer_id: str) -> bool:
    return TimerKind.of(timer_id) is TimerKind.CONTINUE


class HeavyRouting:
    def __init__(self, lane: Lane | None, metrics: Metrics) -> None:
        """``lane``: None decides every continuation on the engine thread."""
        self.lane = lane
        self._metrics = metrics
        self.heavy: set[str] = set()  # open executions whose last step stopped on its evaluation share
        self.in_lane: set[str] = set()  # executions with a continuation in the lane
        self._held: dict[str, list[FireTimer]] = {}  # their other continuations, until the lane's answer lands
        self.redo: list[FireTimer] = []  # held continuations released, and stale ones, for the next tick

    def back(self, decided: Decided) -> None:
        """Whatever becomes of the lane's answer, the lane's hands are free of this execution."""
        self.in_lane.discard(decided.arn)
        self.redo.extend(self._held.pop(decided.arn, ()))

    def send(self, command: FireTimer, current: ExecutionState, staged: bool, definitions: Definitions,
             mockable: bool, now_ms: int, tokens: TaskTokens, activities: Collection[str]) -> bool:
        """Send a heavy execution's continuation to the lane (or hold it); False: decide it here. ``staged``: the
        execution has a write in this batch already."""
        arn = command.arn
        if self.lane is None or arn not in self.heavy or not continues(command.timer_id):
            return False
        if arn in self.in_lane:  # another of its continuations is in the lane
            self._held.setdefault(arn, []).append(command)
            return True
        if command.timer_id not in current.timers or staged:
            return False
        key = (current.state_machine_arn, current.revision_id)
        definitions.of(current)  # the revision exists (and is cached) before its text is read for the lane
        try:
            if not self.lane.submit(current, key, lambda: definitions.text(key), mockable, command.timer_id, now_ms,
                                    tokens, activities):
                return False  # the lane has its hands full: decided here
        except Exception:  # a state the lane cannot take (it would be a bug): decided here, as without a lane
            log.exception("the heavy lane refused a step of %s", arn)
            return False
        self.in_lane.add(arn)
        self._metrics.heavy_lane_steps.labels("sent").inc()
        return True

    def decision(self, decided: Decided, current: ExecutionState, staged: bool,
                 decide_here: Callable[[], Decision | None]) -> Decision | None:
        """The lane's decision if the execution is still the one it was decided for; an outgrown one goes round
        again (``redo``); a failed one is decided here."""
        result = decided.result
        if not isinstance(result, BaseException) and self._current_enough(decided, current, staged):
            self._metrics.heavy_lane_steps.labels("applied").inc()
            return result
        if not isinstance(result, BaseException):
            self._metrics.heavy_lane_steps.labels("stale").inc()
            self.redo.append(FireTimer(decided.arn, decided.timer_id))
            return None
        self._metrics.heavy_lane_steps.labels("failed").inc()
        return self._decide_failed(decide_here)

    def _current_enough(self, decided: Decided, current: ExecutionState, staged: bool) -> bool:
        return (current.version, current.start_ms, current.redrive_count) == decided.identity and not staged

    def _decide_failed(self, decide_here: Callable[[], Decision | None]) -> Decision | None:
        return decide_here()

    def fired(self, command: FireTimer, decision: Decision | None) -> None:
        """A continuation that went on lightly, leaving no continuation behind, ends the execution's heaviness."""
        if decision is not None and not decision.heavy and continues(command.timer_id) \
                and not any(continues(timer_id) for timer_id in decision.state.timers):
            self.heavy.discard(command.arn)

    def staged(self, decision: Decision) -> None:
        if decision.heavy and self.lane is not None:  # its next continuation goes to the lane
            self.heavy.add(decision.state.arn)
        elif not decision.state.is_open:
            self.heavy.discard(decision.state.arn)

    def forget_shard(self, shard_id: int, shard_of: Callable[[str], int]) -> None:
        """The shard is no longer served: a lane's answer that lands for it is dropped."""
        for arns in (self.heavy, self.in_lane):
            arns.difference_update([arn for arn in arns if shard_of(arn) == shard_id])
        for arn in [arn for arn in self._held if shard_of(arn) == shard_id]:
            del self._held[arn]

    def close(self) -> None:
        if self.lane is not None:
            self.lane.close()
