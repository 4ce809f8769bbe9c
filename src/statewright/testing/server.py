"""A real ``statewright serve`` process for tests: a free port on 127.0.0.1, its own data directory, its log in a
file beside it; started, killed (SIGKILL, as a crash) or stopped (SIGTERM) on demand, and clients already
pointed at it. Shipped for users' tests (the pytest plugin) and used by statewright's own."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .. import clock_client

START_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def kill(process: subprocess.Popen | None) -> None:
    """SIGKILL a child process that still runs, and reap it."""
    if process and process.poll() is None:
        process.send_signal(signal.SIGKILL)
        process.wait()


def stop(process: subprocess.Popen | None, grace_s: float) -> None:
    """SIGTERM a child process that still runs; SIGKILL it if it has not exited within ``grace_s``."""
    if process and process.poll() is None:
        process.terminate()
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            kill(process)


class StatewrightServer:
    def __init__(self, data_dir: Path, shards: int = 8, extra_args: tuple[str, ...] = (),
                 port: int | None = None, env: dict[str, str] | None = None) -> None:
        """``extra_args``: more ``statewright serve`` options, e.g. ``("--clock", "virtual")``; ``env``: variables
        added to the server's environment, e.g. ``{"AWS_ENDPOINT_URL": ...}`` for the AWS integrations."""
        self.data_dir = data_dir
        self.env = env or {}
        self.shards = shards
        self.extra_args = extra_args
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}.log"

    def start(self) -> StatewrightServer:
        """Start (or start again on the same data) and return once it listens."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child process owns it
        self.process = subprocess.Popen(
            [sys.executable, "-m", "statewright", "serve", "--port", str(self.port), "--data-dir",
             str(self.data_dir), "--shards", str(self.shards), *self.extra_args],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **self.env, "PYTHONUNBUFFERED": "1"})
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"statewright exited: {self.log_path.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"statewright did not start listening within {START_TIMEOUT_S:g} s; see {self.log_path}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as in a crash."""
        kill(self.process)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not stopped within 10 s."""
        stop(self.process, 10)

    def client(self, region: str = "us-east-1", **config: object) -> Any:
        """A boto3 Step Functions client for this server: no retries (a test sees every error), no host prefix
        (TestState and StartSyncExecution would go to ``sync-127.0.0.1``); ``config`` adds botocore options."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "stepfunctions", endpoint_url=self.endpoint, region_name=region, aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(**{"retries": {"max_attempts": 0}, "inject_host_prefix": False, **config}))

    def advance(self, duration: str) -> float:
        """Move a ``--clock virtual`` server's clock forward by ``duration`` (``30s``, ``15m``, ``36h``, ``90d``);
        returns the new time in epoch seconds."""
        return self._clock("AdvanceClock", {"by": duration})

    def now(self) -> float:
        """A ``--clock virtual`` server's time, in epoch seconds."""
        return self._clock("GetClock", {})

    def _clock(self, operation: str, body: dict) -> float:
        return clock_client.call(self.endpoint, operation, body)["now"]
