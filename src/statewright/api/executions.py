"""Execution operations: start, stop, redrive, describe, list, history, and the definition an execution runs."""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from ..asl.definition import InvalidDefinition
from ..asl.states import MapState, ParallelState, State, TaskState
from ..engine import commands
from ..engine.core import shard_for
from ..engine.decider import OneStateRun
from ..engine.execution import ExecutionState, redrive_status
from ..engine.express import ASYNC, SYNC
from ..engine.outcomes import AttemptFailed, AttemptSucceeded
from ..engine.routing import route
from ..engine.step import without_data
from ..engine.test_state import definition_under_test, holds_distributed_map, outcome_of, start_test
from ..integrations.aws import calls
from ..integrations.http import invoke
from ..store.base import AliasRecord, Page, StateMachineRecord, VersionRecord
from . import arns, describe, paging
from .arns import Scope
from .errors import (
    AwsError,
    execution_does_not_exist,
    resource_not_found,
    state_machine_does_not_exist,
    type_not_supported,
)
from .payloads import parse_json
from .service import EXPRESS, Service, Target, handler, seconds

# StartSyncExecution's billingDetails: AWS bills memory in 64 MB steps from a workflow's definition and payloads;
# statewright reports the first step. Duration is billed by the 100 ms, rounded up.
BILLED_MEMORY_MB = 64
BILLED_STEP_MS = 100
LOCAL_ID_TRIES_MAX = 64  # ids drawn for a new execution until one falls in a shard served here


async def _load(service: Service, arn: str) -> ExecutionState:
    arns.execution(arn)  # an express ARN is refused here, as AWS does (its executions keep no state)
    blob = await service.store_call(service.store.load_execution, arn)
    execution = None if blob is None else ExecutionState.from_blob(blob)
    if execution is None or service.retention.expired(execution, service.clock()):  # expired: gone, deleted or not
        raise execution_does_not_exist(arn)
    return execution


def _check_input(text: str) -> None:
    if not text.strip():
        raise AwsError("InvalidExecutionInput", "Invalid State Machine Execution Input: 'Invalid execution input.'")
    parse_json(text, "InvalidExecutionInput", "Invalid State Machine Execution Input")


@handler("StartExecution")
async def start_execution(service: Service, params: dict, scope: Scope) -> dict:
    command = await _start_command(service, params, None)
    try:
        start_ms = await service.run(command)
    except commands.ExecutionAlreadyExists:
        raise AwsError("ExecutionAlreadyExists", f"Execution Already Exists: '{command.arn}'") from None
    return {"executionArn": command.arn, "startDate": seconds(start_ms)}


@handler("StartSyncExecution")
async def start_sync_execution(service: Service, params: dict, scope: Scope) -> dict:
    """Runs an Express execution to its end and answers with its result: HTTP 200 whether it succeeded or not."""
    command = await _start_command(service, params, SYNC)
    done = await service.run(command)
    answer: dict[str, Any] = {
        "executionArn": command.arn, "stateMachineArn": command.state_machine_arn, "name": command.name,
        "startDate": seconds(done["start_ms"]), "stopDate": seconds(done["stop_ms"]), "status": done["status"],
        "input": done["input"], "inputDetails": {"included": True},
        "billingDetails": {"billedMemoryUsedInMB": BILLED_MEMORY_MB,
                           "billedDurationInMilliseconds": _billed_ms(done["stop_ms"] - done["start_ms"])}}
    if done["output"] is not None:
        answer["output"] = done["output"]
        answer["outputDetails"] = {"included": True}
    for key in ("error", "cause"):
        if done[key] is not None:
            answer[key] = done[key]
    return answer


