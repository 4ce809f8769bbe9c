"""How each AWS Task resource becomes one botocore call, and how its answer becomes the Task's outcome.

Three families, as Step Functions has them:

- ``arn:aws:states:::aws-sdk:<service>:<action>``: any operation botocore models, parameters and result in
  PascalCase (``shapes``), errors ``<Service>.<Exception>`` named as the AWS SDK for Java 2.x names them
  (``catalogue``), with the service's answer as the cause: ``<message> (Service: <Service>, Status Code: <n>,
  Request ID: <id>)``.
- The optimized integrations (``arn:aws:states:::sqs:sendMessage``, ...; ``optimized`` has them all): the same
  call, with the shapes AWS gives them: a JSON value for a message body, event detail or Lambda payload is sent as
  its JSON text; the older ones' results carry ``SdkHttpMetadata`` and ``SdkResponseMetadata`` (not
  events:putEvents') and their errors are named with the AWS SDK for Java 1.x's classes
  (``SQS.QueueDoesNotExistException``, ``DynamoDB.ConditionalCheckFailedException``, the service's own
  ``SQS.AmazonSQSException`` for one its model does not list); the newer ones' with 2.x's.
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

import functools
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
from ...asl.definition_tasks import LAMBDA_FUNCTION, NOT_RECOGNIZED
from ...asl.jsonio import dumps, loads
from ...decider.outcomes import AttemptFailed, AttemptSucceeded
from ...decider.tasks import AWS_CALL_DEADLINE_MS
from . import api_gateway, catalogue, kubernetes, optimized, shapes
from .optimized import LAMBDA, OPTIMIZED, ClientFor, Optimized, OtherServiceFailed, Params

LAMBDA_UNKNOWN = "Lambda.Unknown"
LAMBDA_CLIENT = "Lambda.SdkClientException"
TASK_FAILED = "States.TaskFailed"
FAILED_ENTRY = "EventBridge.FailedEntry"

Outcome = AttemptSucceeded | AttemptFailed


@dataclass(frozen=True)
class Call:
    """One botocore call a Task makes: where, what, and how its answer is read."""

    service: str  # botocore's name
    operation: OperationModel
    params: dict[str, Any]
    timeout_s: float  # the call's deadline (its read timeout): the attempt's TimeoutSeconds, capped
    naming: Naming
    legacy_lambda: bool = False  # a bare function ARN: the result is the payload itself
    # an optimized integration's own: the request made with calls of its own first (``params`` then unused), and
    # how its result differs from the API's
    prepare: Callable[[ClientFor], dict[str, Any]] | None = None
    result: Callable[[Params, ClientFor], Params] | None = None


@dataclass(frozen=True)
class Naming:
    """How a service's errors are named and described."""

    java_name: str  # the service in error texts
    name: Callable[[dict], str]  # botocore's response["Error"] -> the error's name
    v1: bool = False  # AWS SDK for Java 1.x texts and result metadata (optimized integrations)
    metadata: bool = False


def call_deadline_s(payload: dict[str, Any]) -> float:
    """How long the call a Task's dispatch asks for may take (decider/tasks.py sets it)."""
    return payload.get("call_s") or AWS_CALL_DEADLINE_MS / 1000


def plan(payload: dict[str, Any]) -> Call:
    """The call a Task's dispatch payload asks for; raises shapes.ParameterError when the Task's parameters do not
    fit the operation."""
    kind, action, parameters = payload["kind"], payload["action"], payload["input"]
    timeout_s = call_deadline_s(payload)
    if kind == LAMBDA_FUNCTION:
        return _optimized_call(LAMBDA, {"FunctionName": action, "Payload": parameters}, timeout_s, payload,
                               legacy_lambda=True)
    if kind.startswith("aws-sdk:"):
        service = catalogue.service(kind[len("aws-sdk:"):])
        operation = service.operation(action) if service else None
        if operation is None:  # validated when the machine was created; a botocore without it now
            raise shapes.ParameterError(f"The resource aws-sdk:{kind[8:]}:{action} is not available")
        params = shapes.request(operation.input_shape, parameters, payload=payload_member(operation.input_shape))
        return Call(service.botocore_name, operation, params, timeout_s, Naming(service.java_name, service.error_name))
    return _optimized_call(OPTIMIZED[(kind, action)], parameters, timeout_s, payload)


