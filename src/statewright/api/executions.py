"""Execution operations: start, stop, redrive, describe, list, history, and the definition an execution runs
(TestState, which runs one state outside any execution, is test_state.py)."""

from __future__ import annotations

import functools
import random
import secrets
from typing import Any

from ..asl.definition import parse_definition
from ..asl.states import TaskState
from ..decider import map_runs as decider_map_runs
from ..decider import trace_context
from ..decider.execution import ExecutionState, redrive_status
from ..decider.step import FLOW_KEY, without_data
from ..engine import commands
from ..engine.express import ASYNC, SYNC
from ..engine.routing import route
from ..engine.shards import shard_for
from ..store.base import AliasRecord, Page, StateMachineRecord, VersionRecord
from . import arns, describe, map_runs, paging
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
# Where the API hands a start the X-Amzn-Trace-Id HTTP header (app.py): a key no request member can have
TRACE_HTTP_HEADER = ":x-amzn-trace-id"


async def _load(service: Service, arn: str) -> ExecutionState:
    arns.execution(arn)  # an express ARN is refused here, as AWS does (its executions keep no state)
    blob = await service.store_call(service.store.load_execution, arn)
    execution = None if blob is None else ExecutionState.from_blob(blob)
    if execution is None or service.retention.expired(execution, service.clock()):  # expired: gone, deleted or not
        raise execution_does_not_exist(arn)
    return execution


def check_input(text: str) -> None:
    """An execution input (StartExecution's, TestState's) AWS reads: JSON text."""
    if not text.strip():
        raise AwsError("InvalidExecutionInput", "Invalid State Machine Execution Input: 'Invalid execution input.'")
    parse_json(text, "InvalidExecutionInput", "Invalid State Machine Execution Input")


@handler("StartExecution")
async def start_execution(service: Service, params: dict, scope: Scope) -> dict:
    command = await _start_command(service, params, None)
    # Express and Standard starts draw from buckets of their own; nothing is written yet
    service.rates.admit(scope.account, scope.region, "StartExecution.Express" if command.express else "StartExecution")
    if not command.express:
        _check_open_room(service, scope)
    try:
        start_ms = await service.run(command)
    except commands.ExecutionAlreadyExists:
        raise AwsError("ExecutionAlreadyExists", f"Execution Already Exists: '{command.arn}'") from None
    return {"executionArn": command.arn, "startDate": seconds(start_ms)}


def _check_open_room(service: Service, scope: Scope) -> None:
    """ExecutionLimitExceeded when the account holds its quota of open Standard executions in this region, as this
    node counts them (its own commits at once; on a cluster the others' at the next recount)."""
    limit = service.quotas.of(scope.account).open_executions
    running = None if limit is None else service.engine.metrics.open_executions.of(scope.region, scope.account)
    if running is not None and running >= limit:
        raise AwsError("ExecutionLimitExceeded", f"The account already has {limit} open executions in this region, "
                       "the most it may have (open-executions): wait for some to close, or stop some")


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
    if "traceHeader" in params:  # the X-Ray header the caller passed, handed back as AWS does
        answer["traceHeader"] = params["traceHeader"]
    elif command.trace is not None:  # a traced execution's own
        answer["traceHeader"] = trace_context.xray_header(command.trace)
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
        drawn = _uuid4()
        if service.engine.owns(shard_for(prefix + drawn, service.engine.shard_count)):
            return drawn
    return drawn


_draws = random.Random(secrets.randbits(128))  # uuid.uuid4 reads os.urandom: a system call per start


def _uuid4() -> str:
    """A random (version 4) UUID as text. Execution names need to be unique, not unguessable."""
    bits = _draws.getrandbits(128) & ~(0xF000 << 64) & ~(0xC000 << 48) | 0x4000 << 64 | 0x8000 << 48
    text = f"{bits:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


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
    named = params.get("name")
    if named:
        arns.check_name(named)
    text = params.get("input", "{}")
    check_input(text)
    if await _type_of(service, target) == EXPRESS:  # every start is its own execution, whatever its name: AWS
        # adds an id
        name = named or _uuid4()
        arn = _express_arn(service, machine_arn, name)
    else:
        prefix = machine_arn.replace(":stateMachine:", ":execution:", 1) + ":"
        name = named or _local_id(service, prefix)  # unnamed: started here, not forwarded
        arn = prefix + name
    alias_arn = None
    if isinstance(target, AliasRecord):  # the version by the alias's weights, drawn from the execution's ARN
        alias_arn = target.arn
        version_arn = f"{machine_arn}:{route(target.routing, arn)}"
        target = await service.state_machine(version_arn)
        if target is None:  # deleted since: the alias no longer routes to it, and the cached alias is stale
            raise state_machine_does_not_exist(version_arn)
    version_arn = target.arn if isinstance(target, VersionRecord) else None
    machine = target.machine if isinstance(target, VersionRecord) else target
    if test_case is not None:
        _check_case_states(machine, test_case, service.mocks.cases[machine.name][test_case])
    express = None
    if machine.type == EXPRESS:
        express = sync or ASYNC
    elif sync is not None:
        raise type_not_supported()
    return commands.StartExecution(arn, machine_arn, name, machine.revision_id, machine.role_arn, text,
                                   version_arn=version_arn, alias_arn=alias_arn, test_case=test_case,
                                   express=express, token=None if express else f"{_draws.getrandbits(64):016x}",
                                   trace=_trace(service, machine, params))


