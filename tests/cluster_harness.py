"""A cluster of real ``statewright serve`` nodes on one PostgreSQL schema, and a mixed workload run through boto3
that checks every acknowledged execution at the end: shared by the cluster tests (test_cluster_processes.py,
test_chaos.py) and the chaos run (``./dev chaos``, tools/chaos.py).

The workload starts chains of Pass, Waits, an activity a worker answers, a ``.waitForTaskToken`` callback, Parallel
and Map, and a nested ``startExecution.sync:2``; each kind's expected output is known from its input.
"""

from __future__ import annotations

import itertools
import json
import signal
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError, ReadTimeoutError
from prometheus_client.parser import text_string_to_metric_families

from server import ROLE_ARN, ServerProcess, free_port
from statewright.cluster.membership import assignment

SHARDS = 8
LEASE_MS = 4000  # --lease-ms 3000 is refused with --lease-renew-ms 500: renewals must fit twice in lease - 2 s margin
RENEW_MS = 500
SECRET = "cluster-processes-test-secret"
SETTLE_S = 45  # bound on a membership change (a dead node's leases: 4 s; a forwarded call's deadline: 15 s)
FINISH_S = 120  # bound on the workload draining after the faults
RETRYABLE = {"ServiceUnavailable", "ThrottlingException", "InternalFailure", "InternalServerError"}

# -- the workload's state machines and what each returns for input {"n": n, ...}

CHAIN = {"StartAt": "A", "States": {
    "A": {"Type": "Pass", "Parameters": {"n.$": "$.n", "a": 1}, "Next": "B"},
    "B": {"Type": "Pass", "Parameters": {"n.$": "$.n", "a.$": "$.a", "b": 2}, "Next": "C"},
    "C": {"Type": "Pass", "Result": "c", "ResultPath": "$.c", "End": True}}}
WAIT = {"StartAt": "W", "States": {
    "W": {"Type": "Wait", "SecondsPath": "$.secs", "Next": "P"},
    "P": {"Type": "Pass", "Result": True, "ResultPath": "$.waited", "End": True}}}
FAN_OUT = {"StartAt": "Par", "States": {
    "Par": {"Type": "Parallel", "ResultPath": "$.par", "Next": "Map", "Branches": [
        {"StartAt": "X", "States": {"X": {"Type": "Pass", "Result": "x", "End": True}}},
        {"StartAt": "Y", "States": {"Y": {"Type": "Pass", "Parameters": {"n.$": "$.n"}, "End": True}}}]},
    "Map": {"Type": "Map", "ItemsPath": "$.items", "ResultPath": "$.mapped", "End": True,
            "ItemProcessor": {"StartAt": "I", "States": {
                "I": {"Type": "Pass", "Parameters": {"item.$": "$"}, "End": True}}}}}}
HOLDER = {"StartAt": "H", "States": {"H": {"Type": "Pass", "End": True}}}  # holds the callback's token in its input
# A distributed Map: each item a child execution of a map run, two at a time
DMAP = {"StartAt": "Fan", "States": {"Fan": {
    "Type": "Map", "ItemsPath": "$.items", "MaxConcurrency": 2, "ResultPath": "$.fanned", "End": True,
    "ItemSelector": {"v.$": "$$.Map.Item.Value", "i.$": "$$.Map.Item.Index"},
    "ItemProcessor": {"ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}, "StartAt": "Twice",
                      "States": {"Twice": {"Type": "Pass", "Parameters": {"twice.$": "States.MathAdd($.v, $.v)",
                                                                          "i.$": "$.i"}, "End": True}}}}}}


def activity_machine(activity_arn: str) -> dict:
    # A task handed to a poll whose answer died with its node is started but never reaches the worker: it times
    # out and is retried (on whichever node owns the shard by then).
    return {"StartAt": "Work", "States": {"Work": {
        "Type": "Task", "Resource": activity_arn, "TimeoutSeconds": 5, "ResultPath": "$.r", "End": True,
        "Retry": [{"ErrorEquals": ["States.Timeout"], "IntervalSeconds": 1, "MaxAttempts": 10}]}}}


