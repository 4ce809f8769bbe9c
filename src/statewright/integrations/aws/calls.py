"""How each AWS Task resource becomes one botocore call, and how its answer becomes the Task's outcome.

Three families, as Step Functions has them:

- ``arn:aws:states:::aws-sdk:<service>:<action>``: any operation botocore models, parameters and result in
  PascalCase (``shapes``), errors ``<Service>.<Exception>`` named as the AWS SDK for Java 2.x names them
  (``catalogue``), with the service's answer as the cause: ``<message> (Service: <Service>, Status Code: <n>,
  Request ID: <id>)``.
- The optimized integrations (``arn:aws:states:::sqs:sendMessage``, ...): the same call, with the shapes AWS gives
  them: a JSON value for a message body, event detail or Lambda payload is sent as its JSON text; the result
  carries ``SdkHttpMetadata`` and ``SdkResponseMetadata`` (not for events:putEvents); errors are named with the
  AWS SDK for Java 1.x's classes (``SQS.QueueDoesNotExistException``, ``DynamoDB.ConditionalCheckFailedException``,
  the service's own ``SQS.AmazonSQSException`` for one its model does not list).
- Lambda (``lambda:invoke`` and a bare function ARN, the legacy form whose result is the function's payload
  itself): a function error becomes the error the function names (``errorType``) or ``Lambda.Unknown``, with the
  function's payload as the cause.

A call that got no answer is ``States.Timeout`` when the answer did not come in time (the call may have
happened), ``Lambda.SdkClientException`` for Lambda, and ``States.TaskFailed`` otherwise (no connection, no
credentials: the call did not reach the service).

Sources: AWS's pages on each optimized integration (parameters, the JSON bodies, the result fields, the
Lambda errors and the retrier AWS recommends for them: Lambda.ServiceException, Lambda.AWSLambdaException,
Lambda.SdkClientException). Inferred, not verified: the Java 1.x service names in causes (AmazonSQS, ...),
``EventBridge.FailedEntry`` when an event was not accepted, and the header casing in SdkHttpMetadata (botocore's
lower case).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from botocore import xform_name
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    NoCredentialsError,
    ParamValidationError,
    ReadTimeoutError,
)
from botocore.model import OperationModel

from ...asl import errors
from ...asl.definition import LAMBDA_FUNCTION, NOT_RECOGNIZED
from ...asl.jsonio import dumps, loads
from ...engine.outcomes import AttemptFailed, AttemptSucceeded
from . import catalogue, shapes

LAMBDA_UNKNOWN = "Lambda.Unknown"
LAMBDA_CLIENT = "Lambda.SdkClientException"
TASK_FAILED = "States.TaskFailed"
FAILED_ENTRY = "EventBridge.FailedEntry"
CALL_TIMEOUT_S = 60.0  # an AWS API call's own limit (engine/tasks.py AWS_CALL_DEADLINE_MS)
LAMBDA_TIMEOUT_S = 900.0  # a Lambda function runs for at most 15 minutes

Outcome = AttemptSucceeded | AttemptFailed


@dataclass(frozen=True)
class Optimized:
    """One optimized integration: the botocore service and operation it calls, its error names, and the fields
    that take a JSON value for text."""

    service: str  # botocore's name
    operation: str
    prefix: str  # error names: <prefix>.<Exception>
    generic: str  # the service's own exception class in the AWS SDK for Java 1.x
    sdk_name: str  # the service in Java 1.x's error texts
    json_fields: tuple[str, ...] = ()
    metadata: bool = True  # the result carries SdkHttpMetadata and SdkResponseMetadata


_SQS = ("sqs", "SendMessage", "SQS", "AmazonSQSException", "AmazonSQS")
_DYNAMODB = ("DynamoDB", "AmazonDynamoDBException", "AmazonDynamoDBv2")
OPTIMIZED: dict[tuple[str, str], Optimized] = {
    ("sqs", "sendMessage"): Optimized(*_SQS, json_fields=("MessageBody",)),
    ("sns", "publish"): Optimized("sns", "Publish", "SNS", "AmazonSNSException", "AmazonSNS", json_fields=("Message",)),
    ("events", "putEvents"): Optimized("events", "PutEvents", "EventBridge", "AmazonEventBridgeException",
                                       "AmazonEventBridge", metadata=False),
    ("lambda", "invoke"): Optimized("lambda", "Invoke", "Lambda", "AWSLambdaException", "AWSLambda",
                                    json_fields=("Payload",)),
    **{("dynamodb", action): Optimized("dynamodb", action[0].upper() + action[1:], *_DYNAMODB)
       for action in ("getItem", "putItem", "updateItem", "deleteItem")},
    ("batch", "submitJob"): Optimized("batch", "SubmitJob", "Batch", "AWSBatchException", "AWSBatch"),
    ("ecs", "runTask"): Optimized("ecs", "RunTask", "ECS", "AmazonECSException", "AmazonECS"),
    ("glue", "startJobRun"): Optimized("glue", "StartJobRun", "Glue", "AWSGlueException", "AWSGlue"),
    ("athena", "startQueryExecution"): Optimized("athena", "StartQueryExecution", "Athena", "AmazonAthenaException",
                                                 "AmazonAthena"),
    ("codebuild", "startBuild"): Optimized("codebuild", "StartBuild", "CodeBuild", "AWSCodeBuildException",
                                           "AWSCodeBuild"),
}
LAMBDA = OPTIMIZED[("lambda", "invoke")]


@dataclass(frozen=True)
class Call:
    """One botocore call a Task makes: where, what, and how its answer is read."""

    service: str  # botocore's name
    operation: OperationModel
    params: dict[str, Any]
    read_timeout_s: float
    naming: Naming
    legacy_lambda: bool = False  # a bare function ARN: the result is the payload itself


@dataclass(frozen=True)
class Naming:
    """How a service's errors are named and described."""

    java_name: str  # the service in error texts
    name: Callable[[dict], str]  # botocore's response["Error"] -> the error's name
    v1: bool = False  # AWS SDK for Java 1.x texts and result metadata (optimized integrations)
    metadata: bool = False


