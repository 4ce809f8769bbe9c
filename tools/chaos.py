"""``./dev chaos --minutes M --seed S``: three statewright nodes on one PostgreSQL database under the mixed workload of
the cluster tests (chains, Waits, activities, callbacks, Parallel and Map, nested executions, distributed Maps whose
children spread over the nodes), with a seeded schedule of faults, then a check of every acknowledged execution.

Faults, one at a time, each on a node the schedule picks, for a span it picks:
- ``kill``: SIGKILL, then the node started again on its data;
- ``pause``: SIGSTOP past its lease, then SIGCONT (it finds its shards taken, and its late writes refused);
- ``store-cut``: the node's link to PostgreSQL cut (every connection closed, new ones refused), then healed;
- ``peers-cut``: the node's inbound link cut, so the other nodes cannot reach it (forwarded calls, membership
  pokes), while it still reaches them and the database; then healed;
- ``runaway``: executions whose first state is a runaway JSONata expression, beside the rest (each must fail with
  States.QueryEvaluationError; the Waits' lateness is reported).

Partitions are made by a TCP link per connection path (tests/link.py), not network namespaces: a node's database
connections go through its own link, and the other nodes reach it through its inbound one (``--advertise``).
PostgreSQL restarts, a full disk and clock steps are not among the faults: this machine's PostgreSQL is shared and
not ours to restart, and the others need privileges (a quota, a time namespace) the run does not have.

The check: every acknowledged execution closed SUCCEEDED with its expected output (else lost), one
ExecutionStarted and one close in a gapless history, each task attempt started at most once, each callback answered
once (else doubled). It prints ``N faults, E executions, 0 lost, 0 doubled`` and exits 1 on any problem.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))

from cluster_harness import LEASE_MS, WITH_DMAP, Cluster, Workload  # noqa: E402  (the tests' harness)
from link import Link, through  # noqa: E402
from postgres import create_schema  # noqa: E402
from server import ROLE_ARN, free_port  # noqa: E402

FAULTS = ("kill", "pause", "store-cut", "peers-cut", "runaway")
RUNAWAY = {"QueryLanguage": "JSONata", "StartAt": "Spin", "States": {"Spin": {
    "Type": "Pass", "Output": "{% $reduce([1..2000000], function($a, $b) { $a + $b }, 0) %}", "End": True}}}
SPAN_S = (2.0, 8.0)  # how long a fault lasts
CALM_S = (1.0, 4.0)  # between faults


@dataclass
class Outcome:
    faults: Counter = field(default_factory=Counter)
    executions: int = 0
    lost: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    wait_lateness_ms: list[float] = field(default_factory=list)
    runaways: int = 0

    def line(self) -> str:
        kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(self.faults.items()))
        return (f"{sum(self.faults.values())} faults ({kinds}), {self.executions} executions, {len(self.lost)} lost, "
                f"{len(self.doubled)} doubled")


def run(minutes: float, seed: int, work: Path, database: str = "postgresql://postgres@127.0.0.1:5432/test",
        say=print, kinds: tuple[str, ...] = FAULTS, span_s: tuple[float, float] = SPAN_S,
        calm_s: tuple[float, float] = CALM_S) -> Outcome:
    """The chaos run: ``minutes`` of faults of ``kinds`` from ``seed``'s schedule, then the check."""
    draw = random.Random(seed)
    store = create_schema(database)
    db_port = urlsplit(store).port or 5432
    ports = [free_port() for _ in range(3)]
    store_links = [Link(db_port) for _ in ports]
    inbound = [Link(port) for port in ports]
    cluster = Cluster(work, store, stores=[through(store, link.port) for link in store_links],
                      advertised=[f"http://127.0.0.1:{link.port}" for link in inbound], ports=ports).start()
    outcome = Outcome()
    workload = Workload(cluster, kinds=WITH_DMAP)
    runaway = workload.cluster.client(0).create_state_machine(
        name=f"runaway-{uuid.uuid4().hex[:8]}", definition=json.dumps(RUNAWAY), roleArn=ROLE_ARN)["stateMachineArn"]
    runaways: list[str] = []
    try:
        enough = threading.Event()
        trickle = workload.trickle(10**9, pause_s=0.1, until=enough)
        ends = time.monotonic() + minutes * 60
        while time.monotonic() < ends:
            time.sleep(draw.uniform(*calm_s))
            kind, node, span = draw.choice(kinds), draw.randrange(3), draw.uniform(*span_s)
            say(f"chaos: {kind} node {node} for {span:.1f} s ({len(workload.acknowledged)} started so far)")
            _fault(cluster, kind, node, span, store_links, inbound, runaway, runaways)
            outcome.faults[kind] += 1
            cluster.wait_for_assignment()
        enough.set()  # no more starts; the workers and the callbacks' answers go on until the audit is done
        trickle.join(30)
        _audit(workload, outcome, runaways)
    finally:
        workload.close()
        cluster.close()
        for link in (*store_links, *inbound):
            link.close()
    return outcome


