"""Task states in the decider: scheduling attempts, their start, result, heartbeats and deadlines.

While a flow is in a Task state it holds a ``TaskAttempt``: the attempt's scheduled event id (which names the
attempt everywhere: tokens, dispatches, timers), whether it started, its heartbeat interval and last heartbeat,
and its timer ids. An attempt is handed out by a *dispatch* (an outbox row written in the same commit); starting
the attempt deletes the dispatch, so a replayed or duplicated dispatch finds it started and is dropped. Functions
over a ``step.Step``; pure, like the rest of the decider (whether an activity exists is data in ``Services``).
"""

from __future__ import annotations

import math
from typing import Any

from ..asl import errors
from ..asl.dataflow import select
from ..asl.definition_tasks import LAMBDA_FUNCTION
from ..asl.errors import StatesError
from ..asl.jsonio import dumps, loads
from ..asl.states import TaskState
from . import jsonata_states, retry_catch
from .effects import DispatchKind, TimerKind
from .execution import TaskAttempt
from .outcomes import WAIT, Outcome, Wait
from .step import Step, poll_dispatch, poll_timer, without_none

HEARTBEAT_TIMEOUT = "States.HeartbeatTimeout"
# The longest one call may take, whatever the state's TimeoutSeconds: an HTTP Task's 60 s, a Lambda function's
# 15 minutes, and 60 s for any other AWS API call. It bounds the call only: a .sync or .waitForTaskToken task's
# wait for its result after the call answered is bounded by TimeoutSeconds alone. A call whose answer was lost
# (the server died while it was in flight) so ends in States.Timeout, and the state's Retry decides.
CALL_DEADLINE_MS = {"http": 60_000, "lambda": 900_000, LAMBDA_FUNCTION: 900_000}
AWS_CALL_DEADLINE_MS = 60_000
POLL_FIRST_MS = 1_000  # a .sync task's AWS job is polled this long after it started, then ever less often
POLL_MAX_MS = 30_000
_NOT_CALLS = ("activity", "states")  # handed to workers, or applied inside the engine


def schedule(step: Step, flow_id: str, state: TaskState, data: Any, context: Any) -> Wait:
    """Evaluate the Task's input and schedule its next attempt."""
    flow = step.flows[flow_id]
    attempt = flow.attempts = flow.attempts + 1
    mocked = _mocked(step, state, attempt)
    scheduled_id = step.execution.next_event_id  # the id the Scheduled event is about to get
    flow.task = TaskAttempt(scheduled_id)  # visible to $$.Task.Token while Parameters render
    try:
        effective, timeout_s, heartbeat_s, role_arn = _task_input(step, flow_id, state, data, context)
    finally:
        flow.task = None  # scheduled only once its event is recorded
    if (state.integration, state.pattern) == ("ecs", "sync") and isinstance(effective, dict):
        # Step Functions starts a .sync ECS task as its own (AWS's recording shows it in TaskScheduled's parameters)
        effective = {**effective, "StartedBy": "AWS Step Functions"}
    text = step.json_of(effective, state.name)
    if state.integration in _OWN_EVENTS:
        details = {"resource": state.resource, "input": text, "inputDetails": {"truncated": False}}
        event = _event(state, "Scheduled")
    else:
        details = {"resourceType": state.integration, "resource": _resource_name(state),
                   "region": step.execution.arn.split(":")[3], "parameters": text}
        event = ("TaskScheduled", "taskScheduledEventDetails")
    if timeout_s is not None:
        details["timeoutInSeconds"] = timeout_s
    if heartbeat_s is not None:
        details["heartbeatInSeconds"] = heartbeat_s
    if role_arn is not None:  # the role the call is made as, whichever form of Credentials gave it (AWS's recordings)
        details["taskCredentials"] = {"roleArn": role_arn}
    assert step.emit(*event, details, flow=flow_id) == scheduled_id
    task = flow.task = TaskAttempt(scheduled_id, heartbeat_ms=None if heartbeat_s is None else heartbeat_s * 1000)
    deadline_ms = None if timeout_s is None else timeout_s * 1000
    call_ms = None  # how long the call itself may take (the integration gives up on it then)
    if state.integration not in _NOT_CALLS:
        cap_ms = CALL_DEADLINE_MS.get(state.integration, AWS_CALL_DEADLINE_MS)
        call_ms = min(deadline_ms or cap_ms, cap_ms)
        if state.pattern == "":
            deadline_ms = call_ms
        elif call_ms < (deadline_ms or cap_ms + 1):  # the call's answer must come in time, whatever comes later
            _add_timer(step, task, TimerKind.CALL.id(scheduled_id), step.now_ms + call_ms)
    if deadline_ms is not None:
        _add_timer(step, task, TimerKind.TIMEOUT.id(scheduled_id), step.now_ms + deadline_ms)
    payload = {"kind": state.integration, "action": state.action, "pattern": state.pattern,
               "resource": state.resource, "execution": step.execution.arn, "scheduled_id": scheduled_id,
               "attempt": attempt, "input": effective}
    if call_ms is not None:
        payload["call_s"] = call_ms / 1000
    if state.pattern == "waitForTaskToken" or state.pattern.startswith("sync"):
        payload["token"] = step.token(scheduled_id, attempt)
    if role_arn is not None:
        payload["role"] = role_arn
    elif state.integration not in _NOT_CALLS and state.integration != "http":
        payload["machine_role"] = step.execution.role_arn  # assumed only when the server is told to (README)
    if mocked is not None:  # answered by the mock, not the resource (the dispatch carries the answer until it lands)
        payload["mocked"] = mocked
    if step.execution.trace is not None:  # the attempt's span is named by its scheduled event (trace_context.py)
        payload["trace"] = step.execution.trace
    step.add_dispatch(str(scheduled_id), payload)
    return WAIT


