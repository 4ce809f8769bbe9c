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
from ...asl.timestamps import is_iso8601


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


def result_problem(shape: Shape, value: Any, *, strict: bool, any_json: frozenset[str] = frozenset()) -> str | None:
    """The first place a Task result given for ``shape`` (a TestState mock) does not fit it, in AWS's words
    ("Mock result schema validation error: ..."), or None. As AWS checks (LocalStack's AWS-validated
    test_field_validation_mode snapshots): fields are read as Step Functions spells them, a field the model does
    not have is not checked (AWS lets it pass), each present one must have its member's JSON type, enum value and
    range, and with ``strict`` every required member must be present. A timestamp is an ISO 8601 string, with or
    without an offset (AWS refuses a number, and takes Python's isoformat() without one: LocalStack's AWS-validated
    test_sfn_start_execution_success; that it refuses a string that is no timestamp is inferred). ``any_json``:
    top-level members that hold any JSON value (a Lambda Payload, a nested execution's Input and Output with
    .sync:2)."""
    if not isinstance(value, dict):  # an output, or a job's description: a structure (words ours)
        return _problem("The mock result must be a JSON object")
    return _fit_members(shape, _spelled(shape, any_json), value, strict)


def _spelled(shape: Shape, skipped: frozenset[str] = frozenset()) -> dict[str, Shape]:
    """A structure's members' shapes by the names Step Functions spells them, but ``skipped``."""
    return {name: shape.members[api] for name, api in member_names(shape).items() if name not in skipped}


def _problem(text: str) -> str:
    return f"Mock result schema validation error: {text}"


def _fit_members(shape: Shape, members: dict[str, Shape], value: dict[str, Any], strict: bool) -> str | None:
    if strict:
        for name in shape.required_members:
            if _pascal(name) not in value:
                return _problem(f"Required field '{_pascal(name)}' is missing")
    for key, item in value.items():
        problem = None if key not in members else _fit(members[key], item, key, strict)
        if problem is not None:
            return problem
    return None


_JSON_TYPES = {"string": "a string", "blob": "a string", "timestamp": "a string", "boolean": "a boolean",
               "integer": "a number", "long": "a number", "float": "a number", "double": "a number",
               "list": "an array", "map": "an object", "structure": "an object"}


def _fit(shape: Shape, value: Any, name: str, strict: bool) -> str | None:
    """``value`` of the field ``name`` (a list's items and a map's values are named as their field) against its
    member's shape; a JSON null is the field left out."""
    kind = shape.type_name
    if value is None or kind not in _JSON_TYPES:
        return None  # a document (any JSON), or a null
    if not _is(kind, value):
        return _problem(f"Field '{name}' must be {_JSON_TYPES[kind]}")
    if kind == "structure":
        return _fit_members(shape, _spelled(shape), value, strict)
    if kind in ("list", "map"):
        items, inner = (value, shape.member) if kind == "list" else (value.values(), shape.value)
        return next((found for item in items if (found := _fit(inner, item, name, strict)) is not None), None)
    return _scalar_problem(shape, value, name)


def _is(kind: str, value: Any) -> bool:
    if kind in ("integer", "long", "float", "double"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, {"string": str, "blob": str, "timestamp": str, "boolean": bool, "list": list,
                              "map": dict, "structure": dict}[kind])


def _scalar_problem(shape: Shape, value: Any, name: str) -> str | None:
    """A value of the right JSON type outside its member's enum or range (the words AWS uses for each; those for a
    fraction given for an integer, a string over its maximum length and a timestamp that does not parse are
    ours)."""
    kind, limits = shape.type_name, shape.metadata
    if kind in ("integer", "long") and isinstance(value, float):
        return _problem(f"Field '{name}' must be an integer")
    if kind == "timestamp" and not is_iso8601(value):
        return _problem(f"Field '{name}' must be an ISO 8601 timestamp")
    if kind == "string" and getattr(shape, "enum", None) and value not in shape.enum:
        return _problem(f"Field '{name}' is not an expected value")
    if isinstance(value, str):
        if len(value) < limits.get("min", 0):
            return _problem(f"Field '{name}' is smaller than the minimum length")
        if len(value) > limits.get("max", len(value)):
            return _problem(f"Field '{name}' is larger than the maximum length")
    elif isinstance(value, int | float):
        if value < limits.get("min", value):
            return _problem(f"Field '{name}' is less than the minimum value")
        if value > limits.get("max", value):
            return _problem(f"Field '{name}' exceeds the maximum value")
    return None


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