def _fault(cluster: Cluster, kind: str, node: int, span: float, store_links: list[Link], inbound: list[Link],
           runaway: str, runaways: list[str]) -> None:
    process = cluster.nodes[node]
    if kind == "kill":
        cluster.up.discard(node)
        process.kill()
        time.sleep(span)
        process.start()
        cluster.up.add(node)
    elif kind == "pause":
        cluster.up.discard(node)
        process.process.send_signal(signal.SIGSTOP)
        time.sleep(max(span, LEASE_MS / 1000 + 1))  # past its lease: the others take its shards
        process.process.send_signal(signal.SIGCONT)
        cluster.up.add(node)
    elif kind in ("store-cut", "peers-cut"):
        link = (store_links if kind == "store-cut" else inbound)[node]
        link.cut()
        time.sleep(span)
        link.heal()
    else:  # beside the rest: they must fail alone, and the Waits stay on time
        for _ in range(5):
            runaways.append(cluster.any_node("start_execution", stateMachineArn=runaway, input="{}")["executionArn"])
        time.sleep(span)


def _audit(workload: Workload, outcome: Outcome, runaways: list[str]) -> None:
    """Every acknowledged execution: closed SUCCEEDED with its output, started and closed once, its history
    gapless, each attempt started once, each callback answered once."""
    deadline = time.monotonic() + 180
    pending = set(workload.acknowledged)
    while pending and time.monotonic() < deadline:
        for arn in sorted(pending):
            if workload.cluster.any_node("describe_execution", executionArn=arn)["status"] != "RUNNING":
                pending.discard(arn)
        time.sleep(0.5)
    outcome.executions = len(workload.acknowledged)
    outcome.problems += workload.errors
    for arn, (kind, expected) in sorted(workload.acknowledged.items()):
        described = workload.cluster.any_node("describe_execution", executionArn=arn)
        if described["status"] != "SUCCEEDED" or json.loads(described.get("output", "null")) != expected:
            outcome.lost.append(f"{arn}: {described['status']} {described.get('output')}")
            continue
        events = workload.history(arn)
        types = Counter(event["type"] for event in events)
        closes = sum(count for kind_, count in types.items() if kind_.startswith("Execution") and kind_ != (
            "ExecutionStarted"))
        started = Counter(event["previousEventId"] for event in events if event["type"] == "TaskStarted")
        if types["ExecutionStarted"] != 1 or closes != 1 or any(count > 1 for count in started.values()):
            outcome.doubled.append(f"{arn}: {dict(types)}")
        if [event["id"] for event in events] != list(range(1, len(events) + 1)):
            outcome.problems.append(f"{arn}: its history has gaps")
        if kind == "callback" and types["TaskSucceeded"] != 1:
            outcome.doubled.append(f"{arn}: its callback answered {types['TaskSucceeded']} times")
        if kind == "wait":
            entered = next(event for event in events if event["type"] == "WaitStateEntered")
            exited = next(event for event in events if event["type"] == "WaitStateExited")
            secs = json.loads(entered["stateEnteredEventDetails"]["input"])["secs"]
            outcome.wait_lateness_ms.append(
                (exited["timestamp"] - entered["timestamp"]).total_seconds() * 1000 - secs * 1000)
    for arn in runaways:
        described = workload.cluster.any_node("describe_execution", executionArn=arn)
        if described["status"] != "FAILED" or described.get("error") != "States.QueryEvaluationError":
            outcome.problems.append(f"runaway {arn}: {described['status']} {described.get('error')}")
    outcome.runaways = len(runaways)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="./dev chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5, help="how long faults are injected (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="the fault schedule's seed (default 0)")
    parser.add_argument("--faults", default=",".join(FAULTS),
                        help=f"the kinds of fault drawn from, comma-separated (default all: {','.join(FAULTS)})")
    parser.add_argument("--database", default="postgresql://postgres@127.0.0.1:5432/test",
                        help="the PostgreSQL database a fresh schema is made in (default the tests')")
    args = parser.parse_args(argv)
    kinds = tuple(kind for kind in args.faults.split(",") if kind)
    if not kinds or set(kinds) - set(FAULTS):
        parser.error(f"--faults takes some of {', '.join(FAULTS)}")
    with tempfile.TemporaryDirectory(prefix="statewright-chaos-") as work:
        outcome = run(args.minutes, args.seed, Path(work), args.database, kinds=kinds)
    lateness = sorted(outcome.wait_lateness_ms)
    print(f"chaos: {outcome.line()}")
    if lateness:
        print(f"chaos: Waits ended late by p50 {lateness[len(lateness) // 2]:.0f} ms, max {lateness[-1]:.0f} ms; "
              f"{outcome.runaways} runaway executions beside them")
    for problem in outcome.lost + outcome.doubled + outcome.problems:
        print(f"chaos: {problem}")
    return 1 if outcome.lost or outcome.doubled or outcome.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