def _trace(service: Service, machine: StateMachineRecord, params: dict) -> str | None:
    """The trace context of a new execution (None: untraced): its state machine's tracing is enabled, and the
    caller's X-Amzn-Trace-Id HTTP header (or else, when it names no trace, its ``traceHeader``: AWS prefers the
    header) names the trace it joins, or a new one is made; a header that says not to sample leaves it untraced."""
    if not machine.tracing_configuration.get("enabled"):
        return None
    for header in (params.get(TRACE_HTTP_HEADER), params.get("traceHeader")):
        given = trace_context.joined(header) if header else None
        if given is False:
            return None
        if given is not None:
            return given
    return trace_context.new_trace(service.clock() // 1000, _draws.getrandbits(96))


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


def _check_case_states(machine: StateMachineRecord, case: str, named: dict[str, str]) -> None:
    """Every state a test case names is a Task state of the machine (at any depth): a name that is not one would
    leave the state it meant calling its real resource, unseen. Step Functions Local's documentation has a test
    case map Task states to responses and says nothing of other names; this refusal, and its words, are ours."""
    definition = parse_definition(machine.definition)
    tasks = sorted(name for found in definition.machines for name, state in found.states.items()
                   if isinstance(state, TaskState))
    strays = [name for name in named if name not in tasks]
    if strays:
        raise AwsError("ValidationException", f"The test case '{case}' of the mock configuration names "
                       f"{', '.join(repr(name) for name in strays)}, not a Task state of the state machine "
                       f"'{machine.name}'; its Task states: {', '.join(tasks) or 'none'}")


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
    if not execution.is_open and await service.state_machine(execution.root_machine_arn) is None:
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
    if execution.map_run is not None:
        described["mapRunArn"] = execution.map_run
    _redrives(described, execution.redrive_count, execution.redrive_ms)
    if execution.stop_ms is not None:
        described["stopDate"] = seconds(execution.stop_ms)
    if execution.output is not None:
        described["output"] = execution.output
        described["outputDetails"] = {"included": True}
    for key in ("error", "cause"):
        if getattr(execution, key) is not None:
            described[key] = getattr(execution, key)
    if execution.trace is not None:
        described["traceHeader"] = trace_context.xray_header(execution.trace)
    described["redriveStatus"], reason = redrive_status(execution, service.clock(), service.engine.redrivable_ms)
    reason = await _machine_gone(service, execution) or reason
    if reason is not None:
        described["redriveStatus"], described["redriveStatusReason"] = "NOT_REDRIVABLE", reason
    return described


@handler("ListExecutions")
async def list_executions(service: Service, params: dict, scope: Scope) -> dict:
    if "stateMachineArn" not in params and "mapRunArn" not in params:
        raise AwsError("ValidationException", "Must provide a StateMachine ARN or MapRun ARN")
    if "stateMachineArn" in params and "mapRunArn" in params:
        raise AwsError("ValidationException", "Must provide either a StateMachine ARN or a MapRun ARN, not both")
    map_run_arn = params.get("mapRunArn")
    status, limit = params.get("statusFilter"), paging.page_size(params.get("maxResults"))
    cursor, redriven = paging.decode(params.get("nextToken")), _REDRIVEN.get(params.get("redriveFilter"))
    try:
        if map_run_arn is not None:  # its children, listed under it (map_runs.py)
            run = (await map_runs.load(service, map_run_arn)).run
            page = await service.store_call(functools.partial(service.store.list_executions, map_run_arn, status,
                                                              limit, cursor, redriven=redriven))
        else:
            page = await service.store_call(_list_executions, service, arns.qualified(params["stateMachineArn"]),
                                            params["stateMachineArn"], status, limit, cursor, redriven)
    except ValueError:  # a token that decodes but is no cursor of ours
        raise AwsError("InvalidToken", f"Invalid Token: '{params['nextToken']}'") from None
    items = []
    for summary in page.items:
        item = {"executionArn": summary.arn, "stateMachineArn": summary.state_machine_arn, "name": summary.name,
                "status": summary.status, "startDate": seconds(summary.start_ms)}
        if map_run_arn is not None:
            item["stateMachineArn"], item["mapRunArn"] = decider_map_runs.machine_of(map_run_arn), map_run_arn
            item["itemCount"] = decider_map_runs.item_count(map_run_arn, run, summary.name)
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
        event.pop(FLOW_KEY, None)  # a traced execution's own bookkeeping (decider/step.py)
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
    if execution.processor is not None:  # a map run's child runs its distributed Map's ItemProcessor
        definition = describe.processor_text(definition, execution.processor)
    described = describe.for_execution(execution.state_machine_arn, definition, role_arn, execution.revision_id,
                                       machine, machine.updated_ms if machine else execution.start_ms)
    if execution.processor is not None:
        described["label"] = execution.state_machine_arn.rsplit("/", 1)[1]
        described["mapRunArn"] = execution.parent["map_run"]
    return described


def _revision_and_machine(service: Service, execution: ExecutionState) -> tuple[tuple[str, str] | None,
                                                                                StateMachineRecord | None]:
    """On a store thread: the revision the execution runs, and the configuration shown with it: the version's it
    started on (while the version is kept), else its state machine's as it is now (if it still is)."""
    machine = None
    if execution.version_arn is not None:
        version = service.store.get_version(*arns.version(execution.version_arn))
        machine = None if version is None else version.machine
    return (service.store.get_revision(execution.root_machine_arn, execution.revision_id),
            machine or service.store.get_state_machine(execution.root_machine_arn))
