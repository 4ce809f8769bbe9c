from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

from postgres import POSTGRES, create_schema
from server import ROLE_ARN, ServerProcess


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """One real server process shared by the API tests."""
    process = ServerProcess(tmp_path_factory.mktemp("server") / "data").start()
    yield process
    process.stop()


@pytest.fixture
def sfn(server):
    return server.client()


@pytest.fixture
def make_machine(sfn):
    """Create a state machine with a unique name from a definition dict; returns its ARN."""

    def make(definition: dict, name: str | None = None) -> str:
        name = name or f"sm-{uuid.uuid4().hex[:12]}"
        return sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=ROLE_ARN)[
            "stateMachineArn"]

    return make


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """A fresh database on the test PostgreSQL for this run, dropped at the end; its URL. No PostgreSQL is a
    failure, not a skip: the PostgreSQL store is part of what the suite checks."""
    try:
        admin = psycopg.connect(POSTGRES, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise RuntimeError(f"the PostgreSQL tests need a server at {POSTGRES} (set STATEWRIGHT_TEST_POSTGRES): "
                           f"{exc}") from exc
    name = f"statewright_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlsplit(POSTGRES)._replace(path=f"/{name}").geturl()
    finally:
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.close()


@pytest.fixture
def postgres_schema(postgres_database: str) -> str:
    """The URL of an empty schema of its own in the run's database (a fresh store per test, cheaply)."""
    return create_schema(postgres_database)
