"""TestState: the request checked against the state it tests, the state run once through the decider
(``decider/test_state.py``), and the answer as AWS shapes it.

Every refusal comes before anything of the state runs. Their words are AWS's where AWS's are known: the answers
AWS gave TestState as LocalStack recorded them (tests/aws/services/stepfunctions/v2/test_state/*.snapshot.json in
localstack/localstack, AWS-validated), each named where it is used; the others are ours, in the same form.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from ..asl.definition import InvalidDefinition
from ..asl.distributed import TEXT_INPUT_TYPES
from ..asl.states import MapState, ParallelState, State, TaskState
from ..asl.timestamps import is_iso8601
from ..decider import OneStateRun
from ..decider.outcomes import AttemptFailed, AttemptSucceeded
from ..decider.test_state import definition_under_test, outcome_of, start_test, state_named
from ..integrations.aws import results
from ..integrations.http import invoke
from . import arns
from .arns import Scope
from .errors import AwsError
from .executions import check_input
from .payloads import parse_json
from .service import Service, handler

Mock = AttemptSucceeded | AttemptFailed

# AWS's answer for a Map or Parallel without a mock, whatever it holds (test_state_type_requires_mock: an inline
# and a distributed Map, a Parallel): only a mock can stand for their children.
NEEDS_MOCK = ("TestState API does not support Map or Parallel states. Supported state types include: [Task, Wait, "
              "Pass, Succeed, Fail, Choice]")


@handler("TestState")
async def test_state(service: Service, params: dict, scope: Scope) -> dict:
    text = params.get("input", "{}")
    check_input(text)
    variables = parse_json(params["variables"], "InvalidExecutionInput", "Invalid variables") if params.get(
        "variables") else {}
    if not isinstance(variables, dict):
        raise AwsError("InvalidExecutionInput", "Invalid variables: 'variables must be a JSON object'")
    mocked = _mock(params.get("mock"))
    context = _context(params.get("context"), mocked)
    if mocked is not None and params.get("revealSecrets"):  # test_reveal_secrets_is_true_and_mock_result_is_set
        raise AwsError("ValidationException", "TestState does not support RevealSecrets when a mock is specified.")
    if "roleArn" in params:  # optional with a mock (AWS's "Using TestState API"), an IAM role ARN when given
        arns.check_role(params["roleArn"])
    machine_arn = scope.state_machine_arn("TestStateMachine")
    # AWS's $$.Execution.Id in TestState is an Express execution's (LocalStack's AWS-validated recordings, 2025)
    execution_arn = machine_arn.replace(":stateMachine:", ":express:") + ":" + str(uuid.uuid4())
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


def _start_test(service: Service, params: dict, text: str, variables: dict[str, Any], mocked: Mock | None,
                context: dict[str, Any] | None, execution_arn: str, machine_arn: str, now_ms: int) -> OneStateRun:
    """On an evaluation thread: the definition parsed, the request checked against the state it tests (before
    anything of it runs), and the state run."""
    services = service.engine.services
    definition, name = definition_under_test(params["definition"], params.get("stateName"), services)
    state = state_named(definition, name)
    if state is None:  # test_base_state_name_validation_failures
        raise AwsError("ValidationException", "State not found in definition")
    configuration = params.get("stateConfiguration") or {}
    result = orjson.loads(mocked.output) if isinstance(mocked, AttemptSucceeded) else None
    _check_mocked_state(state, mocked, result)
    _check_state_configuration(configuration, state, mocked)
    if context is not None:
        _check_context_task(context, state)
    if isinstance(state, TaskState) and mocked is None and "roleArn" not in params:
        # AWS's words (LocalStack's AWS-validated test_base_lambda_service_task_state_no_role_arn_validation)
        raise AwsError("ValidationException", "RoleArn must be specified when testing a Task state")
    failures = configuration.get("mapIterationFailureCount", 0)
    run = start_test(definition, name, text, variables, execution_arn, machine_arn, params.get("roleArn", ""),
                     now_ms, services, mocked, configuration.get("retrierRetryCount", 0), context, failures,
                     configuration.get("mapItemReaderData"))
    if run.iterations is not None and failures > run.iterations:  # known once the Map's input processing ran
        raise AwsError("ValidationException", f"mapIterationFailureCount is {failures}, more than the "
                       f"{run.iterations} iterations the Map state '{name}' runs")
    return run


# -- the mock and the state it stands in


def _mock(mock: Any) -> Mock | None:
    """TestState's ``mock``: the Task's result (``result``, JSON text) or its error (``errorOutput``) instead of
    calling its resource (its ``fieldValidationMode`` is applied once the Task's resource is known)."""
    if mock is None:
        return None
    if "result" in mock and "errorOutput" in mock:  # test_both_mock_result_and_mock_error_output_are_set
        raise AwsError("ValidationException", "A test mock should have only one of the following fields: [result, "
                       "errorOutput].")
    if "result" not in mock and "errorOutput" not in mock:
        raise AwsError("ValidationException", "A test mock should have one of the following fields: [result, "
                       "errorOutput].")
    if "result" in mock:
        try:  # AWS's words (LocalStack's AWS-validated test_base_lambda_service_task_mock_is_not_json_string)
            parse_json(mock["result"], "ValidationException", "Invalid mock result")
        except AwsError:
            raise AwsError("ValidationException", "Mocked result must be valid JSON") from None
        return AttemptSucceeded(mock["result"])
    error = mock["errorOutput"]
    if "error" not in error:  # MockErrorOutput.error: "required if mock.errorOutput is specified" (AWS's model)
        raise AwsError("ValidationException", "A mocked errorOutput must have an error.")
    return AttemptFailed(error["error"], error.get("cause"))


def _check_mocked_state(state: State, mocked: Mock | None, result: Any) -> None:
    """What the state and its mock must be. A Parallel or Map needs one (its children never run here); only a
    Task, Parallel or Map takes one (test_state_type_does_not_accept_mock); a Parallel's mocked result is its
    branches' results (test_mock_result_is_not_array_on_parallel_state,
    test_mock_result_array_size_mismatch_on_parallel_state), a Map's its result array, or with a ResultWriter the
    writer's summary object (test_mock_result_is_not_array_on_map_state_without_result_writer,
    test_mock_result_is_not_object_on_map_state_with_result_writer). ``result``: a mocked result's value."""
    if mocked is None:
        if isinstance(state, ParallelState | MapState):
            raise AwsError("InvalidDefinition", NEEDS_MOCK)
        return
    if not isinstance(state, TaskState | ParallelState | MapState):
        raise AwsError("ValidationException", f"State type '{state.type}' is not supported when a mock is specified")
    if not isinstance(mocked, AttemptSucceeded) or isinstance(state, TaskState):
        return
    if isinstance(state, MapState) and state.distributed is not None and state.distributed.exports:
        if not isinstance(result, dict):
            raise AwsError("ValidationException", "Mocked result must be a JSON object.")
    elif not isinstance(result, list):
        raise AwsError("ValidationException", "Mocked result must be an array.")
    elif isinstance(state, ParallelState) and len(result) != len(state.branches):
        raise AwsError("ValidationException", "Mocked result must contain the same number of items as number of "
                       "Parallel branches.")


def _check_state_configuration(configuration: dict[str, Any], state: State, mocked: Mock | None) -> None:
    """stateConfiguration's members that describe a Parallel's or Map's children: errorCausedByState names the
    state inside it a mocked error came from; mapIterationFailureCount counts the Map's failed iterations (at most
    as many as it runs: checked once its input processing ran, _start_test), which only a distributed Map's
    tolerated failures weigh; mapItemReaderData is what its ItemReader read, which a Map with an ItemReader needs
    (statewright reads no S3 object for it). AWS's words for these refusals are not known: these are ours."""
    caused_by = configuration.get("errorCausedByState")
    if caused_by is not None:
        if not isinstance(mocked, AttemptFailed) or not isinstance(state, ParallelState | MapState):
            raise AwsError("ValidationException", "errorCausedByState takes a mocked errorOutput of a Parallel or "
                           "Map state")
        machines = state.branches if isinstance(state, ParallelState) else [state.processor]
        if not any(caused_by in _state_names(machine) for machine in machines):
            raise AwsError("ValidationException", f"errorCausedByState names '{caused_by}', which is not a state "
                           f"inside '{state.name}'")
    for member in ("mapIterationFailureCount", "mapItemReaderData"):
        if member in configuration and not isinstance(state, MapState):
            raise AwsError("ValidationException", f"{member} applies to a Map state; '{state.name}' is a "
                           f"{state.type} state")
    reader = state.distributed.reader if isinstance(state, MapState) and state.distributed is not None else None
    read = configuration.get("mapItemReaderData")
    if read is not None and reader is None:
        raise AwsError("ValidationException", f"mapItemReaderData is the data a Distributed Map's ItemReader read; "
                       f"the Map state '{state.name}' has no ItemReader")
    if read is None and reader is not None:
        raise AwsError("ValidationException", f"The Map state '{state.name}' reads its items with an ItemReader: "
                       "give the data it reads as stateConfiguration.mapItemReaderData")
    if reader is not None and reader.input_type and reader.input_type not in TEXT_INPUT_TYPES:
        raise AwsError("ValidationException", f"mapItemReaderData is text: statewright tests an ItemReader of "
                       f"InputType CSV, JSON or JSONL, or an S3 listing, here; '{reader.input_type}' is read from S3 "
                       "by an execution")


def _state_names(machine: Any) -> set[str]:
    """Every state name in a States collection, nested ones included."""
    names = set(machine.states)
    for inner in machine.states.values():
        for nested in (getattr(inner, "branches", None) or []) + [getattr(inner, "processor", None)]:
            if nested is not None:
                names |= _state_names(nested)
    return names


def _check_mock_fields(task: dict[str, Any], mocked: Mock, mode: str) -> None:
    """fieldValidationMode: STRICT (every required field present, every present one fitting) or PRESENT (every
    present one fitting) against what the Task returns (integrations/aws/results.py); NONE checks nothing."""
    if mode == "NONE" or not isinstance(mocked, AttemptSucceeded):
        return
    problem = results.mock_problem(task, orjson.loads(mocked.output), strict=mode == "STRICT")
    if problem is not None:
        raise AwsError("ValidationException", problem)


# -- the context object


# The fields of the context object AWS documents ("Accessing execution data from the Context object"), with the
# JSON each must hold in a given context: a string, an integer, an ISO 8601 timestamp, or any JSON. AWS refuses a
# field outside them, a given Map, and a field of the wrong type (test_state_context_object_validation_failures:
# "Field 'pokemon' is not allowed", "Execution.Id must be a string"); the words for the other types are ours, and
# that AWS checks a timestamp's text is inferred.
_CONTEXT_FIELDS: dict[str, dict[str, str]] = {
    "Execution": {"Id": "string", "Input": "any", "Name": "string", "RoleArn": "string", "StartTime": "timestamp",
                  "RedriveCount": "integer", "RedriveTime": "timestamp"},
    "State": {"EnteredTime": "timestamp", "Name": "string", "RetryCount": "integer"},
    "StateMachine": {"Id": "string", "Name": "string"},
    "Task": {"Token": "string"},
}
_CONTEXT_TYPES = {"string": "a string", "integer": "an integer", "timestamp": "an ISO 8601 timestamp string"}


def _context(text: str | None, mocked: Mock | None) -> dict[str, Any] | None:
    """TestState's ``context``: the context object ($$) the state sees, whole (AWS takes it with a mock only),
    checked field by field as AWS checks it."""
    if text is None:
        return None
    if mocked is None:
        raise AwsError("ValidationException", "The context may only be specified together with a mock")
    context = parse_json(text, "ValidationException", "Invalid Context object provided")
    if not isinstance(context, dict):
        raise _invalid_context("the context object must be a JSON object")
    for section, fields in context.items():
        if section == "Map":
            raise _invalid_context("'Map' field is not supported when mocking a Context object")
        known = _CONTEXT_FIELDS.get(section)
        if known is None:
            raise _invalid_context(f"Field '{section}' is not allowed")
        if not isinstance(fields, dict):
            raise _invalid_context(f"{section} must be an object")
        for name, value in fields.items():
            kind = known.get(name)
            if kind is None:
                raise _invalid_context(f"Field '{name}' is not allowed")
            if kind != "any" and not _holds(kind, value):
                raise _invalid_context(f"{section}.{name} must be {_CONTEXT_TYPES[kind]}")
    return context


def _holds(kind: str, value: Any) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, str) and (kind == "string" or is_iso8601(value))


def _check_context_task(context: dict[str, Any], state: State) -> None:
    """A given Task section (its task token) belongs to a Task that hands one out
    (test_state_context_object_invalid_states)."""
    if "Task" in context and not (isinstance(state, TaskState) and state.pattern != ""):
        raise _invalid_context("Context object contains 'Task' when state is not a Task state with a '.sync' or "
                               "'.waitForTaskToken' service integration pattern")


def _invalid_context(reason: str) -> AwsError:
    return AwsError("ValidationException", f"Invalid Context object provided: {reason}")