def plan(kind: str, action: str, parameters: Any) -> Call:
    """The call a dispatch of ``kind`` and ``action`` makes with the Task's evaluated ``parameters``; raises
    shapes.ParameterError when they do not fit the operation."""
    if kind == LAMBDA_FUNCTION:
        return _optimized_call(LAMBDA, {"FunctionName": action, "Payload": parameters}, legacy_lambda=True)
    if kind.startswith("aws-sdk:"):
        service = catalogue.service(kind[len("aws-sdk:"):])
        operation = service.operation(action) if service else None
        if operation is None:  # validated when the machine was created; a botocore without it now
            raise shapes.ParameterError(f"The resource aws-sdk:{kind[8:]}:{action} is not available")
        params = shapes.request(operation.input_shape, parameters, payload=_payload_member(operation))
        timeout_s = LAMBDA_TIMEOUT_S if service.botocore_name == "lambda" else CALL_TIMEOUT_S
        return Call(service.botocore_name, operation, params, timeout_s, Naming(service.java_name, service.error_name))
    return _optimized_call(OPTIMIZED[(kind, action)], parameters)


def resource_problems(integration: str, action: str, pattern: str,
                      names: Collection[str] | None) -> list[tuple[str, str]]:
    """What is wrong with an AWS Task resource and the names of its literal parameters, as AWS reports it when a
    state machine is created (asl/definition.py ResourceCheck)."""
    if integration == LAMBDA_FUNCTION:
        return []  # the parameters are the function's payload
    if integration.startswith("aws-sdk:"):
        service = catalogue.service(integration[len("aws-sdk:"):])
        operation = service.operation(action) if service else None
        if operation is None or pattern not in ("", "waitForTaskToken"):
            resource = f"arn:aws:states:::{integration}:{action}" + (f".{pattern}" if pattern else "")
            return [("Resource", f"The resource provided {resource} {NOT_RECOGNIZED}")]
    elif (integration, action) in OPTIMIZED:
        spec = OPTIMIZED[(integration, action)]
        operation = catalogue.by_botocore_name(spec.service).model.operation_model(spec.operation)
    else:
        return []
    members = shapes.member_names(operation.input_shape)
    return [("Parameters", f"The field '{name}' is not supported by Step Functions")
            for name in sorted(names or ()) if name not in members]


def _optimized_call(spec: Optimized, parameters: Any, legacy_lambda: bool = False) -> Call:
    if not isinstance(parameters, dict):
        raise shapes.ParameterError("The API parameters must be a JSON object")
    parameters = dict(parameters)
    for name in spec.json_fields:  # a Lambda payload is always JSON; a message may be plain text
        if name in parameters and (name == "Payload" or not isinstance(parameters[name], str)):
            parameters[name] = dumps(parameters[name])
    if spec.operation == "PutEvents" and isinstance(parameters.get("Entries"), list):
        parameters["Entries"] = [{**entry, "Detail": dumps(entry["Detail"])}
                                 if isinstance(entry, dict) and not isinstance(entry.get("Detail", ""), str)
                                 else entry for entry in parameters["Entries"]]
    service = catalogue.by_botocore_name(spec.service)
    operation = service.model.operation_model(spec.operation)
    params = shapes.request(operation.input_shape, parameters, payload=_payload_member(operation))
    errors_of = _v1_errors(service, spec)
    timeout_s = LAMBDA_TIMEOUT_S if spec is LAMBDA else CALL_TIMEOUT_S
    return Call(spec.service, operation, params, timeout_s,
                Naming(spec.sdk_name, errors_of, v1=True, metadata=spec.metadata), legacy_lambda)


