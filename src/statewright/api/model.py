"""Request validation against boto3's own service model for Step Functions (shipped in botocore).

The model is the exact list of operations, members, types and length limits AWS enforces, so checking requests
against it gives the same ValidationException a client would get from AWS, for every operation, without
restating the limits here. A member given as JSON ``null`` is read as absent, as AWS's JSON protocol reads it, so
handlers never see a None where the model promises a type.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from botocore.loaders import Loader

from .errors import AwsError


@cache
def service_model() -> dict[str, Any]:
    return Loader().load_service_model("stepfunctions", "service-2")


def operation_names() -> set[str]:
    return set(service_model()["operations"])


def validate_request(operation: str, params: Any) -> dict[str, Any]:
    """``params`` without their null members; raises ValidationException listing every constraint they break, as
    AWS's front end does ("2 validation errors detected: ...; ..."), or SerializationException for wrong JSON
    types (found before any constraint is checked)."""
    model = service_model()
    shape_name = model["operations"][operation].get("input", {}).get("shape")
    if shape_name is None:
        return {}
    if not isinstance(params, dict):
        raise AwsError("SerializationException", "The request body must be a JSON object")
    problems: list[str] = []
    checked = _check(model["shapes"], model["shapes"][shape_name], params, "", problems)
    if problems:
        plural = "s" if len(problems) > 1 else ""
        raise AwsError("ValidationException", f"{len(problems)} validation error{plural} detected: "
                                              + "; ".join(problems))
    return checked


def _check(shapes: dict, shape: dict, value: Any, where: str, problems: list[str]) -> Any:
    """``value`` checked against ``shape``: the same value, its structures without null members. Each broken
    constraint goes into ``problems`` in AWS's words, members in the model's order."""
    kind = shape["type"]
    if kind == "structure":
        if not isinstance(value, dict):
            raise _wrong_type(where, "an object")
        inner = f"{where}." if where else ""
        required = shape.get("required", [])
        checked = {}
        # Members outside the model are dropped too: AWS ignores them, and no handler may read one unchecked.
        for member, spec in shape["members"].items():
            if value.get(member) is not None:
                checked[member] = _check(shapes, shapes[spec["shape"]], value[member], inner + member, problems)
            elif member in required:
                problems.append(_null(inner + member))
        return checked
    if kind == "string":
        if not isinstance(value, str):
            raise _wrong_type(where, "a string")
        problems.extend(_string_problems(shape, value, where))
    elif kind in ("integer", "long"):
        if not isinstance(value, int) or isinstance(value, bool):
            raise _wrong_type(where, "an integer")
        problems.extend(_range_problems(shape, value, where))
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise _wrong_type(where, "a boolean")
    elif kind == "list":
        if not isinstance(value, list):
            raise _wrong_type(where, "an array")
        if len(value) > shape.get("max", 1 << 31):
            problems.append(f"Value at '{where}' failed to satisfy constraint: Member must have length less than "
                            f"or equal to {shape['max']}")
        items = []
        for i, item in enumerate(value):
            if item is None:
                problems.append(_null(f"{where}.{i + 1}.member"))
                continue
            items.append(_check(shapes, shapes[shape["member"]["shape"]], item, f"{where}.{i + 1}.member", problems))
        return items
    elif kind == "map":
        if not isinstance(value, dict):
            raise _wrong_type(where, "an object")
    elif kind == "float":
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise _wrong_type(where, "a number")
        problems.extend(_range_problems(shape, float(value), where))
    elif kind == "timestamp" and (not isinstance(value, int | float | str) or isinstance(value, bool)):
        raise _wrong_type(where, "a timestamp")
    return value


def _range_problems(shape: dict[str, Any], value: float, where: str) -> list[str]:
    """A number's bounds in the model (UpdateMapRun's toleratedFailurePercentage: 0 to 100, ...)."""
    found = []
    if value > shape.get("max", 1 << 63):
        found.append(f"Value '{value}' at '{where}' failed to satisfy constraint: Member must have value less than "
                     f"or equal to {shape['max']}")
    if value < shape.get("min", -(1 << 63)):
        found.append(f"Value '{value}' at '{where}' failed to satisfy constraint: Member must have value greater "
                     f"than or equal to {shape['min']}")
    return found


def _string_problems(shape: dict, value: str, where: str) -> list[str]:
    """A string's broken constraints: length, pattern, enum. AWS quotes the value, except a sensitive one (a
    payload, TestState's stateName), whose size it measures in bytes; that it words a sensitive value's minimum
    length as others' without the value is inferred."""
    if shape.get("sensitive") and "max" in shape:
        if len(value.encode()) > shape["max"]:
            return [f"Value at '{where}' failed to satisfy constraint: Member must have size less than or equal to "
                    f"{shape['max']} bytes in UTF-8 encoding"]
        if len(value) < shape.get("min", 0):
            return [f"Value at '{where}' failed to satisfy constraint: Member must have length greater than or "
                    f"equal to {shape['min']}"]
        return []
    quoted = f"Value '{value}' at '{where}' failed to satisfy constraint: Member must"
    found = []
    if len(value) > shape.get("max", 1 << 31):
        found.append(f"{quoted} have length less than or equal to {shape['max']}")
    if len(value) < shape.get("min", 0):
        found.append(f"{quoted} have length greater than or equal to {shape['min']}")
    if "pattern" in shape and not _pattern(shape["pattern"]).fullmatch(value):
        found.append(f"{quoted} satisfy regular expression pattern: {shape['pattern']}")
    if "enum" in shape and value not in shape["enum"]:
        found.append(f"{quoted} satisfy enum value set: [{', '.join(shape['enum'])}]")
    return found


@cache
def _pattern(java_pattern: str) -> re.Pattern[str]:
    """A model's pattern (Java syntax; the one Java-only class it uses is spelled out) for Python's re. AWS
    matches the whole value."""
    return re.compile(java_pattern.replace(r"\p{ASCII}", r"[\x00-\x7f]"))


def _null(where: str) -> str:
    return f"Value null at '{where}' failed to satisfy constraint: Member must not be null"


def _wrong_type(where: str, expected: str) -> AwsError:
    return AwsError("SerializationException", f"The value of '{where or 'the request'}' must be {expected}")
