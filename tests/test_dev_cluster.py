"""``./dev cluster`` (tools/cluster.py): the nodes asked for, on the ports and database asked for, stopped together
on Ctrl-C; a node that cannot start is named and the others stopped. Real processes on the test PostgreSQL."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import boto3
import psycopg
import pytest
from botocore.config import Config
from psycopg import sql

from postgres import POSTGRES

pytestmark = pytest.mark.slow  # real server processes: not in the fast tier

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def database() -> Iterator[str]:
    """A database name for the cluster to create; dropped afterwards."""
    name = f"statewright_devcluster_{uuid.uuid4().hex[:8]}"
    yield name
    with psycopg.connect(POSTGRES, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def two_free_ports() -> int:
    """A port whose next one is free too."""
    while True:
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
        return port


def launch(port: int, database: str) -> subprocess.Popen:
    server = urlsplit(POSTGRES)._replace(path="").geturl()
    return subprocess.Popen([str(ROOT / "dev"), "cluster", "--nodes", "2", "--port", str(port), "--database",
                             database, "--shards", "8"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "STATEWRIGHT_DEV_POSTGRES": server})


def client(port: int):
    return boto3.client("stepfunctions", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test",
                        config=Config(retries={"max_attempts": 0}))


def test_the_nodes_asked_for_serve_on_their_ports_and_stop_together_on_ctrl_c(database):
    port = two_free_ports()
    launcher = launch(port, database)
    try:
        banner = [launcher.stdout.readline() for _ in range(5)]
        assert any("2 nodes on" in line and database in line for line in banner), banner
        machine = client(port).create_state_machine(
            name="seen-by-both", roleArn="arn:aws:iam::123456789012:role/r",
            definition='{"StartAt": "P", "States": {"P": {"Type": "Pass", "End": true}}}')["stateMachineArn"]
        assert client(port + 1).describe_state_machine(stateMachineArn=machine)["name"] == "seen-by-both"
        launcher.send_signal(signal.SIGINT)
        launcher.communicate(timeout=90)
        assert launcher.returncode == 0
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.communicate()
    for node in (port, port + 1):
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", node)) != 0  # nothing serves there any more


def test_a_node_that_cannot_start_is_named_and_the_others_stopped(database):
    port = two_free_ports()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port + 1))
        taken.listen()
        launcher = launch(port, database)
        _, errors = launcher.communicate(timeout=120)
    assert launcher.returncode == 1
    assert f"the node on port {port + 1} did not start" in errors
    assert "Address already in use" in errors
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
