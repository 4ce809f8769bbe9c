from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

from aws import ACCOUNT, LocalFunction, server_env, start_moto
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


def _function_answer(path: str, payload, number: int) -> tuple[int, object]:
    if path == "/greet":
        return 200, {"greeting": f"hello {payload.get('name')}"}
    if path == "/flaky" and number == 1:
        return 200, {"errorType": "FlakyError", "errorMessage": "first call fails", "stackTrace": []}
    if path == "/flaky":
        return 200, {"ok": number}
    if path == "/broken":
        return 500, {"message": "the handler crashed"}
    if path == "/slow":
        time.sleep(2)
        return 200, {"slow": True}
    return 200, payload  # /legacy echoes


@pytest.fixture(scope="session")
def moto():
    """moto's server, the AWS endpoint of the tests that call AWS; its URL."""
    server, endpoint = start_moto()
    yield endpoint
    server.stop()


@pytest.fixture(scope="session")
def functions():
    local = LocalFunction(_function_answer)
    yield local
    local.close()


@pytest.fixture(scope="session")
def aws_server(tmp_path_factory, moto, functions):
    """A server whose AWS endpoint is moto's, with the functions of _function_answer at local URLs."""
    directory = tmp_path_factory.mktemp("aws")
    mapping = {name: f"{functions.url}/{name}" for name in ("greet", "flaky", "broken", "slow")}
    mapping[f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:legacy"] = f"{functions.url}/legacy"
    (directory / "functions.json").write_text(json.dumps(mapping))
    process = ServerProcess(directory / "data", extra_args=("--functions", str(directory / "functions.json")),
                            env=server_env(moto)).start()
    yield process
    process.stop()
