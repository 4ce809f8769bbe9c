"""Durable storage behind one interface (``base.Store``): SQLite embedded, PostgreSQL for several nodes.

Must not import statewright.engine or statewright.api.
"""

from __future__ import annotations

import os

from .base import Store

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(target: str | os.PathLike[str]) -> bool:
    return os.fspath(target).startswith(POSTGRES_SCHEMES)


def open_store(target: str | os.PathLike[str], shard_count: int | None, node_id: str | None = None) -> Store:
    """The store at ``target``: a postgresql:// (or postgres://) URL opens PostgreSQL, anything else is the path of
    a SQLite file. ``shard_count`` is fixed when the store is created; None opens an existing one as it is.
    ``node_id``: the cluster node that opens it (PostgreSQL)."""
    if is_postgres_url(target):
        from .postgresql import PostgresStore  # psycopg takes a quarter second to import: only when it is used

        return PostgresStore(os.fspath(target), shard_count, node_id)
    from .sqlite import SqliteStore

    return SqliteStore(target, shard_count)