def redrive_machine(activity_arn: str) -> dict:
    """Its worker fails the first attempt of each execution (Flaky, not retried): the execution fails, and succeeds
    once redriven."""
    return {"StartAt": "Work", "States": {"Work": {
        "Type": "Task", "Resource": activity_arn, "TimeoutSeconds": 5, "ResultPath": "$.r", "End": True,
        "Parameters": {"n.$": "$.n", "once.$": "$$.Execution.Id"},
        "Retry": [{"ErrorEquals": ["States.Timeout"], "IntervalSeconds": 1, "MaxAttempts": 10}]}}}


def callback_machine(holder_arn: str) -> dict:
    return {"StartAt": "Ask", "States": {"Ask": {
        "Type": "Task", "Resource": "arn:aws:states:::states:startExecution.waitForTaskToken", "End": True,
        "TimeoutSeconds": 300, "ResultPath": "$.reply",
        "Parameters": {"StateMachineArn": holder_arn, "Name.$": "$.child",
                       "Input": {"token.$": "$$.Task.Token", "n.$": "$.n"}}}}}


def nested_machine(chain_arn: str) -> dict:
    return {"StartAt": "Child", "States": {"Child": {
        "Type": "Task", "Resource": "arn:aws:states:::states:startExecution.sync:2", "End": True,
        "Parameters": {"StateMachineArn": chain_arn, "Input": {"n.$": "$.n"}},
        "ResultSelector": {"out.$": "$.Output", "status.$": "$.Status"}, "ResultPath": "$.child"}}}


def chain_output(n: int) -> dict:
    return {"n": n, "a": 1, "b": 2, "c": "c"}


KINDS = ("chain", "wait", "activity", "callback", "fan_out", "nested")
CHAOS_KINDS = (*KINDS, "dmap", "redrive")  # the chaos run's


def job(kind: str, n: int) -> tuple[dict, dict]:
    """(input, expected output) of the n-th execution of ``kind``."""
    if kind == "chain":
        return {"n": n}, chain_output(n)
    if kind == "wait":
        given = {"n": n, "secs": 1 + n % 2}
        return given, {**given, "waited": True}
    if kind in ("activity", "redrive"):
        return {"n": n}, {"n": n, "r": {"twice": 2 * n}}
    if kind == "callback":
        given = {"n": n, "child": f"holder-{n}-{uuid.uuid4().hex[:8]}"}
        return given, {**given, "reply": {"ok": n}}
    if kind == "fan_out":
        given = {"n": n, "items": [1, 2, 3]}
        return given, {**given, "par": ["x", {"n": n}], "mapped": [{"item": 1}, {"item": 2}, {"item": 3}]}
    if kind == "dmap":
        given = {"n": n, "items": [n, n + 1, n + 2, n + 3]}
        fanned = [{"twice": 2 * value, "i": index} for index, value in enumerate(given["items"])]
        return given, {**given, "fanned": fanned}
    return {"n": n}, {"n": n, "child": {"out": chain_output(n), "status": "SUCCEEDED"}}


# -- the cluster


def client(endpoint: str):
    """retries off (the tests retry across nodes themselves); the read timeout outlasts a 60 s long poll."""
    return boto3.client("stepfunctions", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                        aws_secret_access_key="test",
                        config=Config(retries={"max_attempts": 0}, read_timeout=70, connect_timeout=2,
                                      max_pool_connections=20))


