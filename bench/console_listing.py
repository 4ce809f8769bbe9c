"""The console at size: a state machine with N executions, listed through the API and shown by the console.

    .venv/bin/python -m bench.console_listing [N]   (the test venv: Playwright; default 10,000,000: ~10 min, 14 GB)

One real execution is run, then copied N times straight into the SQLite data directory with the server stopped (no
engine could start ten million executions in a benchmark's time), then the server is started on it. Prints the
time of ListExecutions' first pages and of the console's state machine page showing its first 100 executions, in
Debian's Chromium (the console's tests drive the same). The peer here is the first page of ListExecutions itself.
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import boto3

PORT = 18995
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run"]


STARTED: list[subprocess.Popen] = []  # killed at the end, however the run ends


def serve(data: Path, log: Path) -> subprocess.Popen:
    logged = log.stat().st_size if log.exists() else 0
    process = subprocess.Popen([sys.executable, "-m", "statewright", "serve", "--port", str(PORT), "--data-dir",
                                str(data), "--shards", "8"], stdout=log.open("ab"), stderr=subprocess.STDOUT)
    STARTED.append(process)
    deadline = time.monotonic() + 120
    while b"serving the Step Functions API" not in log.read_bytes()[logged:]:
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the server did not start:\n" + log.read_bytes()[logged:].decode(errors="replace"))
        time.sleep(0.1)
    return process


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(120)


def copy_executions(database: Path, name: str, n: int) -> float:
    """Copy the execution ``name`` n times (closed just now, so retention keeps them); returns the seconds taken."""
    db = sqlite3.connect(database)
    columns = [row[1] for row in db.execute("PRAGMA table_info(executions)")]
    real = dict(zip(columns, db.execute("SELECT * FROM executions WHERE name = ?", (name,)).fetchone(), strict=True))
    prefix = real["arn"].rsplit(":", 1)[0]
    now_ms = int(time.time() * 1000)

    def rows():
        for i in range(n):
            row = {**real, "arn": f"{prefix}:e{i:08d}", "name": f"e{i:08d}", "start_ms": now_ms - n + i,
                   "stop_ms": now_ms - n + i + 1}
            yield tuple(row[column] for column in columns)
    started = time.monotonic()
    with db:
        db.executemany(f"INSERT INTO executions ({','.join(columns)}) VALUES ({','.join('?' * len(columns))})",
                       rows())
    db.close()
    return time.monotonic() - started


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
    work = Path(tempfile.mkdtemp(prefix="statewright-console-listing-"))
    data, log = work / "data", work / "server.log"
    client = boto3.client("stepfunctions", endpoint_url=f"http://127.0.0.1:{PORT}", region_name="us-east-1",
                          aws_access_key_id="bench", aws_secret_access_key="bench")
    try:
        server = serve(data, log)
        machine = client.create_state_machine(name="many", roleArn="arn:aws:iam::123456789012:role/bench",
                                              definition=json.dumps({"StartAt": "P", "States": {
                                                  "P": {"Type": "Pass", "End": True}}}))["stateMachineArn"]
        client.start_execution(stateMachineArn=machine, name="real-one")
        time.sleep(1)
        stop(server)
        print(f"{n:,} executions copied in {copy_executions(data / 'statewright.db', 'real-one', n):.0f} s", flush=True)
        server = serve(data, log)
        for _ in range(3):
            started = time.monotonic()
            page = client.list_executions(stateMachineArn=machine, maxResults=100)
            print(f"ListExecutions, first page: {(time.monotonic() - started) * 1000:.1f} ms")
        started = time.monotonic()
        client.list_executions(stateMachineArn=machine, maxResults=100, nextToken=page["nextToken"])
        print(f"ListExecutions, second page: {(time.monotonic() - started) * 1000:.1f} ms")
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_FLAGS)
            tab = browser.new_page()
            for attempt in ("fresh browser, cold database", "again"):
                started = time.monotonic()
                tab.goto(f"http://127.0.0.1:{PORT}/#/state-machine/{quote(machine, safe='')}")
                tab.wait_for_selector('[data-testid="execution-list"] tbody tr')
                print(f"console page with its first 100 executions ({attempt}): {time.monotonic() - started:.2f} s")
                tab.goto("about:blank")
            browser.close()
        stop(server)
        print(f"database: {(data / 'statewright.db').stat().st_size / 1e9:.1f} GB")
    finally:
        for process in STARTED:
            process.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
