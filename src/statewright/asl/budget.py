"""The evaluation budget of one transition step: what JSONata, intrinsic functions and JSONPath may spend.

A transition step is one command applied to one execution (a start, a fired timer, a task result): every
expression it evaluates, in every state it runs, draws on one ``Budget`` of evaluation steps, wall time and
memory (items built: array elements, string characters). Past any of them the expression being evaluated fails
with ``BudgetExceeded``, which each evaluator reports as AWS names the failure of its language
(States.QueryEvaluationError for JSONata, States.IntrinsicFailure for intrinsics, States.Runtime for JSONPath), so
Retry and Catch apply. After that one failure the budget starts afresh, so a Catch can still evaluate its
Output, and ``exceeded`` tells the engine to continue the execution in a later tick (decider/flows.py).

The budget in force is a context variable (``active``), set by the decider around a step, so the evaluators deep
in templates and paths need no extra argument; evaluation outside a step gets a fresh default budget.

On the engine thread a step also has a *slice* (``slice_steps``, ``slice_items``): a small part of the budget
past which it is not failed but abandoned, ``SliceSpent`` unwinding the whole step (the decider works on a copy,
so nothing of it remains), and decided again elsewhere on the whole budget (engine/heavy_routing.py). The slice is
counted over the whole step, across the budget's restarts.

Steps and items are counted, so they fail (or not) the same way on every run. Wall time is the one bound that is
not deterministic, and only there when a clock is given; this module reads no clock of its own and must not
import the engine or the store.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token

from .errors import RUNTIME, StatesError

STEPS_MAX = 500_000  # evaluation steps of one transition step (about 1-2 s of JSONata here)
MS_MAX = 1_000  # wall time of evaluation in one transition step
ITEMS_MAX = 1_000_000  # array items and string characters built in one transition step
CLOCK_EVERY_STEPS = 1_000  # the clock is read once per this many steps, not on every one


class BudgetExceeded(StatesError):
    """The transition step's evaluation budget ran out. States.Runtime unless the evaluator names it otherwise."""

    def __init__(self, detail: str) -> None:
        super().__init__(RUNTIME, detail)
        self.detail = detail


class SliceSpent(BaseException):
    """The step spent its slice: abandoned here, to be decided again on the whole budget. A BaseException, so that
    no evaluator's ``except Exception`` turns it into a state's failure."""


class Budget:
    """What the expressions of one transition step may still spend. ``clock`` returns seconds (monotonic);
    without one, wall time is not bounded. ``slice_steps``/``slice_items``: past either, over the whole step,
    ``SliceSpent`` (None: no slice)."""

    __slots__ = ("_check_at", "_clock", "_deadline", "_slice_items", "_slice_steps", "_spent_items", "_spent_steps",
                 "exceeded", "items", "items_max", "ms_max", "steps", "steps_max")

    def __init__(self, steps_max: int = STEPS_MAX, ms_max: int = MS_MAX, items_max: int = ITEMS_MAX,
                 clock: Callable[[], float] | None = None, slice_steps: int | None = None,
                 slice_items: int | None = None) -> None:
        self.steps_max = steps_max
        self.ms_max = ms_max
        self.items_max = items_max
        self._clock = clock
        self._slice_steps = slice_steps
        self._slice_items = slice_items
        self._spent_steps = self._spent_items = 0  # before the last restart
        self.steps = self.items = 0
        self.exceeded = False  # ran out once in this step: the execution continues in a later tick
        self._restart()

    def _restart(self) -> None:
        self._spent_steps += self.steps
        self._spent_items += self.items
        self.steps = 0
        self.items = 0
        self._deadline: float | None = None  # set at the first step, so a step that evaluates nothing reads no clock
        self._check_at = 0

    def spend(self, steps: int = 1) -> None:
        """Count evaluation steps; raises BudgetExceeded past the steps or the time allowed."""
        self.steps += steps
        if self.steps > self._check_at:
            self._check()

    def build(self, items: int) -> None:
        """Count the items of a value about to be built (before building it); raises BudgetExceeded past the
        memory allowed."""
        self.items += items
        if self._slice_items is not None and self._spent_items + self.items > self._slice_items:
            raise SliceSpent
        if self.items > self.items_max:
            self._fail(f"more than {self.items_max} items (array elements, string characters) built, the memory "
                       f"allowed (evaluation_items_max)")

    def check_size(self, items: int) -> None:
        """A value just built holds ``items`` items: over the memory allowed on its own, it fails."""
        if self._slice_items is not None and items > self._slice_items:
            raise SliceSpent
        if items > self.items_max:
            self._fail(f"a value of {items} items (array elements, string characters) built, more than the memory "
                       f"allowed ({self.items_max}, evaluation_items_max)")

    def _check(self) -> None:
        if self._slice_steps is not None and self._spent_steps + self.steps > self._slice_steps:
            raise SliceSpent
        if self.steps > self.steps_max:
            self._fail(f"more than {self.steps_max} evaluation steps (evaluation_steps_max)")
        if self._clock is not None:
            now = self._clock()
            if self._deadline is None:
                self._deadline = now + self.ms_max / 1000
            elif now > self._deadline:
                self._fail(f"more than {self.ms_max} ms of evaluation (evaluation_ms_max)")
        self._check_at = min(self.steps_max, self.steps + CLOCK_EVERY_STEPS)
        if self._slice_steps is not None:
            self._check_at = min(self._check_at, self._slice_steps - self._spent_steps)

    def _fail(self, what: str) -> None:
        self.exceeded = True
        self._restart()
        raise BudgetExceeded(f"The evaluation budget of one transition step ran out: {what}.")


_active: ContextVar[Budget | None] = ContextVar("statewright_budget", default=None)


def active() -> Budget:
    """The budget of the transition step being decided, or a fresh default one outside a step."""
    budget = _active.get()
    return Budget() if budget is None else budget


class spending:
    """``with spending(budget):`` evaluation inside the block draws on ``budget``. A class rather than a generator
    context manager: it is entered once per transition step, on the engine's hot path."""

    __slots__ = ("_budget", "_token")

    def __init__(self, budget: Budget) -> None:
        self._budget = budget
        self._token: Token[Budget | None] | None = None

    def __enter__(self) -> Budget:
        self._token = _active.set(self._budget)
        return self._budget

    def __exit__(self, *exc_info: object) -> None:
        _active.reset(self._token)