def _billed_ms(duration_ms: int) -> int:
    """AWS bills Express executions by the 100 ms, rounded up."""
    return max(1, -(-duration_ms // BILLED_STEP_MS)) * BILLED_STEP_MS


def _express_arn(service: Service, machine_arn: str, name: str) -> str:
    """An Express execution's ARN: ``...:express:MACHINE:NAME:ID``, with an id whose shard this node serves (see
    ``_local_id``): a StartSyncExecution caller's wait is then never forwarded to another node (whose answer a
    forwarder gives up on after seconds, and a start sent twice would be an execution run twice)."""
    prefix = machine_arn.replace(":stateMachine:", ":express:", 1) + f":{name}:"
    return prefix + _local_id(service, prefix)


def _local_id(service: Service, prefix: str) -> str:
    """A new UUID for the execution ``prefix + id``: one whose shard this node serves, when it serves any, so the
    start is applied here, not forwarded (a few draws with three nodes)."""
    for _ in range(LOCAL_ID_TRIES_MAX):
        drawn = str(uuid.uuid4())
        if service.engine.owns(shard_for(prefix + drawn, service.engine.shard_count)):
            return drawn
    return drawn


async def _type_of(service: Service, target: Target) -> str:
    """STANDARD or EXPRESS: a state machine's type, which its versions and aliases share."""
    if isinstance(target, AliasRecord):
        machine = await service.state_machine(target.state_machine_arn)
        if machine is None:  # deleted since: its aliases went with it
            raise state_machine_does_not_exist(target.state_machine_arn)
        target = machine
    return target.machine.type if isinstance(target, VersionRecord) else target.type


async def _start_command(service: Service, params: dict, sync: str | None) -> commands.StartExecution:
    """The start of an execution of the state machine, version or alias ``params`` names. ``sync``: SYNC for
    StartSyncExecution, which runs only EXPRESS state machines; StartExecution runs both kinds, an EXPRESS one
    durably started (ASYNC)."""
    target_arn, test_case = _test_case(service, params["stateMachineArn"])
    machine_arn = arns.qualified(target_arn).machine
    target = await service.state_machine(target_arn)
    if target is None:
        raise state_machine_does_not_exist(target_arn)
    prefix = machine_arn.replace(":stateMachine:", ":execution:", 1) + ":"
    name = params.get("name") or _local_id(service, prefix)  # unnamed: started here, not forwarded
    arns.check_name(name)
    text = params.get("input", "{}")
    _check_input(text)
    arn = prefix + name
    if await _type_of(service, target) == EXPRESS:  # every start is its own execution, whatever its name: AWS
        # adds an id
        arn = _express_arn(service, machine_arn, name)
    alias_arn = None
    if isinstance(target, AliasRecord):  # the version by the alias's weights, drawn from the execution's ARN
        alias_arn = target.arn
        version_arn = f"{machine_arn}:{route(target.routing, arn)}"
        target = await service.state_machine(version_arn)
        if target is None:  # deleted since: the alias no longer routes to it, and the cached alias is stale
            raise state_machine_does_not_exist(version_arn)
    version_arn = target.arn if isinstance(target, VersionRecord) else None
    machine = target.machine if isinstance(target, VersionRecord) else target
    express = None
    if machine.type == EXPRESS:
        express = sync or ASYNC
    elif sync is not None:
        raise type_not_supported()
    return commands.StartExecution(arn, machine_arn, name, machine.revision_id, machine.role_arn, text,
                                   version_arn=version_arn, alias_arn=alias_arn, test_case=test_case,
                                   express=express)


def _test_case(service: Service, given: str) -> tuple[str, str | None]:
    """(the state machine ARN, the test case) of ``ARN#TestCase``, as Step Functions Local takes a mocked run."""
    target_arn, mark, case = given.partition("#")
    if not mark:
        return given, None
    if service.mocks is None:
        raise AwsError("ValidationException", f"'{given}' names a test case; start the server with --mock-config "
                                              "FILE to run executions on mocked responses")
    machine = arns.qualified(target_arn).machine.rsplit(":", 1)[1]
    if machine not in service.mocks.cases:
        raise AwsError("ValidationException", f"The mock configuration has no test cases for the state machine "
                                              f"'{machine}'; it has them for: {', '.join(sorted(service.mocks.cases))}")
    if not service.mocks.has_case(machine, case):
        known = ", ".join(sorted(service.mocks.cases[machine]))
        raise AwsError("ValidationException", f"The mock configuration has no test case '{case}' for the state "
                                              f"machine '{machine}'; its test cases: {known}")
    return target_arn, case


@handler("StopExecution")
async def stop_execution(service: Service, params: dict, scope: Scope) -> dict:
    arn = params["executionArn"]
    arns.execution(arn)  # an express ARN is refused here, as AWS does (its executions keep no state)
    try:
        stop_ms = await service.run(commands.StopExecution(arn, params.get("error"), params.get("cause")))
    except commands.ExecutionDoesNotExist:
        raise execution_does_not_exist(arn) from None
    return {"stopDate": seconds(stop_ms)}


@handler("RedriveExecution")
async def redrive_execution(service: Service, params: dict, scope: Scope) -> dict:
    arn = params["executionArn"]
    execution = await _load(service, arn)
    reason = await _machine_gone(service, execution)
    if reason is not None:
        raise AwsError("ExecutionNotRedrivable", reason)
    try:
        redrive_ms = await service.run(commands.RedriveExecution(arn, params.get("clientToken")))
    except commands.ExecutionDoesNotExist:
        raise execution_does_not_exist(arn) from None
    except commands.ExecutionNotRedrivable as refusal:
        raise AwsError("ExecutionNotRedrivable", refusal.reason) from None
    return {"redriveDate": seconds(redrive_ms)}


async def _machine_gone(service: Service, execution: ExecutionState) -> str | None:
    """AWS's reason when the execution's state machine is being deleted (statewright deletes at once): a closed
    execution of a deleted state machine cannot be redriven."""
    if not execution.is_open and await service.state_machine(execution.state_machine_arn) is None:
        return "State machine is in DELETING status"
    return None


@handler("DescribeExecution")
async def describe_execution(service: Service, params: dict, scope: Scope) -> dict:
    execution = await _load(service, params["executionArn"])
    described: dict[str, Any] = {
        "executionArn": execution.arn,
        "stateMachineArn": execution.state_machine_arn,
        "name": execution.name,
        "status": execution.status,
        "startDate": seconds(execution.start_ms),
        "input": execution.input,
        "inputDetails": {"included": True},
    }
    _qualifiers(described, execution.version_arn, execution.alias_arn)
    _redrives(described, execution.redrive_count, execution.redrive_ms)
    if execution.stop_ms is not None:
        described["stopDate"] = seconds(execution.stop_ms)
    if execution.output is not None:
        described["output"] = execution.output
        described["outputDetails"] = {"included": True}
    for key in ("error", "cause"):
        if getattr(execution, key) is not None:
            described[key] = getattr(execution, key)
    described["redriveStatus"], reason = redrive_status(execution, service.clock(), service.engine.redrivable_ms)
    reason = await _machine_gone(service, execution) or reason
    if reason is not None:
        described["redriveStatus"], described["redriveStatusReason"] = "NOT_REDRIVABLE", reason
    return described


@handler("ListExecutions")
async def list_executions(service: Service, params: dict, scope: Scope) -> dict:
    if "stateMachineArn" not in params:
        raise AwsError("ValidationException", "Must provide a StateMachine ARN or MapRun ARN")
    target = arns.qualified(params["stateMachineArn"])
    try:
        page = await service.store_call(_list_executions, service, target, params["stateMachineArn"],
                                        params.get("statusFilter"), paging.page_size(params.get("maxResults")),
                                        paging.decode(params.get("nextToken")),
                                        _REDRIVEN.get(params.get("redriveFilter")))
    except ValueError:  # a token that decodes but is no cursor of ours
        raise AwsError("InvalidToken", f"Invalid Token: '{params['nextToken']}'") from None
    items = []
    for summary in page.items:
        item = {"executionArn": summary.arn, "stateMachineArn": summary.state_machine_arn, "name": summary.name,
                "status": summary.status, "startDate": seconds(summary.start_ms)}
        _qualifiers(item, summary.version_arn, summary.alias_arn)
        _redrives(item, summary.redrive_count, summary.redrive_ms)
        if summary.stop_ms is not None:
            item["stopDate"] = seconds(summary.stop_ms)
        items.append(item)
    return paging.listing("executions", items, page.next_cursor)


def _qualifiers(described: dict[str, Any], version_arn: str | None, alias_arn: str | None) -> None:
    """What an execution was started through, when it was a version or an alias."""
    if version_arn is not None:
        described["stateMachineVersionArn"] = version_arn
    if alias_arn is not None:
        described["stateMachineAliasArn"] = alias_arn


def _redrives(described: dict[str, Any], redrive_count: int, redrive_ms: int | None) -> None:
    described["redriveCount"] = redrive_count
    if redrive_ms is not None:
        described["redriveDate"] = seconds(redrive_ms)


_REDRIVEN = {"REDRIVEN": True, "NOT_REDRIVEN": False}  # ListExecutions' redriveFilter


def _list_executions(service: Service, target: arns.MachineArn, arn: str, status: str | None, limit: int,
                     cursor: str | None, redriven: bool | None) -> Page:
    """On a store thread: the page, once the state machine (or the version or alias) is known to exist. By a
    version: the executions started on it, directly or through an alias; by an alias: those started through it."""
    machine = service.store.get_state_machine(target.machine)
    if machine is None:
        raise state_machine_does_not_exist(target.machine)
    if machine.type == EXPRESS:
        raise type_not_supported()
    if target.version is not None:
        if service.store.get_version(target.machine, target.version) is None:
            raise resource_not_found(arn)
        return service.store.list_executions(target.machine, status, limit, cursor, version_arn=arn,
                                             redriven=redriven)
    if target.alias is not None:
        if service.store.get_alias(target.machine, target.alias) is None:
            raise resource_not_found(arn)
        return service.store.list_executions(target.machine, status, limit, cursor, alias_arn=arn, redriven=redriven)
    return service.store.list_executions(target.machine, status, limit, cursor, redriven=redriven)


@handler("GetExecutionHistory")
async def get_execution_history(service: Service, params: dict, scope: Scope) -> dict:
    execution = await _load(service, params["executionArn"])
    limit = paging.page_size(params.get("maxResults"))
    reverse = params.get("reverseOrder", False)
    cursor = paging.decode(params.get("nextToken"))
    try:
        after = int(cursor) if cursor else 0
    except ValueError:
        raise AwsError("InvalidToken", f"Invalid Token: '{params['nextToken']}'") from None
    if reverse and not after:
        after = execution.next_event_id  # newest first: everything below the next id
    events = await service.store_call(service.retention.histories.read, execution.arn, after, limit + 1, reverse)
    events = [event for event in events if event["id"] < execution.next_event_id]
    more = len(events) > limit
    events = events[:limit]
    include_data = params.get("includeExecutionData", True)
    for event in events:
        event["timestamp"] = seconds(event["timestamp"])
        if not include_data:
            for key, details in event.items():
                if key.endswith("EventDetails"):
                    event[key] = without_data(details)
    result: dict[str, Any] = {"events": events}
    if more:
        result["nextToken"] = paging.encode(str(events[-1]["id"]))
    return result


@handler("DescribeStateMachineForExecution")
async def describe_state_machine_for_execution(service: Service, params: dict, scope: Scope) -> dict:
    execution = await _load(service, params["executionArn"])
    revision, machine = await service.store_call(_revision_and_machine, service, execution)
    if revision is None:
        raise execution_does_not_exist(execution.arn)
    definition, role_arn = revision
    return describe.for_execution(execution.state_machine_arn, definition, role_arn, execution.revision_id, machine,
                                  machine.updated_ms if machine else execution.start_ms)


def _revision_and_machine(service: Service, execution: ExecutionState) -> tuple[tuple[str, str] | None,
                                                                                StateMachineRecord | None]:
    """On a store thread: the revision the execution runs, and the configuration shown with it: the version's it
    started on (while the version is kept), else its state machine's as it is now (if it still is)."""
    machine = None
    if execution.version_arn is not None:
        version = service.store.get_version(*arns.version(execution.version_arn))
        machine = None if version is None else version.machine
    return (service.store.get_revision(execution.state_machine_arn, execution.revision_id),
            machine or service.store.get_state_machine(execution.state_machine_arn))


def _test_mock(mock: Any) -> AttemptSucceeded | AttemptFailed | None:
    """TestState's ``mock``: the Task's result (``result``, JSON text) or its error (``errorOutput``) instead of
    calling its resource (its ``fieldValidationMode`` is applied once the Task's resource is known)."""
    if mock is None:
        return None
    if "result" in mock and "errorOutput" in mock:  # AWS's words (see _NEEDS_MOCK); for neither, ours
        raise AwsError("ValidationException", "A test mock should have only one of the following fields: [result, "
                       "errorOutput].")
    if "result" not in mock and "errorOutput" not in mock:
        raise AwsError("ValidationException", "A test mock should have one of the following fields: [result, "
                       "errorOutput].")
    if "result" in mock:
        parse_json(mock["result"], "ValidationException", "Invalid mock result")
        return AttemptSucceeded(mock["result"])
    error = mock["errorOutput"]
    return AttemptFailed(error.get("error"), error.get("cause"))


def _test_context(text: str | None, mocked: AttemptSucceeded | AttemptFailed | None) -> dict[str, Any] | None:
    """TestState's ``context``: fields of the context object ($$) the state sees (AWS takes it with a mock only)."""
    if text is None:
        return None
    if mocked is None:
        raise AwsError("ValidationException", "The context may only be specified together with a mock")
    context = parse_json(text, "ValidationException", "Invalid context")
    if not isinstance(context, dict):
        raise AwsError("ValidationException", "Invalid context: 'the context must be a JSON object'")
    return context


# TestState's refusals in AWS's words where AWS's are known: the answers AWS gave TestState as LocalStack recorded
# them (tests/aws/services/stepfunctions/v2/test_state/*.snapshot.json in localstack/localstack, AWS-validated).
_NEEDS_MOCK = ("TestState API does not support Map or Parallel states. Supported state types include: [Task, Wait, "
               "Pass, Succeed, Fail, Choice]")


def _check_mocked_state(state: State, mocked: AttemptSucceeded | AttemptFailed | None, result: Any) -> None:
    """What the state and its mock must be, each refusal in AWS's words. Without a mock statewright runs an inline
    Map's or a Parallel's children itself (AWS refuses them too, with _NEEDS_MOCK), but no distributed Map's. A
    mock only stands for a Task's call or a Parallel's or Map's children; a Map's mocked result is its result
    array, or with a ResultWriter the writer's summary object. ``result``: a mocked result's value."""
    if mocked is None:
        if holds_distributed_map(state):
            raise AwsError("InvalidDefinition", _NEEDS_MOCK)
        return
    if not isinstance(state, TaskState | ParallelState | MapState):
        raise AwsError("ValidationException", f"State type '{state.type}' is not supported when a mock is specified")
    if isinstance(state, MapState) and isinstance(mocked, AttemptSucceeded):
        if state.distributed is not None and state.distributed.writes_results:
            if not isinstance(result, dict):
                raise AwsError("ValidationException", "Mocked result must be a JSON object.")
        elif not isinstance(result, list):
            raise AwsError("ValidationException", "Mocked result must be an array.")


def _check_state_configuration(configuration: dict[str, Any], state: State,
                               mocked: AttemptSucceeded | AttemptFailed | None, result: Any) -> None:
    """stateConfiguration's members that describe a Parallel's or Map's children: errorCausedByState names the
    state inside it a mocked error came from; mapIterationFailureCount counts the Map's failed iterations, which
    only a distributed Map's tolerated failures weigh (at most as many as the mocked result has items: AWS refuses
    more, as LocalStack's AWS-validated test test_map_iteration_failure_count_exceeds_mock_result_items records);
    mapItemReaderData is what its ItemReader read, which a Map with an ItemReader needs (statewright reads no S3
    object for it). AWS's words for these refusals are not known: these are ours."""
    caused_by = configuration.get("errorCausedByState")
    if caused_by is not None:
        if not isinstance(mocked, AttemptFailed) or not isinstance(state, ParallelState | MapState):
            raise AwsError("ValidationException", "errorCausedByState takes a mocked errorOutput of a Parallel or "
                           "Map state")
        machines = state.branches if isinstance(state, ParallelState) else [state.processor]
        if not any(caused_by in _state_names(machine) for machine in machines):
            raise AwsError("ValidationException", f"errorCausedByState names '{caused_by}', which is not a state "
                           f"inside '{state.name}'")
    failures, read = configuration.get("mapIterationFailureCount"), configuration.get("mapItemReaderData")
    for member, value in (("mapIterationFailureCount", failures), ("mapItemReaderData", read)):
        if value is not None and not isinstance(state, MapState):
            raise AwsError("ValidationException", f"{member} applies to a Map state; '{state.name}' is a "
                           f"{state.type} state")
    if failures is not None and mocked is None:
        raise AwsError("ValidationException", "mapIterationFailureCount takes a mock of the Map state's result or "
                       "error")
    if failures is not None and isinstance(result, list) and failures > len(result):
        raise AwsError("ValidationException", f"mapIterationFailureCount is {failures}, more than the {len(result)} "
                       "items of the mocked result")
    reader = state.distributed.reader if isinstance(state, MapState) and state.distributed is not None else None
    if read is not None and reader is None:
        raise AwsError("ValidationException", f"mapItemReaderData is the data a Distributed Map's ItemReader read; "
                       f"the Map state '{state.name}' has no ItemReader")
    if read is None and reader is not None:
        raise AwsError("ValidationException", f"The Map state '{state.name}' reads its items with an ItemReader: "
                       "give the data it reads as stateConfiguration.mapItemReaderData")


def _state_names(machine: Any) -> set[str]:
    """Every state name in a States collection, nested ones included."""
    names = set(machine.states)
    for inner in machine.states.values():
        for nested in (getattr(inner, "branches", None) or []) + [getattr(inner, "processor", None)]:
            if nested is not None:
                names |= _state_names(nested)
    return names


def _check_mock_fields(task: dict[str, Any], mocked: AttemptSucceeded | AttemptFailed, mode: str) -> None:
    """fieldValidationMode: STRICT (every required field present, every present one of the API's output) or
    PRESENT (every present one) against the output the Task's API returns; NONE checks nothing."""
    if mode == "NONE" or not isinstance(mocked, AttemptSucceeded):
        return
    problems = calls.mock_problems(task, orjson.loads(mocked.output), strict=mode == "STRICT")
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise AwsError("ValidationException", f"The mock result does not match the output of "
                       f"{task['resource']} (fieldValidationMode {mode}): {shown}")


def _start_test(service: Service, params: dict, text: str, variables: dict[str, Any],
                mocked: AttemptSucceeded | AttemptFailed | None, context: dict[str, Any] | None, execution_arn: str,
                machine_arn: str, now_ms: int) -> OneStateRun:
    """On an evaluation thread: the definition parsed, the request checked against the state it tests (before
    anything of it runs), and the state run."""
    services = service.engine.services
    definition, name = definition_under_test(params["definition"], params.get("stateName"), mocked is not None,
                                             services)
    state = definition.states[name]
    configuration = params.get("stateConfiguration") or {}
    result = orjson.loads(mocked.output) if isinstance(mocked, AttemptSucceeded) else None
    _check_mocked_state(state, mocked, result)
    _check_state_configuration(configuration, state, mocked, result)
    return start_test(definition, name, text, variables, execution_arn, machine_arn, params.get("roleArn", ""),
                      now_ms, services, mocked, configuration.get("retrierRetryCount", 0), context,
                      configuration.get("mapIterationFailureCount", 0), configuration.get("mapItemReaderData"))


@handler("TestState")
async def test_state(service: Service, params: dict, scope: Scope) -> dict:
    text = params.get("input", "{}")
    _check_input(text)
    variables = parse_json(params["variables"], "InvalidExecutionInput", "Invalid variables") if params.get(
        "variables") else {}
    if not isinstance(variables, dict):
        raise AwsError("InvalidExecutionInput", "Invalid variables: 'variables must be a JSON object'")
    mocked = _test_mock(params.get("mock"))
    context = _test_context(params.get("context"), mocked)
    if mocked is not None and params.get("revealSecrets"):
        raise AwsError("ValidationException", "TestState does not support RevealSecrets when a mock is specified.")
    machine_arn = scope.state_machine_arn("TestStateMachine")
    execution_arn = machine_arn.replace(":stateMachine:", ":execution:") + ":" + str(uuid.uuid4())
    # Every evaluation off the event loop (evaluating a state can take up to its budget, and every other request
    # waits on the loop) and off the store's threads, on the engine's evaluation budget.
    try:
        run = await service.evaluation_call(_start_test, service, params, text, variables, mocked, context,
                                            execution_arn, machine_arn, service.clock())
    except InvalidDefinition as exc:
        raise AwsError("InvalidDefinition", str(exc)) from None
    task = run.pending_task
    if mocked is not None and task is not None:  # a Parallel's or Map's mock stood for its children already
        _check_mock_fields(task, mocked, params["mock"].get("fieldValidationMode", "STRICT"))
        await service.evaluation_call(run.complete, mocked)
    elif task is not None:
        if task["kind"] in ("activity", "states") or task["pattern"] != "":
            raise AwsError("ValidationException", "TestState calls a Task's resource only with the request-response "
                           "pattern; activities, nested executions, .sync and .waitForTaskToken need a mock or a "
                           "real execution")
        if task["kind"] == "http":  # at TRACE, with the HTTP request and response it made
            trace = run.trace if params.get("inspectionLevel") == "TRACE" else None
            outcome = await invoke(task["input"], service.connections, timeout_s=task["call_s"], trace=trace,
                                   reveal_secrets=bool(params.get("revealSecrets")))
        else:
            outcome = await service.aws.perform(task)
        await service.evaluation_call(run.complete, outcome)
    outcome = await service.evaluation_call(outcome_of, run, text)
    result: dict[str, Any] = {"status": outcome.status}
    for key, value in (("output", outcome.output), ("error", outcome.error), ("cause", outcome.cause),
                       ("nextState", outcome.next_state)):
        if value is not None:
            result[key] = value
    if params.get("inspectionLevel", "INFO") != "INFO":
        result["inspectionData"] = outcome.inspection
    return result
