"""``arn:aws:states:::apigateway:invoke``: one call to an API deployed on API Gateway, as AWS's page "Create API
Gateway REST APIs with Step Functions" describes it.

The request: ``ApiEndpoint`` (``<api id>.execute-api.<region>.amazonaws.com``), ``Method``, ``Stage`` and ``Path``
(``https://<endpoint>/<stage>/<path>``), ``QueryParameters`` and ``Headers`` (each name to a list of values),
``RequestBody`` (JSON is sent as its text; without ``AllowNullValues: true`` its null fields are left out) and
``AuthType``: ``NO_AUTH`` (the default), or ``IAM_ROLE`` and ``RESOURCE_POLICY``, both signed with SigV4 for
``execute-api`` as the Task's role (or the server's credentials). Headers AWS reserves are refused.

The result: ``{"Headers": {name: [values]}, "ResponseBody": ..., "StatusCode": n, "StatusText": reason}``, the
header names as the API sent them (AWS's recordings: ``Content-Type``, ``x-amz-apigw-id``); a JSON
object or array answered with a JSON content type is the JSON, any other body its text (AWS's recordings show
``"0"`` and ``"true"`` kept as text). A status outside 2xx fails the Task with ``ApiGateway.<status>`` and the body
as the cause (AWS's recording of a 403: ``{"message":"Missing Authentication Token"}``); no answer at all fails it
with ``ApiGateway.SdkClientException`` (inferred).

Where the calls go: ``https://<ApiEndpoint>``, unless ``AWS_ENDPOINT_URL_EXECUTE_API`` names another base URL (as
``AWS_ENDPOINT_URL_<SERVICE>`` does for the AWS SDKs' services), in which ``{api_endpoint}``, ``{api_id}`` and
``{region}`` are filled in: a local API Gateway (LocalStack's
``http://{api_id}.execute-api.localhost.localstack.cloud:4566``) or a stand-in server can then answer.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import quote, urlencode

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from ...asl import errors
from ...asl.jsonio import dumps, loads
from ...decider.outcomes import AttemptFailed, AttemptSucceeded
from .. import http
from .clients import CredentialsFor

DEFAULT_URL = "https://{api_endpoint}"
METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS")
AUTH_TYPES = ("NO_AUTH", "IAM_ROLE", "RESOURCE_POLICY")
FIELDS = ("ApiEndpoint", "Method", "Headers", "Stage", "Path", "QueryParameters", "RequestBody", "AllowNullValues",
          "AuthType")
_ENDPOINT = re.compile(r"^(?P<api_id>[0-9a-z]+)\.execute-api\.(?P<region>[a-z0-9-]+)\.amazonaws\.com$")
_RESERVED = frozenset({"authorization", "connection", "content-md5", "expect", "host", "max-forwards",
                       "proxy-authenticate", "server", "te", "transfer-encoding", "trailer", "upgrade", "via",
                       "www-authenticate"})
_RESERVED_PREFIXES = ("x-forwarded", "x-amz")
NO_ANSWER = "ApiGateway.SdkClientException"
Outcome = AttemptSucceeded | AttemptFailed


async def invoke(given: Any, credentials: CredentialsFor) -> Outcome:
    """Make the call ``given`` (the Task's parameters) describes; never raises for what the API or the network
    did."""
    try:
        request, region, signed = _request(given, os.environ.get("AWS_ENDPOINT_URL_EXECUTE_API") or DEFAULT_URL)
        if signed:
            request = _signed(request, region, await credentials())
        response = await http.exchange(request)
    except http.Failure as failure:
        error = NO_ANSWER if failure.error == http.SOCKET else failure.error
        return AttemptFailed(error, failure.cause)
    if not 200 <= response.status < 300:
        return AttemptFailed(f"ApiGateway.{response.status}", response.body.decode("utf-8", errors="replace"))
    return AttemptSucceeded(dumps(_result(response)))


def _request(given: Any, url_template: str) -> tuple[http.Request, str, bool]:
    """(the request, the API's region, whether it is signed); http.Failure(States.Runtime) for a bad field."""
    if not isinstance(given, dict):
        raise http.Failure(errors.RUNTIME, "The Parameters of an API Gateway Task must be an object")
    unknown = sorted(set(given) - set(FIELDS))
    if unknown:
        raise http.Failure(errors.RUNTIME, f"The field '{unknown[0]}' is not supported by Step Functions")
    endpoint = given.get("ApiEndpoint")
    found = _ENDPOINT.match(endpoint) if isinstance(endpoint, str) else None
    if found is None:
        raise http.Failure(errors.RUNTIME, f"The ApiEndpoint '{endpoint}' is not an API's endpoint: "
                                           "<api id>.execute-api.<region>.amazonaws.com")
    method = given.get("Method")
    if method not in METHODS:
        raise http.Failure(errors.RUNTIME, f"The Method '{method}' is not one of {', '.join(METHODS)}")
    auth = given.get("AuthType", "NO_AUTH")
    if auth not in AUTH_TYPES:
        raise http.Failure(errors.RUNTIME, f"The AuthType '{auth}' is not one of {', '.join(AUTH_TYPES)}")
    base = url_template.format(api_endpoint=endpoint, api_id=found["api_id"], region=found["region"])
    segments = [str(part).strip("/") for part in (given.get("Stage"), given.get("Path")) if part not in (None, "")]
    url = "/".join([base.rstrip("/"), *(quote(segment, safe="/") for segment in segments)])
    query = _lists(given.get("QueryParameters"), "QueryParameters")
    if query:
        url += "?" + urlencode([(name, value) for name, values in query.items() for value in values])
    headers = [(name, ", ".join(values)) for name, values in _lists(given.get("Headers"), "Headers").items()]
    reserved = sorted(name for name, _ in headers if _reserved(name))
    if reserved:
        raise http.Failure(errors.RUNTIME, f"The 'Headers' field contains unsupported values: {reserved}")
    body = None
    if given.get("RequestBody") is not None:
        value = given["RequestBody"]
        if not given.get("AllowNullValues"):
            value = _without_nulls(value)
        body = value.encode() if isinstance(value, str) else dumps(value).encode()
        if not any(name.lower() == "content-type" for name, _ in headers):
            headers.append(("Content-Type", "text/plain" if isinstance(value, str) else "application/json"))
    return http.Request(method, url, headers, body), found["region"], auth != "NO_AUTH"


def definition_problems(names: Any, literal: dict[str, Any]) -> list[str]:
    """What a state machine's literal parameters break, refused when it is created (checked again as it runs)."""
    problems = [f"The field '{name}' is required" for name in ("ApiEndpoint", "Method")
                if names is not None and name not in names]
    for name, allowed in (("Method", METHODS), ("AuthType", AUTH_TYPES)):
        if name in literal and literal[name] not in allowed:
            problems.append(f"The value of the field '{name}' must be one of [{', '.join(allowed)}]")
    if "ApiEndpoint" in literal and not (isinstance(literal["ApiEndpoint"], str)
                                         and _ENDPOINT.match(literal["ApiEndpoint"])):
        problems.append("The value of the field 'ApiEndpoint' must be <api id>.execute-api.<region>.amazonaws.com")
    headers = literal.get("Headers")
    reserved = sorted(name for name in headers if _reserved(name)) if isinstance(headers, dict) else []
    if reserved:
        problems.append(f"The 'Headers' field contains unsupported values: {reserved}")
    return problems


def _reserved(name: str) -> bool:
    return name.lower() in _RESERVED or name.lower().startswith(_RESERVED_PREFIXES)


def _lists(value: Any, field_name: str) -> dict[str, list[str]]:
    """Headers or QueryParameters: each name to a list of strings (a single string is taken as a list of one)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise http.Failure(errors.RUNTIME, f"The field '{field_name}' must be an object of lists of strings")
    shaped = {}
    for name, values in value.items():
        values = values if isinstance(values, list) else [values]
        if not all(isinstance(item, str | int | float | bool) for item in values):
            raise http.Failure(errors.RUNTIME, f"The field '{field_name}.{name}' must be a list of strings")
        shaped[name] = [item if isinstance(item, str) else dumps(item) for item in values]
    return shaped


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):  # an array keeps its length: only fields are left out
        return [_without_nulls(item) for item in value]
    return value


def _signed(request: http.Request, region: str, credentials: Credentials | None) -> http.Request:
    if credentials is None:
        raise http.Failure(NO_ANSWER, "No AWS credentials to sign the request with (AuthType needs them)")
    signing = AWSRequest(request.method, request.url, headers=dict(request.headers), data=request.body or b"")
    SigV4Auth(credentials, "execute-api", region).add_auth(signing)
    return http.Request(request.method, request.url, list(signing.headers.items()), request.body)


def _result(response: http.Response) -> dict[str, Any]:
    headers: dict[str, list[str]] = {}
    for name, value in response.headers:
        headers.setdefault(name, []).append(value)
    text = response.body.decode("utf-8", errors="replace")
    body: Any = text
    media_type = next((values[0] for name, values in headers.items() if name.lower() == "content-type"), "")
    media_type = media_type.split(";")[0].strip()
    if media_type.lower().endswith("json"):
        try:
            parsed = loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict | list):
            body = parsed
    return {"Headers": headers, "ResponseBody": body, "StatusCode": response.status,
            "StatusText": response.reason}
