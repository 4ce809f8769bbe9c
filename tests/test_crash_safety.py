"""Crash safety against a real server process.

A mixed workload (Pass/Choice chains, short Waits, a Choice into a Fail state) runs against a real
``statewright serve`` process that is killed with SIGKILL several times at random moments and restarted on the
same data directory. Afterwards every execution whose StartExecution returned 200 has completed exactly once
with the right output, every history is gapless with no duplicated events, and nothing is stuck. Starts whose
outcome the client never learned (the server died under them) may or may not exist; if they exist, they too
must be correct.

The schedule and the inputs come from one seed (the ``crash_seed`` fixture), printed with a failure;
``STATEWRIGHT_CRASH_SEED=<seed>`` replays it (thread interleavings and kill moments still vary, so a replay is a
strong hint, not a guarantee).
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from server import ROLE_ARN, ServerProcess
from statewright.sim.checkers import history_problems

pytestmark = pytest.mark.slow  # a real server killed again and again: not in the fast tier

LOAD_THREADS = 4
KILLS = 5
SHARDS = 4
DRAIN_DEADLINE_S = 30.0

# -- the state machines, and what each should do with a given input (computed here, independently of the engine)

CHAIN = {
    "Comment": "Pass/Choice chain whose output depends on its input and on the execution name",
    "StartAt": "Init",
    "States": {
        "Init": {"Type": "Pass", "Parameters": {"n.$": "$.n", "id.$": "$$.Execution.Name", "tag.$": "$.tag"},
                 "ResultPath": "$.work", "Next": "Classify"},
        "Classify": {"Type": "Choice", "Choices": [
            {"Variable": "$.work.n", "NumericLessThan": 10, "Next": "Small"},
            {"And": [{"Variable": "$.work.n", "NumericGreaterThanEquals": 100},
                     {"Variable": "$.tag", "StringEquals": "x"}], "Next": "Big"},
        ], "Default": "Medium"},
        "Small": {"Type": "Pass", "Result": {"size": "small"}, "ResultPath": "$.size", "Next": "Merge"},
        "Medium": {"Type": "Pass", "InputPath": "$.work", "Parameters": {"size": "medium", "n.$": "$.n"},
                   "ResultPath": "$.size", "Next": "Merge"},
        "Big": {"Type": "Pass", "Parameters": {"size": "big", "tag.$": "$.work.tag"}, "ResultPath": "$.size",
                "Next": "Merge"},
        "Merge": {"Type": "Pass", "InputPath": "$.extra", "ResultPath": "$.work.extra", "Next": "Done"},
        "Done": {"Type": "Pass", "Parameters": {"id.$": "$.work.id", "n.$": "$.work.n", "size.$": "$.size",
                                                "extra.$": "$.work.extra"}, "End": True},
    },
}

WAITER = {
    "Comment": "A one-second Wait, then a Pass, then Succeed",
    "StartAt": "Nap",
    "States": {
        "Nap": {"Type": "Wait", "Seconds": 1, "Next": "Stamp"},
        "Stamp": {"Type": "Pass", "Parameters": {"v.$": "$.v", "who.$": "$$.Execution.Name"},
                  "ResultPath": "$.stamp", "Next": "Finish"},
        "Finish": {"Type": "Succeed", "OutputPath": "$.stamp"},
    },
}

GATE = {
    "Comment": "A Choice that fails some inputs, waits on some and accepts the rest",
    "StartAt": "Check",
    "States": {
        "Check": {"Type": "Choice", "Choices": [
            {"Variable": "$.kind", "StringEquals": "bad", "Next": "Reject"},
            {"Variable": "$.kind", "StringEquals": "slow", "Next": "Pause"},
        ], "Default": "Accept"},
        "Reject": {"Type": "Fail", "Error": "Rejected", "CausePath": "$.why"},
        "Pause": {"Type": "Wait", "SecondsPath": "$.delay", "Next": "Accept"},
        "Accept": {"Type": "Pass", "Parameters": {"p.$": "$.payload", "k.$": "$.kind"}, "ResultPath": "$.accepted",
                   "OutputPath": "$.accepted", "End": True},
    },
}


# Parallel and Map whose branches and iterations sleep, so a kill often lands while they are half done.
FANOUT = {
    "StartAt": "Fan",
    "States": {
        "Fan": {"Type": "Parallel", "ResultPath": "$.out", "End": True, "Branches": [
            {"StartAt": "Nap", "States": {
                "Nap": {"Type": "Wait", "Seconds": 1, "Next": "Echo"},
                "Echo": {"Type": "Pass", "InputPath": "$.v", "End": True}}},
            {"StartAt": "Each", "States": {
                "Each": {"Type": "Map", "ItemsPath": "$.items", "MaxConcurrency": 2, "End": True,
                         "ItemSelector": {"x.$": "$$.Map.Item.Value", "i.$": "$$.Map.Item.Index"},
                         "ItemProcessor": {"StartAt": "Doze", "States": {
                             "Doze": {"Type": "Wait", "SecondsPath": "$.x", "Next": "Sum"},
                             "Sum": {"Type": "Pass", "Parameters": {"s.$": "States.MathAdd($.x, $.i)"},
                                     "End": True}}}}}}]}}}


@dataclass(frozen=True, slots=True)
class Expected:
    status: str
    output: Any = None  # parsed JSON, for SUCCEEDED
    error: str | None = None
    cause: str | None = None
    path: tuple[tuple[str, str], ...] = ()  # (state type, state name) in the order the states are entered
    events: tuple[tuple[str, str | None], ...] = ()  # for Parallel/Map: every (type, name), in any order


def chain_input(rng: random.Random) -> dict:
    return {"n": rng.randrange(0, 200), "tag": rng.choice("xy"),
            "extra": {"k": rng.randrange(1_000_000), "s": [rng.choice("abc") for _ in range(rng.randrange(4))]}}


def chain_expected(name: str, data: dict) -> Expected:
    n, tag = data["n"], data["tag"]
    if n < 10:
        branch, size = "Small", {"size": "small"}
    elif n >= 100 and tag == "x":
        branch, size = "Big", {"size": "big", "tag": tag}
    else:
        branch, size = "Medium", {"size": "medium", "n": n}
    output = {"id": name, "n": n, "size": size, "extra": data["extra"]}
    path = (("Pass", "Init"), ("Choice", "Classify"), ("Pass", branch), ("Pass", "Merge"), ("Pass", "Done"))
    return Expected("SUCCEEDED", output, path=path)


def waiter_input(rng: random.Random) -> dict:
    return {"v": rng.randrange(1_000_000), "pad": "w" * rng.randrange(20)}


def waiter_expected(name: str, data: dict) -> Expected:
    return Expected("SUCCEEDED", {"v": data["v"], "who": name},
                    path=(("Wait", "Nap"), ("Pass", "Stamp"), ("Succeed", "Finish")))


def gate_input(rng: random.Random) -> dict:
    kind = rng.choice(["bad", "slow", "ok", "ok"])
    data: dict[str, Any] = {"kind": kind, "payload": {"q": rng.randrange(1000)}}
    if kind == "bad":
        data["why"] = f"rejected #{rng.randrange(1000)}"
    if kind == "slow":
        data["delay"] = rng.choice([0, 1])
    return data


def gate_expected(name: str, data: dict) -> Expected:
    kind = data["kind"]
    if kind == "bad":
        return Expected("FAILED", error="Rejected", cause=data["why"], path=(("Choice", "Check"), ("Fail", "Reject")))
    accepted = {"p": data["payload"], "k": kind}
    if kind == "slow":
        return Expected("SUCCEEDED", accepted, path=(("Choice", "Check"), ("Wait", "Pause"), ("Pass", "Accept")))
    return Expected("SUCCEEDED", accepted, path=(("Choice", "Check"), ("Pass", "Accept")))


def fanout_input(rng: random.Random) -> dict:
    return {"v": rng.randrange(1000), "items": [rng.choice([0, 1]) for _ in range(rng.randrange(0, 5))]}


def fanout_expected(name: str, data: dict) -> Expected:
    items = data["items"]
    output = {**data, "out": [data["v"], [{"s": x + i} for i, x in enumerate(items)]]}
    events = [("ExecutionStarted", None), ("ParallelStateEntered", "Fan"), ("ParallelStateStarted", None),
              ("WaitStateEntered", "Nap"), ("WaitStateExited", "Nap"), ("PassStateEntered", "Echo"),
              ("PassStateExited", "Echo"), ("MapStateEntered", "Each"), ("MapStateStarted", None),
              ("MapStateSucceeded", None), ("MapStateExited", "Each"), ("ParallelStateSucceeded", None),
              ("ParallelStateExited", "Fan"), ("ExecutionSucceeded", None)]
    for _ in items:
        events += [("MapIterationStarted", None), ("WaitStateEntered", "Doze"), ("WaitStateExited", "Doze"),
                   ("PassStateEntered", "Sum"), ("PassStateExited", "Sum"), ("MapIterationSucceeded", None)]
    return Expected("SUCCEEDED", output, events=tuple(events))


MACHINES = {
    "chain": (CHAIN, chain_input, chain_expected),
    "waiter": (WAITER, waiter_input, waiter_expected),
    "gate": (GATE, gate_input, gate_expected),
    "fanout": (FANOUT, fanout_input, fanout_expected),
}


def expected_events(expected: Expected) -> list[tuple[str, str | None]]:
    """The (event type, state name) sequence of a history that took ``expected.path``."""
    events: list[tuple[str, str | None]] = [("ExecutionStarted", None)]
    for state_type, name in expected.path:
        events.append((f"{state_type}StateEntered", name))
        if state_type != "Fail":
            events.append((f"{state_type}StateExited", name))
    events.append(("ExecutionSucceeded" if expected.status == "SUCCEEDED" else "ExecutionFailed", None))
    return events


# -- the harness


@dataclass(frozen=True, slots=True)
class Start:
    machine: str
    arn: str
    name: str
    input_text: str
    outcome: str  # "acked": StartExecution returned 200; otherwise what went wrong ("unknown")


def make_client(endpoint: str, session: boto3.session.Session | None = None):
    """A client on its own session by default (boto3's default session is not safe to share between threads).
    A thread that follows the server across restarts passes its session back in: a second client is cheap."""
    return (session or boto3.session.Session()).client(
        "stepfunctions", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"max_attempts": 0}, inject_host_prefix=False, connect_timeout=2, read_timeout=20))


class Current:
    """The server that is up now; load threads follow it across restarts."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        with self.lock:
            return self.server.endpoint

    def replace(self, server: ServerProcess) -> None:
        with self.lock:
            self.server = server


def load(index: int, seed: int, current: Current, machine_arns: dict[str, str], stop: threading.Event,
         starts: list[Start], surprises: list[str]) -> None:
    """One client thread: start executions with unique names as fast as the server takes them."""
    rng = random.Random(f"{seed}-{index}")
    session = boto3.session.Session()
    endpoint, client = None, None
    count = 0
    while not stop.is_set():
        if current.endpoint != endpoint:
            endpoint = current.endpoint
            client = make_client(endpoint, session)
        machine = rng.choice(["chain", "chain", "waiter", "gate", "fanout"])
        _, make_input, _ = MACHINES[machine]
        name = f"{machine}-{index}-{count}"
        count += 1
        input_text = json.dumps(make_input(rng))
        machine_arn = machine_arns[machine]
        arn = machine_arn.replace(":stateMachine:", ":execution:", 1) + ":" + name
        try:
            response = client.start_execution(stateMachineArn=machine_arn, name=name, input=input_text)
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            code = exc.response.get("Error", {}).get("Code", "?")
            if status < 500 and code not in ("ServiceUnavailable", "ThrottlingException"):
                surprises.append(f"StartExecution {name}: {status} {code}: {exc}")
            starts.append(Start(machine, arn, name, input_text, f"unknown ({status} {code})"))
            time.sleep(0.01)
            continue
        except BotoCoreError as exc:  # the connection died or was refused: the server is down or dying
            starts.append(Start(machine, arn, name, input_text, f"unknown ({type(exc).__name__})"))
            time.sleep(0.02)
            continue
        if response["executionArn"] != arn:
            surprises.append(f"StartExecution {name} answered {response['executionArn']}, expected {arn}")
        starts.append(Start(machine, arn, name, input_text, "acked"))


def list_all(sfn, machine_arn: str, status: str | None = None) -> list[dict]:
    items, token = [], None
    while True:
        kwargs: dict[str, Any] = {"stateMachineArn": machine_arn, "maxResults": 1000}
        if status:
            kwargs["statusFilter"] = status
        if token:
            kwargs["nextToken"] = token
        page = sfn.list_executions(**kwargs)
        items += page["executions"]
        token = page.get("nextToken")
        if not token:
            return items


def full_history(sfn, arn: str, page_size: int) -> list[dict]:
    events, token = [], None
    while True:
        kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": page_size}
        if token:
            kwargs["nextToken"] = token
        page = sfn.get_execution_history(**kwargs)
        events += page["events"]
        token = page.get("nextToken")
        if not token:
            return events


def check_execution(sfn, start: Start, page_size: int) -> tuple[bool, list[str]]:
    """Verify one execution; returns (exists, problems)."""
    where = f"{start.name} ({start.outcome})"
    try:
        described = sfn.describe_execution(executionArn=start.arn)
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ExecutionDoesNotExist" and start.outcome != "acked":
            return False, []
        return False, [f"{where}: DescribeExecution failed: {exc}"]
    _, _, expect = MACHINES[start.machine]
    expected = expect(start.name, json.loads(start.input_text))
    problems = []
    if described["status"] != expected.status:
        problems.append(f"{where}: status {described['status']}, expected {expected.status}")
    if described["input"] != start.input_text:
        problems.append(f"{where}: input {described['input']!r}, expected {start.input_text!r}")
    if expected.status == "SUCCEEDED":
        output = json.loads(described["output"]) if "output" in described else None
        if output != expected.output:
            problems.append(f"{where}: output {output!r}, expected {expected.output!r}")
    else:
        got = (described.get("error"), described.get("cause"))
        if got != (expected.error, expected.cause):
            problems.append(f"{where}: error/cause {got!r}, expected {(expected.error, expected.cause)!r}")

    events = full_history(sfn, start.arn, page_size)
    problems += history_problems(where, events, closed=True)
    got_sequence = []
    for event in events:
        details = event.get("stateEnteredEventDetails") or event.get("stateExitedEventDetails") or {}
        got_sequence.append((event["type"], details.get("name")))
    if expected.events:
        if Counter(got_sequence) != Counter(expected.events):
            problems.append(f"{where}: history {got_sequence}, expected these in some order {expected.events}")
    elif got_sequence != expected_events(expected):
        problems.append(f"{where}: history {got_sequence}, expected {expected_events(expected)}")
    started = events[0] if events and events[0]["type"] == "ExecutionStarted" else None
    if started is not None and started["executionStartedEventDetails"]["input"] != start.input_text:
        problems.append(f"{where}: ExecutionStarted input differs from the StartExecution input")
    if events and events[-1]["type"] == "ExecutionSucceeded" and expected.status == "SUCCEEDED":
        output = json.loads(events[-1]["executionSucceededEventDetails"]["output"])
        if output != expected.output:
            problems.append(f"{where}: ExecutionSucceeded output {output!r}, expected {expected.output!r}")
    return True, problems


def test_sigkill_restarts_lose_nothing_and_duplicate_nothing(tmp_path, crash_seed):
    seed = crash_seed  # a failure prints it, and how to run the test again on it (conftest.py)
    rng = random.Random(seed)
    data_dir = tmp_path / "data"
    servers = [ServerProcess(data_dir, shards=SHARDS).start()]
    current = Current(servers[0])
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        sfn = make_client(servers[0].endpoint)
        machine_arns = {
            key: sfn.create_state_machine(name=f"crash-{key}", definition=json.dumps(definition),
                                          roleArn=ROLE_ARN)["stateMachineArn"]
            for key, (definition, _, _) in MACHINES.items()}

        starts: list[Start] = []
        surprises: list[str] = []
        threads = [threading.Thread(target=load, args=(i, seed, current, machine_arns, stop, starts, surprises),
                                    name=f"crash-load-{i}", daemon=True) for i in range(LOAD_THREADS)]
        for thread in threads:
            thread.start()
        began = time.monotonic()
        for kill in range(KILLS):
            # Mostly under full load; now and then soon after a restart, while the server is still warming up.
            time.sleep(rng.uniform(0.3, 1.5) if rng.random() < 0.8 else rng.uniform(0.05, 0.3))
            so_far = sum(1 for s in starts if s.outcome == "acked")
            print(f"kill {kill + 1}/{KILLS} at {time.monotonic() - began:.2f}s ({so_far} starts acknowledged so far)")
            current.server.kill()
            if rng.random() < 0.5:  # sometimes stay down a moment, so Wait timers come due while nobody runs
                time.sleep(rng.uniform(0.1, 1.2))
            servers.append(ServerProcess(data_dir, shards=SHARDS).start())
            current.replace(servers[-1])
            print(f"  restarted at {time.monotonic() - began:.2f}s")
        time.sleep(rng.uniform(0.8, 1.5))  # some load on the last incarnation too
        stop.set()
        for thread in threads:
            thread.join(30)
        assert not any(thread.is_alive() for thread in threads), "a load thread did not finish"
        load_s = time.monotonic() - began

        sfn = make_client(current.endpoint)
        assert not surprises, "StartExecution answered unexpectedly:\n" + "\n".join(surprises[:20])

        # Nothing may stay RUNNING: every Wait timer (including those due while the server was down) must fire.
        deadline = time.monotonic() + DRAIN_DEADLINE_S
        while True:
            running = [item["name"] for arn in machine_arns.values() for item in list_all(sfn, arn, "RUNNING")]
            if not running or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert not running, f"seed {seed}: {len(running)} executions are stuck RUNNING: {sorted(running)[:20]}"

        # Every execution that exists was started by us, once.
        names = Counter(item["name"] for arn in machine_arns.values() for item in list_all(sfn, arn))
        by_name = {start.name: start for start in starts}
        duplicated = [name for name, n in names.items() if n > 1]
        phantoms = [name for name in names if name not in by_name]
        assert not duplicated, f"seed {seed}: executions listed more than once: {duplicated[:20]}"
        assert not phantoms, f"seed {seed}: executions nobody started: {phantoms[:20]}"
        acked = [start for start in starts if start.outcome == "acked"]
        missing = [start.name for start in acked if start.name not in names]
        assert not missing, f"seed {seed}: acknowledged executions that do not exist: {missing[:20]}"

        local = threading.local()

        def verify(numbered: tuple[int, Start]) -> tuple[bool, list[str]]:
            number, start = numbered
            if getattr(local, "client", None) is None:
                local.client = make_client(current.endpoint)
            return check_execution(local.client, start, 3 if number % 4 == 0 else 100)

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(verify, enumerate(starts)))
        problems = [problem for _, found in results for problem in found]
        unknown_existing = sum(1 for start, (exists, _) in zip(starts, results, strict=True)
                               if exists and start.outcome != "acked")
        print(f"load {load_s:.1f}s over {len(servers)} server processes: {len(acked)} acknowledged starts, "
              f"{len(starts) - len(acked)} unknown ({unknown_existing} of them exist); "
              f"{sum(names.values())} executions verified")
        assert acked, "no StartExecution was acknowledged; the test exercised nothing"
        assert not problems, (f"seed {seed}: {len(problems)} problems (server logs: {servers[0].log_path}):\n"
                              + "\n".join(problems[:30]))
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
        for server in servers:
            if server is current.server:
                server.stop()
            else:
                server.kill()
