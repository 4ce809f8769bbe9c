"""Task states in the decider: scheduling attempts, their start, result, heartbeats and deadlines.

Pure, like the rest of the decider (it is mixed into ``decider._Step``). While a flow is in a Task state its record
holds ``task``: the attempt's scheduled event id (which names the attempt everywhere: tokens, dispatches,
timers), whether it started, its effective input, heartbeat interval and last heartbeat, and its timer ids. An
attempt is handed out by a *dispatch* (an outbox row written in the same commit); starting the attempt deletes the
dispatch, so a replayed or duplicated dispatch finds it started and is dropped.
"""

from __future__ import annotations

from typing import Any

from ..asl import errors
from ..asl.dataflow import select
from ..asl.errors import StatesError
from ..asl.jsonio import dumps, loads
from ..asl.states import TaskState

HEARTBEAT_TIMEOUT = "States.HeartbeatTimeout"
HTTP_DEADLINE_MS = 60_000


class TaskSteps:
    """The Task-state half of ``_Step``; it relies on _Step for events, timers, flows and outcomes."""

    def schedule(self, flow_id: str, state: TaskState, data: Any, context: Any) -> tuple:
        """Evaluate the Task's input and schedule its next attempt."""
        flow = self.flows[flow_id]
        attempt = flow["attempts"] + 1
        scheduled_id = self.execution.next_event_id  # the id the Scheduled event is about to get
        flow["attempts"] = attempt
        flow["task"] = {"scheduled_id": scheduled_id}  # visible to $$.Task.Token while Parameters render
        try:
            effective, timeout_s, heartbeat_s = self.task_input(flow_id, state, data, context)
        except StatesError:
            flow["task"] = None  # no attempt was scheduled
            raise
        text = self.json_of(effective)
        details: dict[str, Any]
        if state.integration == "activity":
            details = {"resource": state.resource, "input": text, "inputDetails": {"truncated": False}}
            event = ("ActivityScheduled", "activityScheduledEventDetails")
        else:
            details = {"resourceType": state.integration, "resource": _resource_name(state),
                       "region": self.execution.arn.split(":")[3], "parameters": text}
            event = ("TaskScheduled", "taskScheduledEventDetails")
        if timeout_s is not None:
            details["timeoutInSeconds"] = timeout_s
        if heartbeat_s is not None:
            details["heartbeatInSeconds"] = heartbeat_s
        assert self.emit(*event, details) == scheduled_id
        task = flow["task"]
        task.update(started=False, input=effective, heartbeat_ms=None if heartbeat_s is None else heartbeat_s * 1000,
                    last_beat_ms=None, timers=[])
        deadline_ms = None if timeout_s is None else timeout_s * 1000
        if state.integration == "http":
            deadline_ms = min(deadline_ms or HTTP_DEADLINE_MS, HTTP_DEADLINE_MS)
        if deadline_ms is not None:
            self.task_timer(task, f"timeout-{scheduled_id}", self.now_ms + deadline_ms)
        payload = {"kind": state.integration, "action": state.action, "pattern": state.pattern,
                   "resource": state.resource, "execution": self.execution.arn, "scheduled_id": scheduled_id,
                   "attempt": attempt, "input": effective}
        if state.pattern == "waitForTaskToken" or state.pattern.startswith("sync"):
            payload["token"] = self.token(scheduled_id, attempt)
        self.add_dispatch(str(scheduled_id), payload)
        return ("wait",)

    def task_input(self, flow_id: str, state: TaskState, data: Any, context: Any) -> tuple[Any, int | None,
                                                                                         int | None]:
        """The attempt's input (Parameters or Arguments) and its TimeoutSeconds and HeartbeatSeconds."""
        flow = self.flows[flow_id]
        if state.query_language == "JSONata":
            effective = self.note("afterArguments", self.jsonata(flow_id, state, "Arguments", data, data))
            timeout_s = self.jsonata_seconds(flow_id, state, "TimeoutSeconds", data, state.timeout_seconds) or None
            heartbeat_s = self.jsonata_seconds(flow_id, state, "HeartbeatSeconds", data,
                                               state.heartbeat_seconds) or None
        else:
            effective = self.note("afterInputPath", select(state.input_path, data, context))
            if state.parameters is not None:
                effective = self.note("afterParameters", state.parameters.render(effective, context,
                                                                                 self.seed_of(flow)))
            timeout_s = self.task_seconds(state.timeout_seconds, state.timeout_seconds_path, effective, context,
                                          "TimeoutSecondsPath")
            heartbeat_s = self.task_seconds(state.heartbeat_seconds, state.heartbeat_seconds_path, effective,
                                            context, "HeartbeatSecondsPath")
        if heartbeat_s is not None and timeout_s is not None and heartbeat_s >= timeout_s:
            raise StatesError(errors.RUNTIME, "The HeartbeatSeconds value must be less than the TimeoutSeconds "
                              "value")
        if (state.integration == "activity" and self.services is not None
                and not self.services.activity_exists(state.resource)):
            raise StatesError(errors.RUNTIME, f"The activity {state.resource} does not exist.")
        return effective, timeout_s, heartbeat_s

    def task_seconds(self, fixed: int | None, path: Any, effective: Any, context: Any, field: str) -> int | None:
        if path is None:
            return fixed
        value = path.resolve(effective, context)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise StatesError(errors.RUNTIME, f"The {field} field refers to value '{dumps(value)}' which is not a "
                              "valid positive integer")
        return value

    def task_timer(self, task: dict, timer_id: str, fire_at_ms: int) -> None:
        task["timers"].append(timer_id)
        self.add_timer(timer_id, fire_at_ms)

    def token(self, scheduled_id: int, attempt: int) -> str:
        if self.services is None:
            raise AssertionError("a task token is needed but no token signer was given")
        return self.services.mint_token(self.execution.arn, scheduled_id, attempt)

    def task_flow(self, scheduled_id: int) -> str | None:
        """The flow whose pending attempt has this scheduled event id, if any."""
        return next((fid for fid, flow in self.flows.items()
                     if flow["task"] and flow["task"]["scheduled_id"] == scheduled_id), None)

    def start_task(self, flow_id: str, worker_name: str | None) -> None:
        flow = self.flows[flow_id]
        task = flow["task"]
        state = self.machine_states(flow)[flow["state"]]
        task["started"] = True
        self.remove_dispatch(str(task["scheduled_id"]))
        if state.integration == "activity":
            self.emit("ActivityStarted", "activityStartedEventDetails",
                      {"workerName": worker_name} if worker_name else {})
        else:
            self.emit("TaskStarted", "taskStartedEventDetails",
                      {"resourceType": state.integration, "resource": _resource_name(state)})
        if task["heartbeat_ms"] is not None:
            task["last_beat_ms"] = self.now_ms
            self.task_timer(task, f"heartbeat-{task['scheduled_id']}", self.now_ms + task["heartbeat_ms"])

    def submit_task(self, flow_id: str, output: Any) -> None:
        """The integration's call returned for a .sync or .waitForTaskToken task: it now waits for the result."""
        flow = self.flows[flow_id]
        task = flow["task"]
        if task.get("submitted"):
            return  # a replayed dispatch submitted it again
        task["submitted"] = True
        if isinstance(output, dict) and "ExecutionArn" in output:
            task["child"] = output["ExecutionArn"]
        state = self.machine_states(flow)[flow["state"]]
        self.emit("TaskSubmitted", "taskSubmittedEventDetails",
                  {"resourceType": state.integration, "resource": _resource_name(state), "output": dumps(output),
                   "outputDetails": {"truncated": False}})

    def beat(self, flow_id: str) -> None:
        self.flows[flow_id]["task"]["last_beat_ms"] = self.now_ms

    def end_task(self, flow_id: str) -> dict:
        """Forget the pending attempt: its timers and any dispatch still waiting go with it."""
        flow = self.flows[flow_id]
        task, flow["task"] = flow["task"], None
        for timer_id in task.get("timers", []):
            if timer_id in self.execution.timers:
                self.remove_timer(timer_id)
        if not task.get("started"):
            self.remove_dispatch(str(task["scheduled_id"]))
        return task

    def task_succeeded(self, flow_id: str, output_text: str) -> tuple:
        flow = self.flows[flow_id]
        state = self.machine_states(flow)[flow["state"]]
        self.end_task(flow_id)
        if state.integration == "activity":
            self.emit("ActivitySucceeded", "activitySucceededEventDetails",
                      {"output": output_text, "outputDetails": {"truncated": False}})
        else:
            self.emit("TaskSucceeded", "taskSucceededEventDetails",
                      {"resourceType": state.integration, "resource": _resource_name(state), "output": output_text,
                       "outputDetails": {"truncated": False}})
        try:
            output, assigned = self.shape_result(flow_id, state, flow["data"], loads(output_text))
        except StatesError as failure:
            return self.failed_in_state(flow_id, state, failure)
        return self.exit(state, output, flow_id, assigned)

    def task_failed(self, flow_id: str, error: str | None, cause: str | None, timed_out: bool = False,
                    alias: str | None = None) -> tuple:
        flow = self.flows[flow_id]
        state = self.machine_states(flow)[flow["state"]]
        self.end_task(flow_id)
        details = {key: value for key, value in (("error", error), ("cause", cause)) if value is not None}
        if state.integration == "activity":
            kind = "ActivityTimedOut" if timed_out else "ActivityFailed"
            self.emit(kind, f"activity{kind[8:]}EventDetails", details)
        else:
            kind = "TaskTimedOut" if timed_out else "TaskFailed"
            self.emit(kind, f"task{kind[4:]}EventDetails",
                      {"resourceType": state.integration, "resource": _resource_name(state), **details})
        return self.on_error(flow_id, state, error, cause, alias)

    def task_timer_fired(self, flow_id: str, timer_id: str) -> tuple | None:
        """A task deadline: time the attempt out, or re-arm the heartbeat timer if a heartbeat came since."""
        task = self.flows[flow_id]["task"]
        task["timers"].remove(timer_id)
        if timer_id.startswith("heartbeat-"):
            due_ms = task["last_beat_ms"] + task["heartbeat_ms"]
            if due_ms > self.now_ms:
                self.task_timer(task, timer_id, due_ms)
                return None
            # AWS records a missed heartbeat as States.Timeout; rules naming States.HeartbeatTimeout still match it.
            return self.task_failed(flow_id, errors.TIMEOUT, None, timed_out=True, alias=HEARTBEAT_TIMEOUT)
        return self.task_failed(flow_id, errors.TIMEOUT, None, timed_out=True)


def _resource_name(state: TaskState) -> str:
    return state.action + (f".{state.pattern}" if state.pattern else "")
