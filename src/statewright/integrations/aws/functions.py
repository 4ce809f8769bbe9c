"""Lambda functions served as local web services (``statewright serve --functions FILE``), for development
without a Lambda service.

The file is a JSON object mapping a function's name or ARN to an http(s) URL. A Task that invokes a mapped
function (``lambda:invoke`` or the function's ARN as its Resource) POSTs the payload there as JSON, and the reply
is the function's answer: a 2xx reply's body is its result; a reply whose body is a JSON object carrying
``errorType`` and ``errorMessage`` is a function error, named by errorType (as Lambda reports a function that
raised); any other reply is a function error ``Lambda.Unknown``; no reply at all is ``Lambda.SdkClientException``.
The result has the shape of Lambda's own (``StatusCode`` 200, ``ExecutedVersion`` ``$LATEST``, the reply's headers
in SdkHttpMetadata). A function the file does not map is invoked through the Lambda endpoint botocore is
configured for.
"""

from __future__ import annotations

import os
import uuid
from typing import Any
from urllib.parse import urlsplit

from ...asl.jsonio import loads
from ...engine.outcomes import AttemptFailed, AttemptSucceeded
from ..http import Failure, Request, exchange
from .calls import LAMBDA_CLIENT, LAMBDA_UNKNOWN, lambda_outcome

Outcome = AttemptSucceeded | AttemptFailed


class InvalidFunctions(ValueError):
    """The --functions file cannot be used: the message says why."""


class LocalFunctions:
    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._urls: dict[str, str] = {}
        if path is None:
            return
        try:
            with open(path, "rb") as stream:
                document = loads(stream.read())
        except (OSError, ValueError) as error:
            raise InvalidFunctions(f"cannot read the functions file {path}: {error}") from None
        if not isinstance(document, dict):
            raise InvalidFunctions(f"the functions file {path} must hold a JSON object: function name or ARN -> URL")
        for name, url in document.items():
            parts = urlsplit(url) if isinstance(url, str) else None
            if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
                raise InvalidFunctions(f"the functions file {path}: the URL of {name!r} must be an http or https URL")
            self._urls[name] = url

    def __len__(self) -> int:
        return len(self._urls)

    def url(self, function_name: Any) -> str | None:
        """The URL serving this FunctionName (a name, ``name:qualifier``, or a full or partial ARN), if mapped."""
        if not isinstance(function_name, str) or not self._urls:
            return None
        found = self._urls.get(function_name)
        if found is not None:
            return found
        name = function_name.split(":function:", 1)[-1].split(":", 1)[0]
        return self._urls.get(name)

    async def invoke(self, url: str, payload: bytes, *, legacy: bool) -> Outcome:
        """POST ``payload`` to ``url`` and read the reply as the function's answer (module docstring)."""
        try:
            reply = await exchange(Request("POST", url, [("Content-Type", "application/json")], payload))
        except Failure as failure:
            return AttemptFailed(LAMBDA_CLIENT, f"The function at {url} could not be reached: {failure.cause}")
        text = reply.body.decode("utf-8", errors="replace") or "null"
        try:
            answer = loads(text)
        except ValueError:
            answer = None
        if isinstance(answer, dict) and "errorType" in answer and "errorMessage" in answer:
            return lambda_outcome("Unhandled", text, {}, {}, legacy)
        if not 200 <= reply.status < 300:
            return AttemptFailed(LAMBDA_UNKNOWN, f"The function at {url} answered {reply.status} {reply.reason}: "
                                                 f"{text[:1000]}")
        headers = {name.lower(): value for name, value in reply.headers}
        metadata = {"HTTPHeaders": headers, "HTTPStatusCode": 200, "RequestId": str(uuid.uuid4())}
        return lambda_outcome(None, text, {"ExecutedVersion": "$LATEST", "StatusCode": 200}, metadata, legacy)