def _v1_errors(service: catalogue.Service, spec: Optimized) -> Any:
    def name(error: dict) -> str:
        shape = service.error_shape(error)
        if shape is None:
            return f"{spec.prefix}.{spec.generic}"
        return f"{spec.prefix}.{shape if shape.endswith('Exception') else shape + 'Exception'}"
    return name


def _payload_member(operation: OperationModel) -> str | None:
    shape = operation.input_shape
    return shape.serialization.get("payload") if shape is not None else None


def perform(call: Call, client: Any) -> Outcome:
    """Make ``call`` with ``client`` (blocking: on a pool thread) and read its answer."""
    try:
        raw = getattr(client, xform_name(call.operation.name))(**call.params)
    except ClientError as error:
        return _service_error(call, error)
    except ReadTimeoutError as error:
        return AttemptFailed(errors.TIMEOUT, f"The call to {call.operation.name} got no answer in time: {error}")
    except ParamValidationError as error:
        return AttemptFailed(errors.RUNTIME, f"The API parameters are not valid: {error}")
    except (NoCredentialsError, ConnectTimeoutError, BotoCoreError) as error:
        return AttemptFailed(LAMBDA_CLIENT if call.service == "lambda" and call.naming.v1 else TASK_FAILED,
                             f"{type(error).__name__}: {error}")
    return _result(call, raw)


def _service_error(call: Call, error: ClientError) -> AttemptFailed:
    detail = error.response.get("Error", {})
    meta = error.response.get("ResponseMetadata", {})
    message = detail.get("Message") or detail.get("Code") or "The service refused the call"
    status, request_id = meta.get("HTTPStatusCode", 400), meta.get("RequestId", "")
    if call.naming.v1:
        cause = (f"{message} (Service: {call.naming.java_name}; Status Code: {status}; Error Code: "
                 f"{detail.get('Code', '')}; Request ID: {request_id}; Proxy: null)")
    else:
        cause = f"{message} (Service: {call.naming.java_name}, Status Code: {status}, Request ID: {request_id})"
    return AttemptFailed(call.naming.name(detail), cause)


def _result(call: Call, raw: dict[str, Any]) -> Outcome:
    operation = call.operation
    output = shapes.response(operation.output_shape, raw, payload=_output_payload(operation))
    if call.service == "lambda" and operation.name == "Invoke" and call.naming.v1:
        return lambda_outcome(raw.get("FunctionError"), output.get("Payload", ""), output,
                              raw.get("ResponseMetadata", {}), call.legacy_lambda)
    if operation.name == "PutEvents" and call.naming.v1 and output.get("FailedEntryCount"):
        return AttemptFailed(FAILED_ENTRY, dumps(output))
    if call.naming.metadata:
        output.update(metadata(raw.get("ResponseMetadata", {})))
    return AttemptSucceeded(dumps(output))


def _output_payload(operation: OperationModel) -> str | None:
    shape = operation.output_shape
    return shape.serialization.get("payload") if shape is not None else None


def lambda_outcome(function_error: str | None, payload_text: str, output: dict[str, Any], response_metadata: dict,
                   legacy: bool) -> Outcome:
    """A Lambda invocation's outcome, from the function's payload (text) and the rest of the answer."""
    if function_error:
        found = _json_or_none(payload_text)
        name = found.get("errorType") if isinstance(found, dict) else None
        return AttemptFailed(name if isinstance(name, str) and name else LAMBDA_UNKNOWN, payload_text)
    if legacy:
        return AttemptSucceeded(payload_text if _json_or_none(payload_text) is not None else dumps(payload_text))
    parsed = _json_or_none(payload_text)
    output = dict(output, Payload=parsed if parsed is not None or payload_text == "null" else payload_text)
    output.update(metadata(response_metadata))
    return AttemptSucceeded(dumps({key: output[key] for key in sorted(output)}))


def metadata(response_metadata: dict) -> dict[str, Any]:
    """SdkHttpMetadata and SdkResponseMetadata, as the AWS SDK for Java 1.x reports them, from botocore's."""
    headers = response_metadata.get("HTTPHeaders", {})
    return {"SdkHttpMetadata": {"AllHttpHeaders": {name: [value] for name, value in headers.items()},
                                "HttpHeaders": dict(headers),
                                "HttpStatusCode": response_metadata.get("HTTPStatusCode", 200)},
            "SdkResponseMetadata": {"RequestId": response_metadata.get("RequestId", "")}}


def _json_or_none(text: str) -> Any:
    try:
        return loads(text)
    except ValueError:
        return None
