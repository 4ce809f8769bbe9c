"""The test PostgreSQL: where it is, and fresh schemas in a run's database (fixtures in conftest.py)."""

from __future__ import annotations

import os
import uuid
from urllib.parse import quote

import psycopg
from psycopg import sql

POSTGRES = os.environ.get("STATEWRIGHT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def create_schema(database: str) -> str:
    """A new, empty schema in ``database``; the URL that puts it first on the search path."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(database, autocommit=True) as db:
        db.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    return f"{database}?options={quote(f'-c search_path={name}')}"
