"""The processes a benchmark measures: statewright on a temporary data directory (or a fresh PostgreSQL database)
and moto's server.

Each is a child process on a free loopback port. CPU time and memory come from /proc (all threads of the
process), so what is measured is the server alone, not the load generator.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import psycopg
from psycopg import sql

from statewright.testing.server import free_port, kill, stop

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
ROOT = Path(__file__).resolve().parent.parent


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of every thread of ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def process_memory(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM (peak RSS) and RssAnon (the heap's share of RSS, without mapped files) in bytes."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM", "RssAnon"):
            found[name] = int(value.split()[0]) * 1024
    return found


def post(port: int, operation: str, params: dict, timeout_s: float = 5) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        connection.request("POST", "/", orjson.dumps(params), {
            "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AWSStepFunctions.{operation}",
            "Authorization": "AWS4-HMAC-SHA256 Credential=bench/20240101/us-east-1/states/aws4_request, "
                             "SignedHeaders=host, Signature=0"})
        response = connection.getresponse()
        body = response.read()
        return response.status, orjson.loads(body) if body else {}
    finally:
        connection.close()


_AUTH_REFUSALS = ("MissingAuthenticationTokenException", "IncompleteSignatureException",
                  "UnrecognizedClientException", "InvalidSignatureException")


class Child:
    name = "child"

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def _spawn(self, argv: list[str], env: dict | None = None) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}, cwd=ROOT)
        log.close()

    def wait_serving(self, deadline_s: float = 120) -> float:
        """Seconds until ListStateMachines answers 200 (counted from the call)."""
        started = time.monotonic()
        while time.monotonic() - started < deadline_s:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited; see {self.log_path}")
            try:
                status, answer = post(self.port, "ListStateMachines", {}, timeout_s=2)
                # --auth sigv4 refuses the probe's placeholder signature once it serves
                if status == 200 or str(answer.get("__type", "")).endswith(_AUTH_REFUSALS):
                    return time.monotonic() - started
            except OSError:
                pass
            time.sleep(0.01)
        raise RuntimeError(f"{self.name} did not serve within {deadline_s} s; see {self.log_path}")

    def cpu_s(self) -> float:
        return process_cpu_s(self.pid)

    def memory(self) -> dict[str, int]:
        return process_memory(self.pid)

    def kill(self) -> None:
        kill(self.process)

    def stop(self) -> None:
        stop(self.process, 30)


class Statewright(Child):
    name = "statewright"

    def __init__(self, data_dir: Path, shards: int = 64, profile_dir: Path | None = None,
                 postgres: str | None = None, extra_args: tuple[str, ...] = ()) -> None:
        """``postgres``: the URL of a PostgreSQL server; the store is then a fresh database there (see
        ``drop_databases``) instead of SQLite in ``data_dir``. ``extra_args``: more ``serve`` options."""
        super().__init__(data_dir.parent / f"{data_dir.name}.log")
        self.extra_args = extra_args
        self.data_dir = data_dir
        self.shards = shards
        self.profile_dir = profile_dir
        self.postgres = postgres
        self.database = database_name(data_dir.name)
        self.store: str | None = None

    def start(self) -> float:
        """Start (or restart on the same data); returns seconds from spawn to serving."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.postgres and self.store is None:
            with psycopg.connect(self.postgres, autocommit=True) as admin:
                admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.database)))
            self.store = str(urlsplit(self.postgres)._replace(path=f"/{self.database}").geturl())
        spawned = time.monotonic()
        serve = ["serve", "--port", str(self.port), "--data-dir", str(self.data_dir), "--shards", str(self.shards)]
        if self.store:
            serve += ["--store", self.store, "--cluster-secret", "bench"]
        serve += self.extra_args
        if self.profile_dir is None:
            self._spawn([sys.executable, "-m", "statewright", *serve])
        else:
            self._spawn([sys.executable, "-m", "bench.profiled", str(self.profile_dir), *serve])
        self.wait_serving()
        return time.monotonic() - spawned

    def stop(self) -> None:
        if self.profile_dir is not None and self.process and self.process.poll() is None:
            # uvicorn re-raises SIGTERM after its graceful shutdown, which would skip writing the profiles;
            # SIGINT ends in KeyboardInterrupt, so the profiler's finally blocks run.
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()
        super().stop()

    def profile_afresh(self) -> None:
        """Under ``profile_dir``: start the engine thread's profile again, leaving out what it ran so far."""
        assert self.profile_dir is not None
        self.process.send_signal(signal.SIGUSR1)

    def database_bytes(self) -> int:
        if self.store:
            with psycopg.connect(self.postgres, autocommit=True) as admin:
                return admin.execute("SELECT pg_database_size(%s)", (self.database,)).fetchone()[0]
        return sum(path.stat().st_size for path in self.data_dir.glob("statewright.db*"))

    def footprint(self) -> dict[str, tuple[int, int]]:
        """Each SQLite table's and index's (pages' bytes, the rows' own bytes), from the file and its WAL as a reader
        sees them (SQLite's dbstat); empty on PostgreSQL."""
        if self.store:
            return {}
        path = self.data_dir / "statewright.db"
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            return {name: (pages, own) for name, pages, own in
                    db.execute("SELECT name, SUM(pgsize), SUM(payload) FROM dbstat GROUP BY name ORDER BY 2 DESC")}


def database_name(label: str) -> str:
    """The database a statewright server of this run gets on PostgreSQL (one per server label)."""
    return f"statewright_bench_{os.getpid()}_{label.replace('-', '_')}"


def drop_databases(postgres: str) -> None:
    """Drop every database this run created on the PostgreSQL server at ``postgres``."""
    with psycopg.connect(postgres, autocommit=True) as admin:
        names = [row[0] for row in admin.execute("SELECT datname FROM pg_database WHERE datname LIKE %s",
                                                 (database_name("") + "%",))]
        for name in names:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


class FunctionServer(Child):
    """W10's local Lambda function (bench/function_server.py) on uvicorn, one process."""

    name = "function"

    def start(self) -> float:
        spawned = time.monotonic()
        self._spawn([sys.executable, "-m", "uvicorn", "bench.function_server:app", "--host", "127.0.0.1", "--port",
                     str(self.port), "--no-access-log", "--log-level", "warning", "--loop", "uvloop",
                     "--http", "httptools"])
        while time.monotonic() - spawned < 60:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return time.monotonic() - spawned
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"the function server did not listen; see {self.log_path}")


class Moto(Child):
    name = "moto"

    def start(self) -> float:
        spawned = time.monotonic()
        self._spawn([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)])
        self.wait_serving()
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.request("POST", "/moto-api/config", orjson.dumps({"stepfunctions": {
                "execute_state_machine": True}}), {"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            if response.status != 201 and response.status != 200:
                raise RuntimeError(f"moto refused its configuration: {response.status}")
        finally:
            connection.close()
        return time.monotonic() - spawned
