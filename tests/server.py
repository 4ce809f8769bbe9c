"""A real ``statewright serve`` process for tests: started on a free port with its own data directory."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import boto3
from botocore.config import Config

ROLE_ARN = "arn:aws:iam::123456789012:role/statewright-test"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def raw_call(server: ServerProcess, target: str | None, body: bytes | None, method: str = "POST",
             headers: dict[str, str] | None = None) -> tuple[int, dict]:
    """One request as bytes on the wire, past boto3's own checks; (status, parsed JSON body)."""
    sent = {"Content-Type": "application/x-amz-json-1.0", **(headers or {})}
    if target:
        sent["X-Amz-Target"] = target
    request = urllib.request.Request(server.endpoint + "/", data=body, headers=sent, method=method)
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


class ServerProcess:
    def __init__(self, data_dir: Path, shards: int = 8, extra_args: tuple[str, ...] = (),
                 port: int | None = None) -> None:
        self.data_dir = data_dir
        self.shards = shards
        self.extra_args = extra_args
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}.log"

    def start(self) -> ServerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child process owns it
        self.process = subprocess.Popen(
            [sys.executable, "-m", "statewright", "serve", "--port", str(self.port), "--data-dir",
             str(self.data_dir), "--shards", str(self.shards), *self.extra_args],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"statewright exited: {self.log_path.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("statewright did not start listening within 30 s")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as in a crash."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def client(self, region: str = "us-east-1", **config: object):
        return boto3.client(
            "stepfunctions", endpoint_url=self.endpoint, region_name=region, aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(**{"retries": {"max_attempts": 0}, "inject_host_prefix": False, **config}))


def wait_closed(client, execution_arn: str, deadline_s: float = 30) -> dict:
    """DescribeExecution until the execution leaves RUNNING (a bounded wait, not a timing assertion)."""
    deadline = time.monotonic() + deadline_s
    while True:
        described = client.describe_execution(executionArn=execution_arn)
        if described["status"] != "RUNNING" or time.monotonic() > deadline:
            return described
        time.sleep(0.05)


def history(client, execution_arn: str, **options: object) -> list[dict]:
    """The whole history, following nextToken."""
    events, token = [], None
    while True:
        page = client.get_execution_history(executionArn=execution_arn, **options,
                                            **({"nextToken": token} if token else {}))
        events += page["events"]
        token = page.get("nextToken")
        if not token:
            return events
