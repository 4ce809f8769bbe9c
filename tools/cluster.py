"""``./dev cluster``: several statewright nodes on one machine sharing a PostgreSQL database, for trying a cluster
out. Starts ``--nodes`` servers on consecutive ports from ``--port``, each with the other options given, waits until
every one answers, prints where they are, and stops them all on Ctrl-C (each hands its shards over). A node that
fails to start stops the others, and the launcher says which node and shows the end of its log.

The database (created if missing) is on the PostgreSQL at $STATEWRIGHT_DEV_POSTGRES (by default the local one the
tests use); the cluster secret from $STATEWRIGHT_CLUSTER_SECRET, or a fixed one for trying it out.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from psycopg import sql

STARTUP_S = 60  # a node that does not answer by then failed to start


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="./dev cluster", description="Several statewright nodes sharing one PostgreSQL database; other options "
        "(anything statewright serve takes) go to every node.")
    parser.add_argument("--nodes", type=int, default=3, help="how many nodes (default 3)")
    parser.add_argument("--port", type=int, default=8083, help="the first node's port; the others follow (default "
                                                               "8083)")
    parser.add_argument("--database", default="statewright_cluster",
                        help="the PostgreSQL database they share, created if missing (default statewright_cluster)")
    args, serve_options = parser.parse_known_args(argv)
    if args.nodes < 1:
        parser.error("--nodes must be at least 1")
    server = os.environ.get("STATEWRIGHT_DEV_POSTGRES", "postgresql://postgres@127.0.0.1:5432")
    try:
        _create_database(server, args.database)
    except psycopg.Error as exc:
        print(f"./dev cluster: cannot reach PostgreSQL at {server}: {exc}".rstrip(), file=sys.stderr)
        return 1
    os.environ.setdefault("STATEWRIGHT_CLUSTER_SECRET", "dev-cluster-secret")
    logs = Path(os.environ.get("TMPDIR", "/tmp")) / "statewright-cluster"
    logs.mkdir(parents=True, exist_ok=True)
    ports = [args.port + index for index in range(args.nodes)]
    statewright = Path(sys.executable).with_name("statewright")
    nodes: dict[int, subprocess.Popen] = {}
    for port in ports:
        with open(logs / f"node-{port}.log", "wb") as log:
            nodes[port] = subprocess.Popen(
                [str(statewright), "serve", "--store", f"{server}/{args.database}", "--port", str(port),
                 *serve_options], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    # Ctrl-C, a TERM, or a node's exit, taken in turn below (the nodes, started first, keep their own signals).
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    failed = _wait_serving(nodes)
    if failed is not None:
        port, why = failed
        print(f"./dev cluster: the node on port {port} did not start: {why}", file=sys.stderr)
        print(_tail(logs / f"node-{port}.log"), file=sys.stderr)
        _stop(nodes)
        return 1
    print(f"./dev cluster: {args.nodes} nodes on {server}/{args.database} (secret from STATEWRIGHT_CLUSTER_SECRET)")
    for port, process in nodes.items():
        print(f"  http://127.0.0.1:{port}   pid {process.pid}   log {logs}/node-{port}.log   "
              f"metrics http://127.0.0.1:{port}/metrics")
    print("Point boto3 or the AWS CLI at any of them. Ctrl-C stops them all; kill -TERM PID stops one gracefully,"
          "\nkill -9 PID crashes one (its shards move once their lease runs out).", flush=True)
    while signal.sigwait(_SIGNALS) == signal.SIGCHLD:
        gone = [port for port, process in nodes.items() if process.poll() is not None]
        if len(gone) == len(nodes):
            print(f"./dev cluster: every node has exited (see the logs in {logs})")
            return 0
        for port in gone:
            print(f"./dev cluster: the node on port {port} exited (see {logs}/node-{port}.log); the others serve "
                  "on", flush=True)
        nodes = {port: process for port, process in nodes.items() if port not in gone}
    print("./dev cluster: stopping the nodes (each hands its shards over)", flush=True)
    _stop(nodes)
    return 0


_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGCHLD}


def _create_database(server: str, name: str) -> None:
    with psycopg.connect(f"{server}/postgres", autocommit=True, connect_timeout=5) as db:
        if db.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            db.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            print(f"./dev cluster: created the database {name}")


def _wait_serving(nodes: dict[int, subprocess.Popen]) -> tuple[int, str] | None:
    """Wait until every node answers; returns the first that exited or never answered, and why (or Ctrl-C)."""
    waiting = set(nodes)
    deadline = time.monotonic() + STARTUP_S
    while waiting:
        if signal.sigpending() & {signal.SIGINT, signal.SIGTERM}:
            return min(waiting), "stopped by Ctrl-C while starting"
        for port in sorted(waiting):
            code = nodes[port].poll()
            if code is not None:
                return port, f"it exited with status {code}"
            if _answers(port):
                waiting.discard(port)
        if time.monotonic() > deadline:
            return min(waiting), f"it did not answer within {STARTUP_S} s"
        time.sleep(0.1)
    return None


def _answers(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", "/metrics")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def _stop(nodes: dict[int, subprocess.Popen]) -> None:
    for process in nodes.values():
        if process.poll() is None:
            process.terminate()
    for process in nodes.values():
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
