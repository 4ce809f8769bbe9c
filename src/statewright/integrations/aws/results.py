"""What an AWS Task returns, as botocore models it, and whether a mocked result fits it (TestState's mock with
fieldValidationMode STRICT or PRESENT; shapes.result_problem says how a value is checked).

A Task's result is modelled by its pattern: a request-response call returns the API's output; a ``.sync`` call
the description of what it waited for (a job's, from the describe call ``jobs`` polls; a nested execution's
DescribeExecution output, whose Input and Output are JSON with ``.sync:2``); a ``.waitForTaskToken`` call what the
callback sent (SendTaskSuccess's output), which no model describes, and neither does an activity's, an HTTP Task's
or a Lambda function ARN's result. Source: AWS's TestState reference ("validating mocked results against their
respective API models") and the pages on each pattern (what each returns). Inferred: that a callback's result is
not checked (AWS answers SUCCEEDED for a .waitForTaskToken mock that is no SendMessage output, LocalStack's
AWS-validated test_state_wait_task_context_object, though that result would fit SendMessage's output as AWS checks
it too), and that a .sync result is checked against what the pattern returns rather than the start call's output.
"""

from __future__ import annotations

from typing import Any

from botocore.model import OperationModel, Shape

from . import catalogue, shapes
from .calls import OPTIMIZED, payload_member
from .jobs import JOBS

_NESTED = ("stepfunctions", "StartExecution", "DescribeExecution")  # states:startExecution and its .sync forms


def mock_problem(payload: dict[str, Any], result: Any, strict: bool) -> str | None:
    """The first place a mocked result does not fit what the Task's dispatch ``payload`` returns, in AWS's words;
    None when it fits or nothing models it."""
    modelled = _returned(payload["kind"], payload["action"], payload["pattern"])
    if modelled is None:
        return None
    shape, any_json = modelled
    return shapes.result_problem(shape, result, strict=strict, any_json=any_json)


def _returned(kind: str, action: str, pattern: str) -> tuple[Shape, frozenset[str]] | None:
    """The shape of a Task's result and its members that hold any JSON, or None."""
    if pattern == "waitForTaskToken":
        return None
    if kind == "states" and action == "startExecution":
        service, start, describe = _NESTED
        model = catalogue.by_botocore_name(service).model
        if pattern == "":
            return model.operation_model(start).output_shape, frozenset()
        return model.operation_model(describe).output_shape, frozenset(
            {"Input", "Output"} if pattern == "sync:2" else ())
    if pattern.startswith("sync"):
        job = JOBS.get((kind, action))
        if job is None:
            return None
        operation, path = job.result_of
        return _within(catalogue.by_botocore_name(job.service).model.operation_model(operation), path), frozenset()
    if kind.startswith("aws-sdk:"):
        service = catalogue.service(kind[len("aws-sdk:"):])
        operation = service.operation(action) if service else None
    elif (kind, action) in OPTIMIZED:
        spec = OPTIMIZED[(kind, action)]
        operation = catalogue.by_botocore_name(spec.service).model.operation_model(spec.operation)
    else:
        return None
    if operation is None or operation.output_shape is None:
        return None
    member = payload_member(operation.output_shape)
    return operation.output_shape, frozenset() if member is None else frozenset({member})


def _within(operation: OperationModel, path: tuple[str | int, ...]) -> Shape:
    shape = operation.output_shape
    for step in path:
        shape = shape.member if step == 0 else shape.members[step]
    return shape