def metrics(endpoint: str) -> dict[str, float]:
    """Every sample of the node's /metrics: 'name{label="v"}' (or 'name') -> value."""
    with urllib.request.urlopen(f"{endpoint}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{key}="{value}"' for key, value in sorted(sample.labels.items()))
            samples[sample.name + (f"{{{labels}}}" if labels else "")] = sample.value
    return samples


class Cluster:
    def __init__(self, tmp_path, store: str, size: int = 3, *, stores: list[str] | None = None,
                 advertised: list[str] | None = None, ports: list[int] | None = None,
                 dirs: list[Path] | None = None, envs: list[dict[str, str]] | None = None) -> None:
        """``stores``: each node's store URL (default ``store``: the chaos run gives each its own link to the
        database); ``advertised``: the address the others reach each at (default its own endpoint); ``dirs``: each
        node's data directory (its log beside it; default ``tmp_path/nodeN``); ``envs``: more of each node's
        environment. A node's ``env`` and ``extra_args`` may be changed before it starts (again): another release,
        another weight."""
        ports = ports or _distinct_free_ports(size)
        stores = stores or [store] * size
        dirs = dirs or [tmp_path / f"node{index}" for index in range(size)]
        envs = envs or [{}] * size
        self.nodes = [ServerProcess(dirs[index], shards=SHARDS, port=port, env=envs[index], extra_args=(
            "--store", stores[index], "--cluster-secret", SECRET, "--lease-ms", str(LEASE_MS), "--lease-renew-ms",
            str(RENEW_MS), *(("--advertise", advertised[index]) if advertised else ())))
            for index, port in enumerate(ports)]
        self.addresses = advertised or [node.endpoint for node in self.nodes]  # the node ids
        self.up: set[int] = set()  # the nodes the test's clients may talk to (not killed, not paused)
        self._clients = {}

    def start(self) -> Cluster:
        self.nodes[0].start()  # the first creates the schema; the others then start at once
        threads = [threading.Thread(target=node.start) for node in self.nodes[1:]]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.up = set(range(len(self.nodes)))
        self.wait_for_assignment()
        return self

    def client(self, index: int):
        if index not in self._clients:
            self._clients[index] = client(self.nodes[index].endpoint)
        return self._clients[index]

    def expected_owned(self, live: set[int], weights: dict[int, int] | None = None, rule: int = 1
                       ) -> dict[int, int]:
        """How many shards each live node holds once the membership settled (assigned by ``rule``, with the
        nodes' ``weights``, by index: 1 if not given)."""
        ids = {self.addresses[index]: index for index in live}
        owners = [ids[owner] for owner in assignment(
            SHARDS, list(ids), {self.addresses[index]: (weights or {}).get(index, 1) for index in live}, rule)]
        return {index: owners.count(index) for index in live}

    def owned(self, index: int) -> int:
        return int(metrics(self.nodes[index].endpoint)["statewright_shards_owned"])

    def wait_for_assignment(self, live: set[int] | None = None, expected: dict[int, int] | None = None
                            ) -> dict[int, int]:
        """Wait (bounded) until every live node serves exactly the shards assigned to it (``expected``: by rule 1
        with equal weights, unless given): 8 in all."""
        live = self.up if live is None else live
        expected = expected or self.expected_owned(live)
        deadline = time.monotonic() + SETTLE_S
        while True:
            owned = {index: self.owned(index) for index in live}
            if owned == expected:
                assert sum(owned.values()) == SHARDS
                return owned
            assert time.monotonic() < deadline, f"shards owned {owned}, expected {expected}; logs: {self.logs()}"
            time.sleep(0.1)

    def any_node(self, call: str | Callable, deadline_s: float = 60, **params):
        """``call(client)``, or the operation named ``call`` with ``params``, on the up nodes in turn until it
        succeeds or raises a non-retryable error."""
        deadline = time.monotonic() + deadline_s
        for attempt in itertools.count():
            up = sorted(self.up)
            sfn = self.client(up[attempt % len(up)])
            try:
                return call(sfn) if callable(call) else getattr(sfn, call)(**params)
            except (EndpointConnectionError, ConnectionClosedError, ReadTimeoutError):
                pass
            except ClientError as exc:
                if exc.response["Error"]["Code"] not in RETRYABLE:
                    raise
            if time.monotonic() > deadline:
                raise AssertionError(f"no node answered within {deadline_s} s")
            time.sleep(0.1)

    def logs(self) -> str:
        return ", ".join(str(node.log_path) for node in self.nodes)

    def close(self) -> None:
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                node.process.send_signal(signal.SIGCONT)  # a paused node would not hear SIGTERM
        threads = [threading.Thread(target=node.stop) for node in self.nodes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def _distinct_free_ports(size: int) -> list[int]:
    while True:
        ports = [free_port() for _ in range(size)]
        if len(set(ports)) == size:
            return ports




# -- the workload


class Workload:
    """Starts executions of every kind at a steady trickle on the up nodes; activity workers poll every node (or
    only ``poll_nodes``); a thread answers the callbacks. ``check`` waits for all of them and checks them."""

    def __init__(self, cluster: Cluster, poll_nodes: set[int] | None = None, kinds: tuple[str, ...] = KINDS) -> None:
        self.cluster = cluster
        self.kinds = kinds
        self.prefix = uuid.uuid4().hex[:8]
        sfn = cluster.client(0)
        self.activity = sfn.create_activity(name=f"work-{self.prefix}")["activityArn"]  # every node hears of it
        chain = self._machine(sfn, "chain", CHAIN)
        holder = self._machine(sfn, "holder", HOLDER)
        self.holder = holder
        self.machines = {
            "chain": chain, "wait": self._machine(sfn, "wait", WAIT),
            "activity": self._machine(sfn, "activity", activity_machine(self.activity)),
            "callback": self._machine(sfn, "callback", callback_machine(holder)),
            "fan_out": self._machine(sfn, "fan_out", FAN_OUT),
            "nested": self._machine(sfn, "nested", nested_machine(chain))}
        if "dmap" in kinds:
            self.machines["dmap"] = self._machine(sfn, "dmap", DMAP)
        if "redrive" in kinds:
            self.machines["redrive"] = self._machine(sfn, "redrive", redrive_machine(self.activity))
        self.failed_once: set[str] = set()  # redrive executions whose first attempt the worker failed
        self.redriven: set[str] = set()
        self.acknowledged: dict[str, tuple[str, dict]] = {}  # execution ARN -> (kind, expected output)
        self.callbacks: list[tuple[str, int]] = []  # (holder execution ARN, n) still to answer
        self.errors: list[str] = []
        self.tasks_done = 0
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._counter = itertools.count()
        self._threads: list[threading.Thread] = []
        polled = set(range(len(cluster.nodes))) if poll_nodes is None else poll_nodes
        # clients are made here, on the test's thread (boto3's default session is not thread-safe)
        for index in sorted(polled):
            self._spawn(self._worker, index, client(cluster.nodes[index].endpoint))
        self._spawn(self._answer_callbacks)
        if "redrive" in kinds:
            self._spawn(self._redrive_failed)

    def _machine(self, sfn, name: str, definition: dict) -> str:
        return sfn.create_state_machine(name=f"{name}-{self.prefix}", definition=json.dumps(definition),
                                        roleArn=ROLE_ARN)["stateMachineArn"]

    def _spawn(self, target, *args) -> threading.Thread:
        thread = threading.Thread(target=self._guarded, args=(target, *args), daemon=True)
        thread.start()
        self._threads.append(thread)
        return thread

    def _guarded(self, target, *args) -> None:
        try:
            target(*args)
        except Exception as exc:  # reported by check()
            self.errors.append(f"{target.__name__}: {type(exc).__name__}: {exc}")

    def start_one(self, kind: str | None = None, name: str | None = None) -> str:
        """Start one execution (retrying the same name and input on another node until one acknowledges it)."""
        n = next(self._counter)
        kind = kind or self.kinds[n % len(self.kinds)]
        given, expected = job(kind, n)
        name = name or f"{kind}-{n}-{self.prefix}"
        machine = self.machines[kind]
        arn = machine.replace(":stateMachine:", ":execution:") + f":{name}"

        def start(sfn):
            try:
                return sfn.start_execution(stateMachineArn=machine, name=name, input=json.dumps(given))["executionArn"]
            except ClientError as exc:  # an earlier try landed and it already closed: it is ours
                if exc.response["Error"]["Code"] == "ExecutionAlreadyExists":
                    return arn
                raise
        assert self.cluster.any_node(start) == arn
        with self._lock:
            self.acknowledged[arn] = (kind, expected)
            if kind == "callback":
                self.callbacks.append((self.holder.replace(":stateMachine:", ":execution:") + f":{given['child']}", n))
        return arn

    def trickle(self, count: int, pause_s: float = 0.05, until: threading.Event | None = None) -> threading.Thread:
        """Start ``count`` executions in the background, one every ``pause_s`` (or until ``until`` is set)."""
        def run() -> None:
            for _ in range(count):
                if self.stopping.is_set() or (until is not None and until.is_set()):
                    return
                self.start_one()
                time.sleep(pause_s)
        return self._spawn(run)

    def wait_started(self, count: int) -> None:
        deadline = time.monotonic() + 60
        while len(self.acknowledged) < count:
            assert not self.errors, self.errors
            assert time.monotonic() < deadline, f"only {len(self.acknowledged)} starts acknowledged"
            time.sleep(0.05)

    def _worker(self, index: int, sfn) -> None:
        while not self.stopping.is_set():
            if index not in self.cluster.up:
                time.sleep(0.2)
                continue
            try:
                task = sfn.get_activity_task(activityArn=self.activity, workerName=f"worker-{index}")
            except (EndpointConnectionError, ConnectionClosedError, ReadTimeoutError):
                time.sleep(0.2)
                continue
            except ClientError as exc:
                if exc.response["Error"]["Code"] in RETRYABLE:
                    continue
                raise
            if not task.get("taskToken"):
                continue
            given = json.loads(task["input"])
            if "once" in given and self._fail_first(task["taskToken"], given["once"]):
                continue
            output = json.dumps({"twice": 2 * given["n"]})
            try:  # any node: the token carries its shard, and the call reaches its owner
                self.cluster.any_node("send_task_success", taskToken=task["taskToken"], output=output)
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "TaskTimedOut":  # timed out meanwhile: its retry comes again
                    raise
                continue
            with self._lock:
                self.tasks_done += 1

    def _fail_first(self, token: str, execution_arn: str) -> bool:
        """Fail the first attempt of a redrive execution (True), not the later ones (False)."""
        with self._lock:
            if execution_arn in self.failed_once:
                return False
            self.failed_once.add(execution_arn)
        try:
            self.cluster.any_node("send_task_failure", taskToken=token, error="Flaky",
                                  cause="fails once, and succeeds once redriven")
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "TaskTimedOut":
                raise
            with self._lock:  # not failed after all (timed out meanwhile): its retry is failed instead
                self.failed_once.discard(execution_arn)
        return True

    def _redrive_failed(self) -> None:
        """Redrive each redrive execution once it failed (a client token makes a retried call the same redrive)."""
        while not self.stopping.is_set():
            with self._lock:
                waiting = [arn for arn, (kind, _) in self.acknowledged.items()
                           if kind == "redrive" and arn not in self.redriven]
            for arn in waiting:
                if self.cluster.any_node("describe_execution", executionArn=arn)["status"] == "FAILED":
                    self.cluster.any_node("redrive_execution", executionArn=arn,
                                          clientToken=f"redrive-{arn.rsplit(':', 1)[1]}"[:64])
                    with self._lock:
                        self.redriven.add(arn)
            time.sleep(0.2)

    def _answer_callbacks(self) -> None:
        while not self.stopping.is_set():
            with self._lock:
                pending = list(self.callbacks)
            for holder_arn, n in pending:
                try:
                    given = self.cluster.any_node("describe_execution", executionArn=holder_arn)
                except ClientError as exc:
                    if exc.response["Error"]["Code"] == "ExecutionDoesNotExist":
                        continue  # not started yet
                    raise
                token = json.loads(given["input"])["token"]
                try:
                    self.cluster.any_node("send_task_success", taskToken=token, output=json.dumps({"ok": n}))
                except ClientError as exc:  # a try that timed out landed, and the next found the task answered:
                    if exc.response["Error"]["Code"] != "TaskTimedOut":  # check() reads the holder's output
                        raise
                with self._lock:
                    self.callbacks.remove((holder_arn, n))
            time.sleep(0.1)

    def check(self, finish_s: float = FINISH_S) -> None:
        """Every acknowledged execution closes (bounded wait), SUCCEEDED, with one ExecutionSucceeded and its
        expected output; so does every execution the workload's machines ran (children and holders too)."""
        deadline = time.monotonic() + finish_s
        open_arns = set(self.acknowledged)
        while open_arns:
            assert not self.errors, self.errors
            for arn in sorted(open_arns):
                if self.closed(arn):
                    open_arns.discard(arn)
            assert time.monotonic() < deadline, (
                f"{len(open_arns)} executions still running, e.g. {sorted(open_arns)[:3]}; logs: {self.cluster.logs()}")
            time.sleep(0.2)
        self.stopping.set()
        assert not self.errors, self.errors
        for arn, (kind, expected) in sorted(self.acknowledged.items()):
            described = self.cluster.any_node("describe_execution", executionArn=arn)
            assert described["status"] == "SUCCEEDED", (arn, described)
            assert json.loads(described["output"]) == expected, (arn, kind)
            types = [event["type"] for event in self.history(arn)]
            assert types.count("ExecutionSucceeded") == 1 and types[-1] == "ExecutionSucceeded", (arn, types)
            assert types.count("ExecutionStarted") == 1, (arn, types)
        for kind, machine in [*self.machines.items(), ("holder", self.holder)]:
            listed = self.list_executions(machine)
            assert all(execution["status"] == "SUCCEEDED" for execution in listed), (kind, listed)
            if kind not in ("chain", "holder"):  # chain also runs nested's children; holder runs the callbacks'
                assert len(listed) == sum(1 for k, _ in self.acknowledged.values() if k == kind)
        children = sum(1 for k, _ in self.acknowledged.values() if k == "nested")
        assert len(self.list_executions(self.machines["chain"])) == children + sum(
            1 for k, _ in self.acknowledged.values() if k == "chain")
        assert len(self.list_executions(self.holder)) == sum(
            1 for k, _ in self.acknowledged.values() if k == "callback")

    def closed(self, arn: str) -> bool:
        """Whether an acknowledged execution is done: closed, and a redrive execution once it succeeded (it fails
        first)."""
        status = self.cluster.any_node("describe_execution", executionArn=arn)["status"]
        return status == "SUCCEEDED" or (status != "RUNNING" and self.acknowledged[arn][0] != "redrive")

    def history(self, arn: str) -> list[dict]:
        return self._all_pages("get_execution_history", "events", executionArn=arn)

    def list_executions(self, machine: str) -> list[dict]:
        return self._all_pages("list_executions", "executions", stateMachineArn=machine)

    def _all_pages(self, operation: str, key: str, **params) -> list[dict]:
        found, token = [], None
        while True:
            page = self.cluster.any_node(operation, maxResults=1000, **params,
                                         **({"nextToken": token} if token else {}))
            found += page[key]
            token = page.get("nextToken")
            if not token:
                return found

    def close(self) -> None:
        self.stopping.set()




def busiest(cluster: Cluster) -> int:
    """The node holding the most shards (each holds at least two)."""
    return max(sorted(cluster.up), key=cluster.owned)


