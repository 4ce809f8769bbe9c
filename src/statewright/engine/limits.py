"""Every bound on a loop, a queue or a cache in the engine and its edges, in one place, each with its unit.

A limit says what happens when it is reached; nothing in statewright grows without one. ``Limits()`` holds the
defaults; ``statewright serve`` and the simulator pass their own. Pure data: importable from every layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..asl import budget


@dataclass(frozen=True, slots=True)
class Limits:
    # The API's commands waiting for the engine thread, in each of its two queues (calls on executions; task
    # answers), per account. At the limit ``Engine.submit`` raises InboxFull and the API answers
    # ThrottlingException (HTTP 400), so a caller backs off instead of the queue growing.
    inbox_commands_max: int = 20_000
    # Items of work one tick applies and commits together, shared in turn between the kinds of work waiting (the
    # API's commands, the integrations' results, the lane's decisions, transfers, due timers: scheduler.py); the
    # rest wait a tick. Between these bounds the budget (starting at the lower) follows the time per item of recent
    # full ticks, so that a tick lasts about tick_ms_target: a command waits about two ticks, however long a burst.
    tick_commands_max: int = 2_000
    tick_commands_min: int = 64
    tick_ms_target: int = 25
    # Timer rows one refill reads from a shard. A shard with more due at once (after a long outage) loads them a
    # page at a time as the window drains, oldest first.
    refill_rows_max: int = 5_000
    # Timers held in one shard's window. A commit offering one more drops the window, which reloads page by page
    # (earliest first): the rows are the truth, the window only their cache.
    timer_window_max: int = 100_000
    # Dispatches held in memory over all shards: handed out to an integration or queued as a transfer and not yet
    # done. Beyond it, committed dispatches stay only in the outbox rows and are read back, oldest first per shard,
    # as the window drains.
    outbox_window_max: int = 10_000
    # Outbox rows read from a shard at a time (at start, and when its window has room again).
    outbox_page_rows_max: int = 1_000
    # Activity tasks waiting for a worker in memory, over all activities. At the limit the matcher gives a task
    # back to the engine, which leaves it in the outbox until workers drain the backlog. Above outbox_window_max,
    # which bounds it already, so only copies offered again after a re-read can reach it.
    activity_backlog_tasks_max: int = 20_000
    # Outbound HTTP Task calls in flight at once (AWS's HTTP Task quota is 300 calls per second); more wait
    # their turn in memory, bounded by outbox_window_max.
    http_calls_concurrent_max: int = 300
    # Calls to AWS services (botocore, each on a thread of its own) in flight at once, over all services and per
    # service; more wait their turn in memory, bounded by outbox_window_max, before their attempt starts.
    aws_calls_concurrent_max: int = 128
    aws_calls_per_service_max: int = 32
    # Open executions whose mutable state stays in memory (least recently used leave first).
    cached_executions_max: int = 10_000
    # EXPRESS executions running in memory (they last five minutes at most). At the limit new starts are answered
    # ThrottlingException; the starts a new owner runs again from their rows are not refused.
    express_runs_max: int = 100_000
    # Parsed definitions kept in memory (least recently used leave first).
    cached_definitions_max: int = 1_000
    # The evaluation budget of one transition step (one command applied to one execution, or one TestState):
    # JSONata, intrinsic and JSONPath steps, wall time, and items built (array elements and string characters; a
    # range is counted before it is built). Past one, the state being evaluated fails with
    # States.QueryEvaluationError (JSONata), States.IntrinsicFailure (intrinsics) or States.Runtime (JSONPath),
    # so Retry and Catch apply, and the execution goes on in a later tick.
    evaluation_steps_max: int = budget.STEPS_MAX
    evaluation_ms_max: int = budget.MS_MAX
    evaluation_items_max: int = budget.ITEMS_MAX
    # The slice of that budget a step may spend on the engine thread (evaluation steps, and items built), over the
    # whole step: past it the step is abandoned and decided again in the heavy lane on the whole budget (a start's
    # first state waits on a continuation instead, so the caller is answered at once). Above apply_steps_max, so
    # a step that stops on its share of evaluation in time is not sliced. About 10 ms of JSONata here.
    evaluation_slice_steps: int = 4_000
    evaluation_slice_items: int = 100_000
    # States one execution enters in one transition step, and evaluation steps after which it enters no more:
    # it stops before its next state and continues in a later tick (a due-now timer committed with its state),
    # so the commands of other executions waiting in the inbox get their turn; its burst waits behind itself.
    apply_states_max: int = 100
    apply_steps_max: int = 2_000
    # How long an execution that stopped on apply_steps_max (or ran out of budget) waits before it goes on: its
    # evaluation takes at most a small share of the engine thread, whatever its loop does.
    heavy_pause_ms: int = 250
    # A distributed Map's ItemReader reads its source a page at a time (the run gets each page's items, and its
    # children start, before the next is read): at most this many bytes of a JSONL or CSV object (cut at the last
    # whole row; a longer row is read whole), or this many objects of a listing. A JSON or Parquet object is one
    # page, a manifest's CSV file one page each.
    item_reader_page_bytes: int = 8 * 1024 * 1024
    item_reader_page_items: int = 10_000
    # TestState calls evaluating at once, each on a thread of its own off the event loop; more wait their turn.
    test_states_concurrent_max: int = 2

    def budgets(self, clock: Callable[[], float] | None, sliced: bool = False) -> Callable[[], budget.Budget]:
        """A factory of fresh evaluation budgets for transition steps, as these limits set them (``clock``: seconds,
        monotonic; None leaves wall time unbounded; ``sliced``: with the engine thread's slice)."""
        if sliced:
            return lambda: budget.Budget(self.evaluation_steps_max, self.evaluation_ms_max, self.evaluation_items_max,
                                         clock, self.evaluation_slice_steps, self.evaluation_slice_items)
        return lambda: budget.Budget(self.evaluation_steps_max, self.evaluation_ms_max, self.evaluation_items_max,
                                     clock)