def _task_input(step: Step, flow_id: str, state: TaskState, data: Any,
                context: Any) -> tuple[Any, int | None, int | None, str | None]:
    """The attempt's input (Parameters or Arguments), its TimeoutSeconds and HeartbeatSeconds, and the role its
    call is made as (Credentials)."""
    if state.query_language == "JSONata":
        effective = step.note("afterArguments", step.jsonata(flow_id, state, "Arguments", data, data))
        timeout_s = jsonata_states.seconds(step, flow_id, state, "TimeoutSeconds", data, state.timeout_seconds)
        heartbeat_s = jsonata_states.seconds(step, flow_id, state, "HeartbeatSeconds", data, state.heartbeat_seconds)
        timeout_s, heartbeat_s = timeout_s or None, heartbeat_s or None
        credentials = step.jsonata(flow_id, state, "Credentials", data, None)
    else:
        selected = effective = step.note("afterInputPath", select(state.input_path, data, context))
        seed = step.seed_of(step.flows[flow_id])
        if state.parameters is not None:
            effective = state.parameters.render(effective, context, seed)
        step.note("afterParameters", effective)  # shown without Parameters too, as AWS's TestState shows it
        credentials = None if state.credentials is None else state.credentials.render(selected, context, seed)
        timeout_s = _seconds(state.timeout_seconds, state.timeout_seconds_path, effective, context,
                             "TimeoutSecondsPath")
        heartbeat_s = _seconds(state.heartbeat_seconds, state.heartbeat_seconds_path, effective, context,
                               "HeartbeatSecondsPath")
    if heartbeat_s is not None and timeout_s is not None and heartbeat_s >= timeout_s:
        raise StatesError(errors.RUNTIME, "The HeartbeatSeconds value must be less than the TimeoutSeconds value")
    if state.integration == "activity" and step.services is not None and step.trace is None and (
            state.resource not in step.services.activities  # TestState answers an activity from its mock
            # another region's or account's: unseen from here
            or state.resource.split(":")[3:5] != step.execution.arn.split(":")[3:5]):
        raise StatesError(errors.RUNTIME, f"The activity {state.resource} does not exist.")
    return effective, timeout_s, heartbeat_s, _role(credentials)


def _role(credentials: Any) -> str | None:
    if credentials is None:
        return None
    role = credentials.get("RoleArn") if isinstance(credentials, dict) else None
    if not isinstance(role, str) or not role:
        raise StatesError(errors.RUNTIME, f"The Credentials field must hold a RoleArn string, not "
                                          f"'{dumps(credentials)}'")
    return role


def _seconds(fixed: int | None, path: Any, effective: Any, context: Any, field: str) -> int | None:
    if path is None:
        return fixed
    value = path.resolve(effective, context)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise StatesError(errors.RUNTIME, f"The {field} field refers to value '{dumps(value)}' which is not a "
                          "valid positive integer")
    return value


def _add_timer(step: Step, task: TaskAttempt, timer_id: str, fire_at_ms: int) -> None:
    task.timers.append(timer_id)
    step.add_timer(timer_id, fire_at_ms)


