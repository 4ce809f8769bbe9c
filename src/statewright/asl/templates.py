"""Payload templates (Parameters, and later ResultSelector and ItemSelector): JSON whose ``key.$`` fields are
replaced by what a path selects or by the value of an intrinsic function (``States.Format(...)``). Compiled once
per definition into a tree of literals, paths and intrinsics."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from .errors import RUNTIME, StatesError
from .intrinsics import Intrinsic, IntrinsicSyntaxError, compile_intrinsic
from .jsonio import dumps
from .nodes import ArrayNode, ObjectNode
from .paths import Path, PathSyntaxError


class Template:
    """A compiled payload template; ``render`` builds a fresh value for one state input."""

    __slots__ = ("_node",)

    def __init__(self, raw: Any) -> None:
        self._node = _compile(raw, "")

    def render(self, data: Any, context: Any, seed: bytes | Callable[[], bytes] = b"") -> Any:
        """``seed`` feeds the randomness of States.UUID and States.MathRandom (a callable is asked only when an
        intrinsic field needs it); each intrinsic field mixes in its own location, so two UUID fields of one
        template differ while a replay gives the same values."""
        return _render(self._node, data, context, seed)


class _IntrinsicField:
    __slots__ = ("intrinsic", "location")

    def __init__(self, intrinsic: Intrinsic, location: str) -> None:
        self.intrinsic = intrinsic
        self.location = location.encode()

    def seed(self, seed: bytes) -> bytes:
        # Length-prefixed, so (seed, location) pairs never collide.
        return hashlib.blake2b(len(seed).to_bytes(8, "big") + seed + self.location, digest_size=32).digest()


def _compile(raw: Any, where: str) -> Any:
    if isinstance(raw, dict):
        fields = []
        for key, value in raw.items():
            if key.endswith(".$"):
                fields.append((key[:-2], _compile_dynamic(value, f"{where}/{key}")))
            else:
                fields.append((key, _compile(value, f"{where}/{key}")))
        return ObjectNode(fields)
    if isinstance(raw, list):
        return ArrayNode([_compile(item, f"{where}[{i}]") for i, item in enumerate(raw)])
    return raw


def compile_dynamic(value: Any, where: str) -> Path | Intrinsic:
    """A ``.$`` value (or ErrorPath, CausePath): a path or an intrinsic function; both have ``evaluate``."""
    if not isinstance(value, str):
        raise PathSyntaxError(f"the value of field '{where}' must be a path string")
    if value.startswith("States."):
        try:
            return compile_intrinsic(value)
        except IntrinsicSyntaxError as exc:
            raise PathSyntaxError(f"the value of field '{where}' is not a valid intrinsic function: {exc}") from None
    return Path(value)


def _compile_dynamic(value: Any, where: str) -> Path | _IntrinsicField:
    compiled = compile_dynamic(value, where)
    return _IntrinsicField(compiled, where) if isinstance(compiled, Intrinsic) else compiled


def _render(node: Any, data: Any, context: Any, seed: bytes) -> Any:
    if isinstance(node, ObjectNode):
        rendered = {}
        for key, value in node.fields:
            if isinstance(value, Path):
                try:
                    rendered[key] = value.resolve(data, context)
                except StatesError:
                    raise StatesError(RUNTIME, f"The JSONPath '{value.text}' specified for the field '{key}.$' "
                                      f"could not be found in the input '{dumps(data)}'") from None
            elif isinstance(value, _IntrinsicField):
                rendered[key] = value.intrinsic.evaluate(data, context, value.seed(seed() if callable(seed) else seed))
            else:
                rendered[key] = _render(value, data, context, seed)
        return rendered
    if isinstance(node, ArrayNode):
        return [_render(item, data, context, seed) for item in node.items]
    return node
