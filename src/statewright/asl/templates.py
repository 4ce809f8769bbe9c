"""Payload templates (Parameters, and later ResultSelector and ItemSelector): JSON whose ``key.$`` fields are
replaced by what a path selects. Compiled once per definition into a tree of literals and paths."""

from __future__ import annotations

from typing import Any

from .errors import RUNTIME, StatesError
from .jsonio import dumps
from .paths import Path, PathSyntaxError


class Template:
    """A compiled payload template; ``render`` builds a fresh value for one state input."""

    __slots__ = ("_node",)

    def __init__(self, raw: Any) -> None:
        self._node = _compile(raw, "")

    def render(self, data: Any, context: Any) -> Any:
        return _render(self._node, data, context)


class _Object:
    __slots__ = ("fields",)

    def __init__(self, fields: list[tuple[str, Any]]) -> None:
        self.fields = fields


class _Array:
    __slots__ = ("items",)

    def __init__(self, items: list[Any]) -> None:
        self.items = items


def _compile(raw: Any, where: str) -> Any:
    if isinstance(raw, dict):
        fields = []
        for key, value in raw.items():
            if key.endswith(".$"):
                if not isinstance(value, str):
                    raise PathSyntaxError(f"the value of field '{where}/{key}' must be a path string")
                fields.append((key[:-2], Path(value)))
            else:
                fields.append((key, _compile(value, f"{where}/{key}")))
        return _Object(fields)
    if isinstance(raw, list):
        return _Array([_compile(item, f"{where}[{i}]") for i, item in enumerate(raw)])
    return raw


def _render(node: Any, data: Any, context: Any) -> Any:
    if isinstance(node, _Object):
        rendered = {}
        for key, value in node.fields:
            if isinstance(value, Path):
                try:
                    rendered[key] = value.resolve(data, context)
                except StatesError:
                    raise StatesError(RUNTIME, f"The JSONPath '{value.text}' specified for the field '{key}.$' "
                                      f"could not be found in the input '{dumps(data)}'") from None
            else:
                rendered[key] = _render(value, data, context)
        return rendered
    if isinstance(node, _Array):
        return [_render(item, data, context) for item in node.items]
    return node