def pending_flow(step: Step, scheduled_id: int) -> str | None:
    """The flow whose pending attempt has this scheduled event id, if any."""
    return next((flow_id for flow_id, flow in step.flows.items()
                 if flow.task is not None and flow.task.scheduled_id == scheduled_id), None)


def start(step: Step, flow_id: str, worker_name: str | None) -> None:
    """The attempt leaves the engine: record it started and delete its dispatch, in one commit."""
    flow = step.flows[flow_id]
    task = flow.task
    state = step.state_of(flow)
    task.started = True
    step.remove_dispatch(str(task.scheduled_id))
    if state.integration == "activity":
        step.emit("ActivityStarted", "activityStartedEventDetails", {"workerName": worker_name} if worker_name else {},
                  flow=flow_id)
    elif state.integration == LAMBDA_FUNCTION:
        step.emit("LambdaFunctionStarted", None, {}, flow=flow_id)
    else:
        step.emit("TaskStarted", "taskStartedEventDetails",
                  {"resourceType": state.integration, "resource": _resource_name(state)}, flow=flow_id)
    if task.heartbeat_ms is not None:
        task.last_beat_ms = step.now_ms
        _add_timer(step, task, TimerKind.HEARTBEAT.id(task.scheduled_id), step.now_ms + task.heartbeat_ms)


def submit(step: Step, flow_id: str, output: Any, job: Any = None) -> None:
    """The integration's call returned for a .sync or .waitForTaskToken task: it now waits for the result, or
    (``job``, an AWS job a .sync task started) polls the job until it ends."""
    flow = step.flows[flow_id]
    task = flow.task
    if task.submitted:
        return  # a replayed dispatch submitted it again
    task.submitted = True
    if f"call-{task.scheduled_id}" in task.timers:  # the call answered in time
        task.timers.remove(f"call-{task.scheduled_id}")
        step.remove_timer(f"call-{task.scheduled_id}")
    state = step.state_of(flow)
    if job is not None:
        task.job = {**job, "kind": state.integration, "action": state.action}
        _arm_poll(step, task)
    if state.integration == "states" and isinstance(output, dict) and "ExecutionArn" in output:
        task.child = output["ExecutionArn"]
    step.emit("TaskSubmitted", "taskSubmittedEventDetails",
              {"resourceType": state.integration, "resource": _resource_name(state), "output": dumps(output),
               "outputDetails": {"truncated": False}}, flow=flow_id)


def submit_mocked(step: Step, flow_id: str) -> None:
    """A test case's mocked answer to a .sync or .waitForTaskToken attempt: it comes as the callback or the job's
    end would, after the call it stands for, which AWS records as TaskSubmitted before the result (AWS's histories
    of both patterns, as LocalStack's AWS-validated test_base_callbacks and test_callback record them; a Throw too,
    as a SendTaskFailure is recorded). The mock gives the task's result only, not that call's response, so the
    submitted output is {}: no response is made up."""
    flow = step.flows[flow_id]
    state = step.state_of(flow)
    if state.pattern and not flow.task.submitted and _mocked(step, state, flow.attempts) is not None:
        submit(step, flow_id, {})


def polled(step: Step, flow_id: str, poll: int) -> None:
    """The job was still running at poll number ``poll``: that poll is over (the next one has its timer)."""
    task = step.flows[flow_id].task
    if task.job is not None and poll == task.polls:  # not a late report of a poll a newer one replaced
        step.end_poll(task)


def _poll_job(step: Step, flow_id: str) -> None:
    """The poll timer fired: dispatch a poll of the job (replacing one that never reported: its report was lost,
    so the job is not left unwatched) and arm the next, so the polls go on whatever becomes of each report."""
    flow = step.flows[flow_id]
    task = flow.task
    step.end_poll(task)
    task.polls += 1
    task.polling = True
    step.add_dispatch(poll_dispatch(task), step.job_dispatch(flow, "poll"))
    _arm_poll(step, task)


def _arm_poll(step: Step, task: TaskAttempt) -> None:
    """The timer of the job's next poll (a row, so a restart loses none): 1 s after the start, doubling to 30 s,
    scaled by --wait-scale like a Wait."""
    delay_ms = min(POLL_FIRST_MS * 2 ** task.polls, POLL_MAX_MS)
    scale = 1.0 if step.services is None else step.services.wait_scale
    _add_timer(step, task, poll_timer(task), step.now_ms + math.ceil(delay_ms * scale))


def beat(step: Step, flow_id: str) -> None:
    step.flows[flow_id].task.last_beat_ms = step.now_ms