def resource_problems(integration: str, action: str, pattern: str, names: Collection[str] | None,
                      literal: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """What is wrong with an AWS Task resource, the names of its parameters and the values written literally, as
    AWS reports it when a state machine is created (asl/definition.py ResourceCheck)."""
    allowed = _allowed_fields(integration, action, pattern)
    if isinstance(allowed, str):
        return [("Resource", allowed)]
    if allowed is None:
        return []
    return [("Parameters", message) for message in literal_problems(integration, action, names, literal or {})] + [
        ("Parameters", f"The field '{name}' is not supported by Step Functions")
        for name in sorted(names or ()) if name not in allowed]


_OWN_FIELDS = {("apigateway", "invoke"): api_gateway.FIELDS, ("eks", "call"): kubernetes.CALL_FIELDS,
               ("eks", "runJob"): kubernetes.JOB_FIELDS}  # integrations that are no single AWS API call


def _allowed_fields(integration: str, action: str, pattern: str) -> Collection[str] | str | None:
    """The parameters a resource takes; a refusal of the resource itself (text); None: not checked here (a Lambda
    function's payload, an activity's input)."""
    if (integration, action) in _OWN_FIELDS:
        return _OWN_FIELDS[(integration, action)]
    if integration.startswith("aws-sdk:"):
        service = catalogue.service(integration[len("aws-sdk:"):])
        operation = service.operation(action) if service else None
        if operation is None or pattern not in ("", "waitForTaskToken"):
            resource = f"arn:aws:states:::{integration}:{action}" + (f".{pattern}" if pattern else "")
            return f"The resource provided {resource} {NOT_RECOGNIZED}"
        return shapes.member_names(operation.input_shape)
    if (integration, action) in OPTIMIZED:
        spec = OPTIMIZED[(integration, action)]
        if spec.fields is not None:
            return spec.fields
        return shapes.member_names(catalogue.by_botocore_name(spec.service).model.operation_model(
            spec.operation).input_shape)
    return None


def literal_problems(integration: str, action: str, names: Collection[str] | None,
                     literal: dict[str, Any]) -> list[str]:
    """What the parameters written literally break of an integration's own rules (known before it runs)."""
    if (integration, action) == ("apigateway", "invoke"):
        return api_gateway.definition_problems(names, literal)
    if integration == "elasticmapreduce":
        return optimized.emr_problems(action, names, literal)
    return []


def _optimized_call(spec: Optimized, parameters: Any, timeout_s: float, payload: dict[str, Any],
                    legacy_lambda: bool = False) -> Call:
    if not isinstance(parameters, dict):
        raise shapes.ParameterError("The API parameters must be a JSON object")
    parameters = dict(parameters)
    for name in spec.json_fields:  # a Lambda payload is always JSON; a message may be plain text
        if name in parameters and (name == "Payload" or not isinstance(parameters[name], str)):
            parameters[name] = dumps(parameters[name])
    if spec.operation == "PutEvents" and isinstance(parameters.get("Entries"), list):
        parameters["Entries"] = [_event_entry(entry, payload["execution"]) for entry in parameters["Entries"]]
    given = parameters
    if spec.request is not None:
        parameters = spec.request(parameters)
    service = catalogue.by_botocore_name(spec.service)
    operation = service.model.operation_model(spec.operation)
    naming = Naming(spec.sdk_name, _optimized_errors(service, spec), v1=spec.v1, metadata=spec.metadata)
    result = None if spec.result is None else functools.partial(spec.result, given)
    member = payload_member(operation.input_shape)
    if spec.prepare is not None:
        prepare = spec.prepare

        def prepared(client_for: ClientFor) -> dict[str, Any]:
            return shapes.request(operation.input_shape, prepare(given, client_for), payload=member)
        return Call(spec.service, operation, {}, timeout_s, naming, prepare=prepared, result=result)
    params = shapes.request(operation.input_shape, parameters, payload=member)
    return Call(spec.service, operation, params, timeout_s, naming, legacy_lambda, result=result)


def _event_entry(entry: Any, execution_arn: str) -> Any:
    """An events:putEvents entry as Step Functions sends it: a JSON Detail as its text, and the execution's and its
    state machine's ARNs added to Resources."""
    if not isinstance(entry, dict):
        return entry
    entry = dict(entry)
    if not isinstance(entry.get("Detail", ""), str):
        entry["Detail"] = dumps(entry["Detail"])
    machine_arn = ":".join(execution_arn.replace(":execution:", ":stateMachine:", 1).split(":")[:7])
    resources = entry.get("Resources") if isinstance(entry.get("Resources"), list) else []
    entry["Resources"] = [*resources, execution_arn, machine_arn]
    return entry


def _optimized_errors(service: catalogue.Service, spec: Optimized) -> Any:
    def name(error: dict) -> str:
        shape = service.error_shape(error)
        if shape is None:
            return f"{spec.prefix}.{spec.generic}"
        return f"{spec.prefix}.{shape if shape.endswith('Exception') else shape + 'Exception'}"
    return name


def payload_member(shape: Any) -> str | None:
    """The member of an input or output shape that is the HTTP payload (S3's Body, Lambda's Payload), if any."""
    return shape.serialization.get("payload") if shape is not None else None


def perform(call: Call, client: Any, client_for: ClientFor | None = None) -> Outcome:
    """Make ``call`` with ``client`` (blocking: on a pool thread) and read its answer; ``client_for`` gives the
    clients of other services an optimized integration calls too (Bedrock's S3 input and output)."""
    def clients(service: str) -> Any:
        return client if service == call.service else client_for(service) if client_for else None
    try:
        params = call.params if call.prepare is None else call.prepare(clients)
        raw = getattr(client, xform_name(call.operation.name))(**params)
        return _result(call, raw, clients)  # reading a streamed body can fail too
    except shapes.ParameterError as error:  # the answer holds what a Task cannot return
        return AttemptFailed(errors.RUNTIME, str(error))
    except ClientError as error:
        return _service_error(call.service, call.naming, error)
    except OtherServiceFailed as failed:  # a call of another service the integration makes (Bedrock's S3)
        other = catalogue.by_botocore_name(failed.service)
        return _service_error(failed.service, Naming(other.java_name, other.error_name), failed.error)
    except ReadTimeoutError as error:
        return AttemptFailed(errors.TIMEOUT, f"The call to {call.operation.name} got no answer in time: {error}")
    except ParamValidationError as error:
        return AttemptFailed(errors.RUNTIME, f"The API parameters are not valid: {error}")
    except (NoCredentialsError, ConnectTimeoutError, BotoCoreError) as error:
        return AttemptFailed(LAMBDA_CLIENT if call.service == "lambda" and call.naming.v1 else TASK_FAILED,
                             f"{type(error).__name__}: {error}")


def _service_error(service: str, naming: Naming, error: ClientError) -> AttemptFailed:
    detail = error.response.get("Error", {})
    meta = error.response.get("ResponseMetadata", {})
    message = detail.get("Message") or detail.get("Code") or "The service refused the call"
    status, request_id = meta.get("HTTPStatusCode", 400), meta.get("RequestId", "")
    if naming.v1:
        cause = (f"{message} (Service: {naming.java_name}; Status Code: {status}; Error Code: "
                 f"{detail.get('Code', '')}; Request ID: {request_id}; Proxy: null)")
    else:  # the AWS SDK for Java 2.x's text; S3's adds its extended request id (x-amz-id-2; "null", as that SDK
        # writes it, when S3 sent none), as AWS's recordings have it
        extended = f", Extended Request ID: {meta.get('HostId') or 'null'}" if service == "s3" else ""
        cause = (f"{message} (Service: {naming.java_name}, Status Code: {status}, Request ID: {request_id}"
                 f"{extended})")
    return AttemptFailed(naming.name(detail), cause)


def _result(call: Call, raw: dict[str, Any], clients: ClientFor) -> Outcome:
    operation = call.operation
    output = shapes.response(operation.output_shape, raw, payload=payload_member(operation.output_shape))
    if call.service == "lambda" and operation.name == "Invoke" and call.naming.v1:
        return lambda_outcome(raw.get("FunctionError"), output.get("Payload", ""), output,
                              raw.get("ResponseMetadata", {}), call.legacy_lambda)
    if operation.name == "PutEvents" and call.naming.v1 and output.get("FailedEntryCount"):
        return AttemptFailed(FAILED_ENTRY, dumps(output))
    if call.result is not None:
        output = call.result(output, clients)
    if call.naming.metadata:
        output.update(metadata(raw.get("ResponseMetadata", {})))
    return AttemptSucceeded(dumps(output))


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
