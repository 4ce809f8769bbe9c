"""Which executions are heavy, and which of their steps the heavy lane (heavy_lane.py) decides instead of the engine
thread.

The engine thread decides an evaluating step (a fired timer, a task's result, a redrive) on a slice of the
evaluation budget; a step past its slice is abandoned there and sent here (``send``), and its execution is *heavy*
from then on: its evaluating steps go straight to the lane (``route``), one at a time (the others are held, in
order, until the lane's answer is back, else that answer would always be stale). So a heavy execution costs the
engine thread one slice, and then only the commit of each decision; the lane serves the heavy executions' steps in
the order they came, one each at a time. An answer is applied only if the execution is still the one it was
decided for (same version, start and redrive) and nothing else of it is in the batch; an outgrown one is applied
again (``redo``), to the state as it is; a failed one (the lane process died) is decided on the engine thread. The
execution stops being heavy after ``LIGHT_STEPS`` steps in a row that went on lightly leaving no continuation (one
light step between heavy ones, a Task's failure between heavy retries, does not), or when it closes. Used on the
engine thread only. Must not import the API, the integrations or the cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..decider import Decision
from ..decider.effects import TimerKind
from ..decider.execution import ExecutionState
from ..metrics import Metrics
from ..store.base import StoreUnavailable
from .batch import Reply
from .heavy_lane import Decided, Evaluating, Job, Lane

log = logging.getLogger("statewright.engine")

LIGHT_STEPS = 4  # light steps in a row after which an execution is no longer heavy
STALE = object()  # ``decision``: the lane's answer is outgrown, its command goes round again (``redo``)


class HeavyRouting:
    def __init__(self, lane: Lane | None, metrics: Metrics) -> None:
        """``lane``: None decides every step on the engine thread, on the whole budget."""
        self.lane = lane
        self._metrics = metrics
        self.heavy: dict[str, int] = {}  # open executions whose evaluating steps go to the lane -> light steps since
        self.in_lane: set[str] = set()  # executions with a step in the lane
        self._held: dict[str, list[tuple[Evaluating, Reply]]] = {}  # their other steps, until the lane's answer lands
        self.redo: list[tuple[Evaluating, Reply]] = []  # held steps released, and stale ones, for the next tick

    def back(self, decided: Decided) -> None:
        """Whatever becomes of the lane's answer, the lane's hands are free of this execution."""
        self.in_lane.discard(decided.arn)
        self.redo.extend(self._held.pop(decided.arn, ()))

    def route(self, command: Evaluating, reply: Reply, staged: bool, job: Callable[[], Job]) -> bool:
        """Send a step of a heavy execution to the lane, or hold it behind its step there; False: decide it here.
        ``staged``: the execution has a write in this batch already (then it is decided here: the lane's answer
        would be stale)."""
        arn = command.arn
        if self.lane is None:
            return False
        if arn in self.in_lane:
            self._held.setdefault(arn, []).append((command, reply))
            return True
        if arn not in self.heavy or staged:
            return False
        return self._submit(command, reply, job)

    def send(self, command: Evaluating, reply: Reply, staged: bool, job: Callable[[], Job]) -> bool:
        """A step that spent its slice: to the lane (its execution is heavy from now on); False: the lane cannot
        take it, decide it here. One behind a write of its execution in this batch goes in the next tick."""
        if self.lane is None:
            return False
        self.heavy[command.arn] = 0
        if staged:
            self.redo.append((command, reply))
            return True
        return self._submit(command, reply, job)

    def _submit(self, command: Evaluating, reply: Reply, job: Callable[[], Job]) -> bool:
        assert self.lane is not None
        try:
            if not self.lane.submit(job(), reply):
                return False  # the lane has its hands full: decided here
        except StoreUnavailable as exc:  # the definition's text could not be read: decided here
            log.warning("the heavy lane could not be sent a step of %s: %s", command.arn, exc)
            return False
        except Exception:  # a state the lane cannot take (it would be a bug): decided here, as without a lane
            log.exception("the heavy lane refused a step of %s", command.arn)
            return False
        self.in_lane.add(command.arn)
        self._metrics.heavy_lane_steps.labels("sent").inc()
        return True

    def decision(self, decided: Decided, reply: Reply, current: ExecutionState, staged: bool,
                 decide_here: Callable[[], Decision | None]) -> Decision | object | None:
        """The lane's decision if the execution is still the one it was decided for; STALE for an outgrown one,
        which goes round again (``redo``, with its reply); a failed one is decided here."""
        result = decided.result
        if not isinstance(result, BaseException) and self._current_enough(decided, current, staged):
            self._metrics.heavy_lane_steps.labels("applied").inc()
            return result
        if not isinstance(result, BaseException):
            self._metrics.heavy_lane_steps.labels("stale").inc()
            self.redo.append((decided.command, reply))
            return STALE
        self._metrics.heavy_lane_steps.labels("failed").inc()
        return self._decide_failed(decide_here)

    def _current_enough(self, decided: Decided, current: ExecutionState, staged: bool) -> bool:
        return (current.version, current.start_ms, current.redrive_count) == decided.identity and not staged

    def _decide_failed(self, decide_here: Callable[[], Decision | None]) -> Decision | None:
        return decide_here()

    def settled(self, arn: str, decision: Decision | None) -> None:
        """Count a step that went on lightly, leaving no continuation behind, towards the end of heaviness."""
        if arn in self.heavy and decision is not None and not decision.heavy \
                and not any(TimerKind.of(timer_id) is TimerKind.CONTINUE for timer_id in decision.state.timers):
            self.heavy[arn] += 1
            if self.heavy[arn] >= LIGHT_STEPS:
                del self.heavy[arn]

    def staged(self, decision: Decision) -> None:
        if decision.heavy and self.lane is not None:  # its next steps go to the lane
            self.heavy[decision.state.arn] = 0
        elif not decision.state.is_open:
            self.heavy.pop(decision.state.arn, None)

    def forget_shard(self, shard_id: int, shard_of: Callable[[str], int]) -> None:
        """The shard is no longer served: a lane's answer that lands for it is dropped."""
        for arns in (self.heavy, self._held):
            for arn in [arn for arn in arns if shard_of(arn) == shard_id]:
                del arns[arn]
        self.in_lane.difference_update([arn for arn in self.in_lane if shard_of(arn) == shard_id])

    def close(self) -> None:
        if self.lane is not None:
            self.lane.close()
