"""The decider, PURE: (mutable state, command, definition, now_ms, services) -> Decision.

A Decision carries the history events to append, the new mutable state and its effects (timers and dispatches to
write or delete). Nothing here reads a clock, the store or the disk: what a decision needs of the world (task token
signing, which activities exist, the evaluation budget) comes in ``Services``, and the time is ``now_ms``. This
package imports only ``statewright.asl`` and itself (tests/test_layers.py), so the engine, the heavy lane, the
simulator and TestState all run the same decisions and replay them exactly.

The public entry is this module's names; the work is done by functions over a ``step.Step`` (the decision being
built), one module per concept:
  decide            the commands: start, fire a timer, an attempt's start, result and heartbeat, stop, redrive
  flows             running flows: enter a state, act on its outcome, gather a fan-out's children
  jsonpath_states   Pass, Choice, Wait, Succeed, Fail under JSONPath
  jsonata_states    the same under JSONata, and the JSONata fields of the other states
  fan_out           Parallel and Map: inputs, child records, join, a child's failure
  distributed_map   a distributed Map's items, batches and tolerated failures
  map_runs          a distributed Map's map run: the parent's side and the run's coordinator
  retry_catch       Retry, Catch, or the flow fails
  tasks             Task attempts: schedule, start, result, heartbeat, deadlines
  execution         the mutable state (ExecutionState, Flow, TaskAttempt) and its stored form
  outcomes          what running a state comes to, and what an integration reports of an attempt
  mocks             Step Functions Local's mock configuration
  test_state        TestState: one state run once
"""

from .decide import (
    EXECUTION_TIMEOUT_TIMER,
    HISTORY_EVENTS_MAX,
    PAYLOAD_BYTES_MAX,
    OneStateRun,
    ack_dispatch,
    complete_attempt,
    describe_for_parent,
    fail_unstorable,
    fire_timer,
    heartbeat,
    pending_attempts,
    redrive,
    redrive_reads,
    redriven_by,
    start,
    start_attempt,
    started_again,
    stop,
)
from .step import Decision, Services

__all__ = [
    "EXECUTION_TIMEOUT_TIMER", "HISTORY_EVENTS_MAX", "PAYLOAD_BYTES_MAX", "Decision", "OneStateRun", "Services",
    "ack_dispatch", "complete_attempt", "describe_for_parent", "fail_unstorable", "fire_timer", "heartbeat",
    "pending_attempts", "redrive", "redrive_reads", "redriven_by", "start", "start_attempt", "started_again",
    "stop",
]
