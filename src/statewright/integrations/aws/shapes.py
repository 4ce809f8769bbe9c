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
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                raise ParameterError("The response's body is not UTF-8 text, which a Task's result cannot "
                                     "hold") from None
        return base64.b64encode(data).decode()
    if isinstance(value, datetime.datetime):
        return timestamp(value)
    return value


def result_problems(shape: Shape | None, value: Any, *, strict: bool, payload: str | None = None,
                    extra: frozenset[str] = frozenset()) -> list[str]:
    """Where a Task result given for an operation whose output is ``shape`` (a TestState mock) does not fit it, as
    Step Functions spells the output: every present field must be a member of its type, and with ``strict`` every
    required member must be present. ``payload``: a member that holds any JSON (a Lambda payload); ``extra``:
    top-level fields the integration adds (SdkHttpMetadata)."""
    if shape is None:
        return []
    return _fit(shape, value, "", strict, payload, extra)


_SCALARS: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "long": (int,), "float": (int, float),
                                         "double": (int, float), "boolean": (bool,), "timestamp": (str, int, float),
                                         "blob": (str,)}


def _fit(shape: Shape, value: Any, where: str, strict: bool, payload: str | None = None,
         extra: frozenset[str] = frozenset()) -> list[str]:
    kind = shape.type_name
    here = where or "the result"
    if kind == "structure":
        if not isinstance(value, dict):
            return [f"{here} must be an object"]
        members = member_names(shape)
        problems = []
        for key, item in value.items():
            if key in extra or (members.get(key) == payload and payload is not None):
                continue
            if key not in members:
                problems.append(f"{where + '.' if where else ''}{key} is not a field of the API's output")
            else:
                problems += _fit(shape.members[members[key]], item, f"{where + '.' if where else ''}{key}", strict)
        if strict:
            problems += [f"{where + '.' if where else ''}{_pascal(name)} is required" for name in shape.required_members
                         if _pascal(name) not in value]
        return problems
    if kind == "list":
        if not isinstance(value, list):
            return [f"{here} must be an array"]
        return [problem for index, item in enumerate(value) for problem in _fit(shape.member, item,
                                                                                 f"{where}[{index}]", strict)]
    if kind == "map":
        if not isinstance(value, dict):
            return [f"{here} must be an object"]
        return [problem for key, item in value.items() for problem in _fit(shape.value, item, f"{where}.{key}",
                                                                            strict)]
    expected = _SCALARS.get(kind)
    if expected is None or value is None:
        return []
    if not isinstance(value, expected) or (kind != "boolean" and isinstance(value, bool)):
        return [f"{here} must be of type {kind}"]
    if kind == "string" and shape.enum and value not in shape.enum:
        return [f"{here} must be one of {', '.join(shape.enum)}"]
    return []


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
