"""What differs between SQLite's and PostgreSQL's SQL where the two stores share statements: how parameters are
written, how rows read are locked for the rest of a transaction, and how "differs, NULL included" is spelled.
Upserts need nothing here: both speak ``INSERT ... ON CONFLICT`` (SQLite since 3.24). ``SqlBackend`` is how shared
code reaches a store's database: the store's dialect, connections and transactions, through three hooks each
backend implements; ``Connection`` is what shared code may call on a connection it gets.

Invariant: a statement written once with ``?`` placeholders means the same on both after ``Dialect.sql``; no
shared statement holds a literal ``?`` or ``%``. Imports nothing of statewright.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol


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
    share_row: str  # the same, for a shared lock (the shard rows a commit reads)
    distinct: str  # "differs from", NULL a value like any other
    meta_exists: str  # a query with a row if the database has the meta table (schema.migrate)
    _translated: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def sql(self, statement: str) -> str:
        """``statement``, written with ``?`` placeholders, in this dialect (translated once per statement)."""
        translated = self._translated.get(statement)
        if translated is None:
            translated = self._translated[statement] = statement.replace("?", self.placeholder)
        return translated


# SQLite: every write transaction is BEGIN IMMEDIATE, which already serializes it with every other write.
SQLITE = Dialect("sqlite", "?", "", "", "IS NOT", "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'")
POSTGRESQL = Dialect("postgresql", "%s", " FOR UPDATE", " FOR SHARE", "IS DISTINCT FROM",
                     "SELECT 1 WHERE to_regclass('meta') IS NOT NULL")


class SqlBackend(ABC):
    """A store's database as the statements shared by both stores reach it."""

    _dialect: ClassVar[Dialect]

    def _open(self, shard_count: int | None) -> None:
        """``_initialize`` the database (migrate it, settle its shard count); if that fails, ``close`` what was
        opened and raise."""
        try:
            self._initialize(shard_count)
        except BaseException:
            self.close()
            raise

    @abstractmethod
    def _initialize(self, shard_count: int | None) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """The rows of one read, in a transaction of its own; StoreUnavailable if the database cannot answer."""

    @abstractmethod
    def _write(self) -> AbstractContextManager[Connection]:
        """A write transaction, committed when the block ends and rolled back if it raises; StoreUnavailable if
        the database cannot write (nothing written)."""

    def _metadata_write(self) -> AbstractContextManager[Connection]:
        """``_write`` for the catalogue (a store may refuse it more often: see SqliteStore)."""
        return self._write()

    def _read(self, statement: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self._rows(self._dialect.sql(statement), params)

    def _run(self, db: Connection, statement: str, params: Sequence[Any] = ()) -> Cursor:
        return db.execute(self._dialect.sql(statement), params)
