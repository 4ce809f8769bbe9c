"""The containers of a compiled JSON value (a Parameters template, a JSONata Output, ...): an object's fields in
order and an array's items, whose leaves are literals or whatever the compiler put there (paths, expressions)."""

from __future__ import annotations

from typing import Any


class ObjectNode:
    __slots__ = ("fields",)

    def __init__(self, fields: list[tuple[str, Any]]) -> None:
        self.fields = fields


class ArrayNode:
    __slots__ = ("items",)

    def __init__(self, items: list[Any]) -> None:
        self.items = items
