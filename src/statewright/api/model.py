"""Request validation against boto3's own service model for Step Functions (shipped in botocore).

The model is the exact list of operations, members, types and length limits AWS enforces, so checking requests
against it gives the same ValidationException a client would get from AWS, for every operation, without
restating the limits here. A member given as JSON ``null`` is read as absent, as AWS's JSON protocol reads it, so
handlers never see a None where the model promises a type.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from botocore.loaders import Loader

from .errors import AwsError, validation


@cache
def service_model() -> dict[str, Any]:
    return Loader().load_service_model("stepfunctions", "service-2")


def operation_names() -> set[str]:
    return set(service_model()["operations"])


def validate_request(operation: str, params: Any) -> dict[str, Any]:
    """``params`` without their null members; raises ValidationException (or SerializationException for wrong
    JSON types) if they break the model."""
    model = service_model()
    shape_name = model["operations"][operation].get("input", {}).get("shape")
    if shape_name is None:
        return {}
    if not isinstance(params, dict):
        raise AwsError("SerializationException", "The request body must be a JSON object")
    return _check(model["shapes"], model["shapes"][shape_name], params, "")


def _check(shapes: dict, shape: dict, value: Any, where: str) -> Any:
    """``value`` checked against ``shape``: the same value, its structures without null members."""
    kind = shape["type"]
    if kind == "structure":
        if not isinstance(value, dict):
            raise _wrong_type(where, "an object")
        inner = f"{where}." if where else ""
        for member in shape.get("required", []):
            if value.get(member) is None:
                raise _null(inner + member)
        # Members outside the model are dropped too: AWS ignores them, and no handler may read one unchecked.
        return {member: _check(shapes, shapes[spec["shape"]], value[member], inner + member)
                for member, spec in shape["members"].items() if value.get(member) is not None}
    elif kind == "string":
        if not isinstance(value, str):
            raise _wrong_type(where, "a string")
        if shape.get("sensitive") and "max" in shape:  # payloads: AWS measures bytes
            if len(value.encode()) > shape["max"]:
                raise validation(f"Value at '{where}' failed to satisfy constraint: Member must have size less "
                                 f"than or equal to {shape['max']} bytes in UTF-8 encoding")
        elif len(value) > shape.get("max", 1 << 31):  # AWS quotes the whole value (payloads aside, above)
            raise validation(f"Value '{value}' at '{where}' failed to satisfy constraint: Member must have "
                             f"length less than or equal to {shape['max']}")
        if len(value) < shape.get("min", 0):
            raise validation(f"Value '{value}' at '{where}' failed to satisfy constraint: Member must have length "
                             f"greater than or equal to {shape['min']}")
        if "enum" in shape and value not in shape["enum"]:
            raise validation(f"Value '{value}' at '{where}' failed to satisfy constraint: Member must satisfy enum "
                             f"value set: [{', '.join(shape['enum'])}]")
    elif kind in ("integer", "long"):
        if not isinstance(value, int) or isinstance(value, bool):
            raise _wrong_type(where, "an integer")
        if value > shape.get("max", 1 << 63):
            raise validation(f"Value '{value}' at '{where}' failed to satisfy constraint: Member must have value "
                             f"less than or equal to {shape['max']}")
        if value < shape.get("min", -(1 << 63)):
            raise validation(f"Value '{value}' at '{where}' failed to satisfy constraint: Member must have value "
                             f"greater than or equal to {shape['min']}")
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise _wrong_type(where, "a boolean")
    elif kind == "list":
        if not isinstance(value, list):
            raise _wrong_type(where, "an array")
        if len(value) > shape.get("max", 1 << 31):
            raise validation(f"Value at '{where}' failed to satisfy constraint: Member must have length less than "
                             f"or equal to {shape['max']}")
        items = []
        for i, item in enumerate(value):
            if item is None:
                raise _null(f"{where}.{i + 1}.member")
            items.append(_check(shapes, shapes[shape["member"]["shape"]], item, f"{where}.{i + 1}.member"))
        return items
    elif kind == "map":
        if not isinstance(value, dict):
            raise _wrong_type(where, "an object")
    elif kind == "float":
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise _wrong_type(where, "a number")
    elif kind == "timestamp" and (not isinstance(value, int | float | str) or isinstance(value, bool)):
        raise _wrong_type(where, "a timestamp")
    return value


def _null(where: str) -> AwsError:
    return validation(f"Value null at '{where}' failed to satisfy constraint: Member must not be null")


def _wrong_type(where: str, expected: str) -> AwsError:
    return AwsError("SerializationException", f"The value of '{where or 'the request'}' must be {expected}")