def end(step: Step, flow_id: str, abandoned: bool = False) -> None:
    """Forget the pending attempt: its timers and any dispatch still waiting go with it. ``abandoned``: it ends
    before its result came (a deadline, a sibling's failure), so an AWS job it polls is stopped."""
    flow = step.flows[flow_id]
    if flow.task.job is not None and flow.task.child is None:  # (a distributed Map's job is its read's progress)
        if abandoned:
            step.abandon_job(flow)
        else:  # the result came from the latest poll (or a callback): its dispatch goes
            step.end_poll(flow.task)
    task, flow.task = flow.task, None
    if abandoned and task.child is not None:  # a nested execution or map run it waits on stops too
        step.add_dispatch(f"stop-{task.scheduled_id}", {"kind": DispatchKind.STOP, "target": task.child})
    for timer_id in task.timers:
        if timer_id in step.execution.timers:
            step.remove_timer(timer_id)
    if not task.started:
        step.remove_dispatch(str(task.scheduled_id))


def succeeded(step: Step, flow_id: str, output_text: str) -> Outcome:
    flow = step.flows[flow_id]
    state = step.state_of(flow)
    end(step, flow_id)
    if state.integration in _OWN_EVENTS:
        step.emit(*_event(state, "Succeeded"), {"output": output_text, "outputDetails": {"truncated": False}},
                  flow=flow_id)
    else:
        step.emit("TaskSucceeded", "taskSucceededEventDetails",
                  {"resourceType": state.integration, "resource": _resource_name(state), "output": output_text,
                   "outputDetails": {"truncated": False}}, flow=flow_id)
    try:
        output, assigned = step.shape_result(flow_id, state, flow.data, loads(output_text))
    except StatesError as failure:
        return retry_catch.failed_in_state(step, flow_id, state, failure)
    return step.exit(state, output, flow_id, assigned)


def failed(step: Step, flow_id: str, error: str | None, cause: str | None, timed_out: bool = False,
           alias: str | None = None) -> Outcome:
    flow = step.flows[flow_id]
    state = step.state_of(flow)
    end(step, flow_id, abandoned=timed_out)
    details = without_none(error, cause)
    if state.integration in _OWN_EVENTS:
        step.emit(*_event(state, "TimedOut" if timed_out else "Failed"), details, flow=flow_id)
    else:
        kind = "TaskTimedOut" if timed_out else "TaskFailed"
        step.emit(kind, f"task{kind[4:]}EventDetails",
                  {"resourceType": state.integration, "resource": _resource_name(state), **details}, flow=flow_id)
    return retry_catch.on_error(step, flow_id, state, error, cause, alias)


def timer_fired(step: Step, flow_id: str, timer_id: str) -> Outcome:
    """A task deadline: time the attempt out, or re-arm the heartbeat timer if a heartbeat came since."""
    task = step.flows[flow_id].task
    task.timers.remove(timer_id)
    if timer_id == poll_timer(task):
        _poll_job(step, flow_id)
        return WAIT
    if TimerKind.of(timer_id) is TimerKind.HEARTBEAT:
        due_ms = task.last_beat_ms + task.heartbeat_ms
        if due_ms > step.now_ms:
            _add_timer(step, task, timer_id, due_ms)
            return WAIT
        # AWS records a missed heartbeat as States.Timeout; rules naming States.HeartbeatTimeout still match it.
        return failed(step, flow_id, errors.TIMEOUT, None, timed_out=True, alias=HEARTBEAT_TIMEOUT)
    return failed(step, flow_id, errors.TIMEOUT, None, timed_out=True)


def _mocked(step: Step, state: TaskState, attempt: int) -> dict[str, Any] | None:
    """The mocked outcome of this attempt when the execution runs a test case that names the state (mocks.py)."""
    execution, services = step.execution, step.services
    if execution.test_case is None or services is None or services.mocks is None:
        return None
    machine = execution.state_machine_arn.split(":")[6]
    return services.mocks.response(machine, execution.test_case, state.name, attempt - 1)


# Integrations whose attempts AWS records with events of their own (Activity*, LambdaFunction*), not Task* ones.
_OWN_EVENTS = {"activity": "Activity", LAMBDA_FUNCTION: "LambdaFunction"}


def _event(state: TaskState, what: str) -> tuple[str, str]:
    """The event type and its details' field: ("ActivityScheduled", "activityScheduledEventDetails"), ..."""
    family = _OWN_EVENTS[state.integration]
    return family + what, family[0].lower() + family[1:] + what + "EventDetails"


def _resource_name(state: TaskState) -> str:
    return state.action + (f".{state.pattern}" if state.pattern else "")
