"""What --auth sigv4 costs a request: the signature check alone, and a whole request's server CPU beside --auth open.

    bench/.venv/bin/python -m bench.sigv4_cost [REQUESTS]   (default 4,000 per server and round)

1. ``sigv4.verify`` on a StartExecution request as boto3 signs it, timed in this process (the median of 5 runs of
   2,000), beside ``OpenDoor.admit`` (today's default: a regular expression over the Authorization header).
2. Two servers on this machine, one ``--auth open`` and one ``--auth sigv4 --limits local`` (no rate buckets, so
   only the check differs), each sent REQUESTS DescribeStateMachine calls by 4 boto3 threads, in two alternated
   rounds: the server process's CPU time (user + system, from /proc) per request. The peer is the open server.
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from statewright.api import sigv4
from statewright.api.accounts import Accounts
from statewright.api.auth import OpenDoor

KEY = ("AKIABENCH0000000001", "bench-secret")
ACCOUNTS = {"accounts": [{"accountId": "111111111111", "keys": [{"accessKeyId": KEY[0], "secretAccessKey": KEY[1]}]}]}
ROLE = "arn:aws:iam::111111111111:role/bench"
PORTS = {"open": 18971, "sigv4": 18972}
THREADS = 4


def micro(folder: Path) -> tuple[float, float]:
    """Microseconds per check: (sigv4.verify, OpenDoor.admit)."""
    path = folder / "accounts.json"
    path.write_text(json.dumps(ACCOUNTS))
    accounts = Accounts(path)
    body = json.dumps({"stateMachineArn": "arn:aws:states:us-east-1:111111111111:stateMachine:orders",
                       "input": json.dumps({"order": 1, "items": list(range(20))})}).encode()
    request = AWSRequest(method="POST", url="http://127.0.0.1:8083/", data=body, headers={
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AWSStepFunctions.StartExecution",
        "Host": "127.0.0.1:8083", "User-Agent": "Boto3/1.x"})
    SigV4Auth(Credentials(*KEY), "states", "us-east-1").add_auth(request)
    headers = [(name.lower().encode(), value.encode()) for name, value in request.headers.items()]
    now = datetime.datetime.now(datetime.UTC).timestamp()
    door = OpenDoor("111111111111", "us-east-1")

    def per_call(check) -> float:
        runs = []
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(2_000):
                check()
            runs.append((time.perf_counter() - started) / 2_000 * 1e6)
        return statistics.median(runs)

    return (per_call(lambda: sigv4.verify(accounts, "POST", b"/", b"", headers, body, now)),
            per_call(lambda: door.admit("POST", b"/", b"", headers, body)))


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve(mode: str, folder: Path) -> subprocess.Popen:
    args = [sys.executable, "-m", "statewright", "serve", "--port", str(PORTS[mode]), "--data-dir",
            str(folder / f"data-{mode}"), "--shards", "4"]
    if mode == "sigv4":
        args += ["--auth", "sigv4", "--accounts", str(folder / "accounts.json"), "--limits", "local"]
    log = (folder / f"{mode}.log").open("wb")
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while b"serving the Step Functions API" not in (folder / f"{mode}.log").read_bytes():
        if time.monotonic() > deadline or process.poll() is not None:
            raise SystemExit(f"the {mode} server did not start: see {folder / f'{mode}.log'}")
        time.sleep(0.1)
    return process


def client(mode: str):
    return boto3.client("stepfunctions", endpoint_url=f"http://127.0.0.1:{PORTS[mode]}", region_name="us-east-1",
                        aws_access_key_id=KEY[0], aws_secret_access_key=KEY[1],
                        config=Config(retries={"max_attempts": 0}, max_pool_connections=THREADS))


def round_trip(mode: str, process: subprocess.Popen, machine: str, requests: int) -> tuple[float, float]:
    """(server CPU µs per request, requests per second) for ``requests`` DescribeStateMachine calls."""
    clients = [client(mode) for _ in range(THREADS)]
    for sfn in clients:
        sfn.describe_state_machine(stateMachineArn=machine)  # connections open, caches warm

    def work(sfn) -> None:
        for _ in range(requests // THREADS):
            sfn.describe_state_machine(stateMachineArn=machine)

    cpu, started = _cpu_s(process.pid), time.perf_counter()
    threads = [threading.Thread(target=work, args=(sfn,)) for sfn in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    done = requests // THREADS * THREADS
    return (_cpu_s(process.pid) - cpu) / done * 1e6, done / wall


def main() -> None:
    requests = int(sys.argv[1]) if len(sys.argv) > 1 else 4_000
    with tempfile.TemporaryDirectory(prefix="sigv4-cost-") as scratch:
        folder = Path(scratch)
        verify_us, open_us = micro(folder)
        print(f"check alone: sigv4.verify {verify_us:.1f} us, OpenDoor.admit {open_us:.1f} us per request")
        servers = {mode: serve(mode, folder) for mode in PORTS}
        try:
            machines = {mode: client(mode).create_state_machine(
                name="orders", roleArn=ROLE, definition=json.dumps(
                    {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}))["stateMachineArn"]
                for mode in PORTS}
            results: dict[str, list[tuple[float, float]]] = {mode: [] for mode in PORTS}
            for _ in range(2):
                for mode in PORTS:
                    results[mode].append(round_trip(mode, servers[mode], machines[mode], requests))
            for mode, rounds in results.items():
                cpu = " / ".join(f"{us:.0f}" for us, _ in rounds)
                rate = " / ".join(f"{per_s:,.0f}" for _, per_s in rounds)
                print(f"--auth {mode:5}: server CPU {cpu} us per DescribeStateMachine, {rate} requests/s "
                      f"({THREADS} threads, {requests:,} requests a round)")
            extra = statistics.mean(us for us, _ in results["sigv4"]) - statistics.mean(us for us, _ in results["open"])
            print(f"sigv4 adds {extra:.0f} us of server CPU per request")
        finally:
            for process in servers.values():
                process.terminate()
                process.wait(30)


if __name__ == "__main__":
    main()
