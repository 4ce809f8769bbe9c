"""What differs between SQLite's and PostgreSQL's SQL where the two stores share statements: how parameters are
written and how a row is locked for the rest of a transaction. Upserts need nothing here: both speak
``INSERT ... ON CONFLICT`` (SQLite since 3.24). How a store obtains a connection and a transaction is the store's own
(``sql_catalogue.SqlCatalogue``'s two hooks); ``Connection`` is what shared code may call on the one it gets.

Invariant: a statement written once with ``?`` placeholders means the same on both after ``Dialect.sql``; no
statement holds a literal ``?`` or ``%``. Imports nothing of statewright.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class Cursor(Protocol):
    rowcount: int

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def executemany(self, sql: str, params_seq: Sequence[Sequence[Any]]) -> Any: ...


class Connection(Protocol):
    """The part of a DB-API connection (sqlite3's, psycopg's) that shared statements use."""

    def execute(self, sql: str, params: Sequence[Any] = ...) -> Cursor: ...

    def cursor(self) -> Cursor: ...


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str
    placeholder: str  # how a parameter is written
    lock_row: str  # appended to a SELECT that locks the rows it reads until the transaction ends
    _translated: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def sql(self, statement: str) -> str:
        """``statement``, written with ``?`` placeholders, in this dialect (translated once per statement)."""
        translated = self._translated.get(statement)
        if translated is None:
            translated = self._translated[statement] = statement.replace("?", self.placeholder)
        return translated


# SQLite: every write transaction is BEGIN IMMEDIATE, which already serializes it with every other write.
SQLITE = Dialect("sqlite", "?", "")
POSTGRESQL = Dialect("postgresql", "%s", " FOR UPDATE")
