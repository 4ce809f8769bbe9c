"""What an expression sees besides the state's data: the context object ($$) and the variables ($name)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


class Scope:
    """Calling it gives the context object, built on first use (most states never read ``$$``)."""

    __slots__ = ("_build", "_context", "variables")

    def __init__(self, build: Callable[[], dict[str, Any]], variables: Mapping[str, Any]) -> None:
        self._build = build
        self._context: dict[str, Any] | None = None
        self.variables = variables

    def __call__(self) -> dict[str, Any]:
        if self._context is None:
            self._context = self._build()
        return self._context
