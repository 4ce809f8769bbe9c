"""A Task's JSON to a botocore request, and a botocore response back to the JSON Step Functions returns.

Step Functions spells every member in PascalCase, even where the service's API is camelCase (``StateMachineArn``
for Step Functions' own ``stateMachineArn``), and an API member named ``Equals`` as ``EqualsValue``. Members are
matched to the operation's model, so only structure members are renamed, never map keys or document contents.

Values: a payload or streaming blob (an S3 object's Body, a Lambda Payload) is text both ways (a JSON value given
for it is sent as its JSON text); any other blob is base64 text; a timestamp comes back as ISO 8601 in UTC with
milliseconds when it has them (``2024-05-01T12:00:00.250Z``), as the AWS SDK for Java writes an Instant. The
response's ResponseMetadata is left out.

Inferred, not verified against AWS: base64 for blobs that are not payloads, and the timestamp format.
"""

from __future__ import annotations

import base64
import binascii
import datetime
from typing import Any

from botocore.model import Shape

from ...asl.jsonio import dumps


class ParameterError(ValueError):
    """The Task's parameters do not fit the operation: the message says which field and why."""


def request(shape: Shape | None, value: Any, *, payload: str | None = None) -> dict[str, Any]:
    """The botocore keyword arguments for an operation whose input is ``shape``; ``payload`` names its payload
    member, if any."""
    if not isinstance(value, dict):
        raise ParameterError("The API parameters must be a JSON object")
    if shape is None:
        if value:
            raise ParameterError(f"The field '{next(iter(value))}' is not supported by Step Functions")
        return {}
    return _structure_in(shape, value, "", payload)


def member_names(shape: Shape | None) -> dict[str, str]:
    """A structure's members as a state machine spells them -> as the API does."""
    if shape is None:
        return {}
    return {_pascal(name): name for name in shape.members}


def _structure_in(shape: Shape, value: Any, where: str, payload: str | None = None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ParameterError(f"The field '{where}' must be an object")
    members = shape.members
    by_name = member_names(shape)
    converted = {}
    for key, item in value.items():
        name = by_name.get(key)
        if name is None:
            raise ParameterError(f"The field '{where}{key}' is not supported by Step Functions")
        converted[name] = _in(members[name], item, f"{where}{key}", name == payload)
    return converted


def _in(shape: Shape, value: Any, where: str, is_payload: bool = False) -> Any:
    kind = shape.type_name
    if value is None:
        return None
    if kind == "structure":
        return _structure_in(shape, value, f"{where}.")
    if kind == "list":
        if not isinstance(value, list):
            raise ParameterError(f"The field '{where}' must be an array")
        return [_in(shape.member, item, f"{where}[{index}]") for index, item in enumerate(value)]
    if kind == "map":
        if not isinstance(value, dict):
            raise ParameterError(f"The field '{where}' must be an object")
        return {key: _in(shape.value, item, f"{where}.{key}") for key, item in value.items()}
    if kind == "blob":
        if is_payload or shape.serialization.get("streaming"):
            return (value if isinstance(value, str) else dumps(value)).encode()
        if not isinstance(value, str):
            raise ParameterError(f"The field '{where}' must be base64 text")
        try:
            return base64.b64decode(value, validate=True)
        except binascii.Error:
            raise ParameterError(f"The field '{where}' must be base64 text") from None
    return value  # strings, numbers, booleans, timestamps (botocore takes ISO 8601 text or epoch seconds)


def response(shape: Shape | None, value: dict[str, Any], *, payload: str | None = None) -> dict[str, Any]:
    """The JSON a Task returns for botocore's parsed ``value`` of an operation whose output is ``shape``."""
    if shape is None:
        return {}
    return {_pascal(name): _out(shape.members[name], item, name == payload)
            for name, item in value.items() if name in shape.members}


def _out(shape: Shape, value: Any, is_payload: bool = False) -> Any:
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        return {_pascal(name): _out(shape.members[name], item) if name in shape.members else item
                for name, item in value.items()}
    if kind == "list" and isinstance(value, list):
        return [_out(shape.member, item) for item in value]
    if kind == "map" and isinstance(value, dict):
        return {key: _out(shape.value, item) for key, item in value.items()}
    if kind == "blob":
        data = value.read() if hasattr(value, "read") else value
        if is_payload or shape.serialization.get("streaming"):
            return data.decode("utf-8", errors="replace")
        return base64.b64encode(data).decode()
    if isinstance(value, datetime.datetime):
        return timestamp(value)
    return value


def timestamp(value: datetime.datetime) -> str:
    """ISO 8601 in UTC, as the AWS SDK for Java writes an Instant: milliseconds only when there are any."""
    value = value.astimezone(datetime.UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond // 1000:03d}"
    return text + "Z"


def _pascal(name: str) -> str:
    name = name[:1].upper() + name[1:]
    return "EqualsValue" if name == "Equals" else name
