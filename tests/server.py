"""The suite's way to a real ``statewright serve`` process (statewright.testing's StatewrightServer, as users' tests
get it) and what tests do with one: raw requests, waiting for an execution to close, reading a whole history.

The suite runs on parallel workers (pytest-xdist), and other runs may share the machine: ``free_port`` picks ports
at random below the kernel's ephemeral range (where no outgoing connection lands on one), and a server whose port
was taken between the pick and its bind starts again on another (``ServerProcess.start``)."""

from __future__ import annotations

import contextlib
import json
import random
import socket
import threading
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError

from statewright.testing import StatewrightServer
from statewright.testing import free_port as ephemeral_port

__all__ = ["ROLE_ARN", "ServerProcess", "free_port", "history", "raw_call", "redrive_through_a_kill", "wait_closed"]

ROLE_ARN = "arn:aws:iam::123456789012:role/statewright-test"
PORTS_FIRST = 10_000  # the suite's ports: from here up to the ephemeral range
PORT_PICKS_MAX = 1_000
START_TRIES = 3  # a server started on a port taken meanwhile starts again on another, up to this many times
START_TIMEOUT_S = 30.0
SERVING = (b"statewright: data in ", b'"event": "store"')  # what serve logs once it listens, as text or JSON
_pick = random.SystemRandom()


def _ephemeral_first() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


_PORTS_END = _ephemeral_first()


def free_port() -> int:
    """A port nothing on 127.0.0.1 is bound to, drawn at random from below the ephemeral range (the kernel's own
    pick where that range is unknown or too low)."""
    if _PORTS_END <= PORTS_FIRST + 1_000:
        return ephemeral_port()
    for _ in range(PORT_PICKS_MAX):
        port = _pick.randrange(PORTS_FIRST, _PORTS_END)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    return ephemeral_port()


class ServerProcess(StatewrightServer):
    """The shipped test server (statewright.testing), on a port from ``free_port`` unless one is given; a first
    start that finds its chosen port taken (another worker's server got there between the pick and the bind) starts
    again on a new one. A given port, or a restart, keeps its port."""

    def __init__(self, data_dir: Path, shards: int = 8, extra_args: tuple[str, ...] = (), port: int | None = None,
                 env: dict[str, str] | None = None) -> None:
        super().__init__(data_dir, shards, extra_args, port or free_port(), env)
        self._may_move = port is None

    def start(self) -> ServerProcess:
        for tries_left in reversed(range(START_TRIES)):
            logged = self.log_path.stat().st_size if self.log_path.exists() else 0
            try:
                super().start()
                self._wait_serving(logged)  # the port answering may be someone else's server
            except RuntimeError:
                if not (self._may_move and tries_left and self._port_taken(logged)):
                    raise
                self.port = free_port()
                self.endpoint = f"http://127.0.0.1:{self.port}"
                continue
            break
        self._may_move = False
        return self

    def _wait_serving(self, logged: int) -> None:
        """Until this process says where its data is (it prints that once it listens), or exits (a bounded wait)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while not any(marker in self._log_since(logged) for marker in SERVING):
            if self.process.poll() is not None:
                raise RuntimeError(f"statewright exited: {self._log_since(logged).decode(errors='replace')}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"statewright never said {SERVING[0].decode()!r}; see {self.log_path}")
            time.sleep(0.02)

    def _port_taken(self, logged: int) -> bool:
        return b"Address already in use" in self._log_since(logged)

    def _log_since(self, logged: int) -> bytes:
        with open(self.log_path, "rb") as log:
            log.seek(logged)
            return log.read()


def raw_call(server: ServerProcess, target: str | None, body: bytes | None, method: str = "POST",
             headers: dict[str, str] | None = None, path: str = "/") -> tuple[int, dict]:
    """One request as bytes on the wire, past boto3's own checks; (status, parsed JSON body)."""
    sent = {"Content-Type": "application/x-amz-json-1.0", **(headers or {})}
    if target:
        sent["X-Amz-Target"] = target
    request = urllib.request.Request(server.endpoint + path, data=body, headers=sent, method=method)
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


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


def redrive_through_a_kill(server: ServerProcess, executions: list[str], kill_after_s: float,
                           ) -> tuple[dict[str, object], dict[str, str]]:
    """Redrive every execution, four at a time, each with a clientToken of its own, while the server is killed with
    SIGKILL after ``kill_after_s``; then start it again. Returns the redrives answered before the kill (their
    redriveDate, by ARN) and the tokens, with which a client repeats what it did not hear back."""
    answered: dict[str, object] = {}
    tokens = {arn: str(uuid.uuid4()) for arn in executions}

    def redrive(arn: str) -> None:
        with contextlib.suppress(BotoCoreError, ClientError):  # the server died under it: outcome unknown
            answered[arn] = server.client().redrive_execution(executionArn=arn, clientToken=tokens[arn])[
                "redriveDate"]

    killer = threading.Timer(kill_after_s, server.kill)
    killer.start()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(redrive, executions))
    killer.join()
    server.kill()
    server.start()
    return answered, tokens
