from __future__ import annotations

import json
import uuid

import pytest

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
