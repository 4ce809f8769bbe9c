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
  States.QueryEvaluationError, and a Wait due meanwhile, clear of the other faults, must end within ``ON_TIME_MS``);
- ``clock-step``: the node's wall clock stepped by 100-500 ms either way (the README allows clocks "well under a
  second" apart), then stepped back: through tests/clock_step (a startup hook on time.time and time.time_ns: Linux
  cannot step CLOCK_REALTIME for one process);
- ``pg-restart``: PostgreSQL stopped as a crash stops it (immediate), then started: it replays its WAL;
- ``db-disk-full``: the database's disk filled to the last byte, then freed (and PostgreSQL started again if it
  stopped for want of space, as an operator would);
- ``node-disk-full``: the node's own disk (its data directory and log, on a small tmpfs) filled, then freed.

The last three need a PostgreSQL of the run's own (tests/private_postgres.py: root, the server binaries, tmpfs
mounts); the others run against any database. Partitions are made by a TCP link per connection path (tests/link.py),
not network namespaces: a node's database connections go through its own link, and the other nodes reach it through
its inbound one (``--advertise``).

The schedule is either ``--minutes`` of faults drawn from ``--faults``, or exact counts (``--counts
kill=1000,store-cut=50,peers-cut=50``) in a seeded order. The workload adds redrives (an activity's first attempt
fails, the workload redrives the execution) to the cluster tests' kinds.

The check: every acknowledged execution closed SUCCEEDED with its expected output (else lost), one
ExecutionStarted and one close in a gapless history (a redrive: one failure, one redrive, one success), each task
attempt started at most once, each callback answered once (else doubled). It prints ``N faults, E executions, 0
lost, 0 doubled`` and exits 1 on any problem.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))

import private_postgres  # noqa: E402
from cluster_harness import CHAOS_KINDS, LEASE_MS, Cluster, Workload  # noqa: E402  (the tests' harness)
from link import Link, through  # noqa: E402
from postgres import create_schema  # noqa: E402
from server import ROLE_ARN, free_port  # noqa: E402

FAULTS = ("kill", "pause", "store-cut", "peers-cut", "runaway", "clock-step", "pg-restart", "db-disk-full",
          "node-disk-full")
OWN_POSTGRES = frozenset({"pg-restart", "db-disk-full", "node-disk-full"})  # need a PostgreSQL (and mounts) of our own
RUNAWAY = {"QueryLanguage": "JSONata", "StartAt": "Spin", "States": {"Spin": {
    "Type": "Pass", "Output": "{% $reduce([1..2000000], function($a, $b) { $a + $b }, 0) %}", "End": True}}}
SPAN_S = (2.0, 8.0)  # how long a fault lasts
CALM_S = (1.0, 4.0)  # between faults
STEP_MS = (100, 500)  # a clock step, either way: within the skew the README allows
NODE_DISK_MB = 32
# A Wait due while runaway expressions run (each spends its whole 1 s evaluation budget in a heavy lane) ends at
# most this late; one due within CLEAR_S of another fault is left out (a lease must pass first: late by design).
ON_TIME_MS = 500
CLEAR_S = 12.0
CLOCK_STEP = TESTS / "clock_step"


@dataclass
class Outcome:
    faults: Counter = field(default_factory=Counter)
    executions: int = 0
    lost: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    wait_lateness_ms: list[float] = field(default_factory=list)
    beside_runaways_ms: list[float] = field(default_factory=list)  # the lateness of Waits due beside runaways
    runaways: int = 0
    redrives: int = 0
    seconds: float = 0.0

    def line(self) -> str:
        kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(self.faults.items()))
        return (f"{sum(self.faults.values())} faults ({kinds}), {self.executions} executions, {len(self.lost)} lost, "
                f"{len(self.doubled)} doubled")


@dataclass
class World:
    """What the faults act on: the nodes, their links, their disks and clocks, the database server if ours."""

    cluster: Cluster
    store_links: list[Link]
    inbound: list[Link]
    clocks: list[Path]
    disks: list[Path]
    postgres: private_postgres.PrivatePostgres | None
    runaway: str = ""
    runaways: list[str] = field(default_factory=list)
    spans: list[tuple[str, float, float]] = field(default_factory=list)  # each fault: kind, began, ended (epoch s)


def schedule(draw: random.Random, minutes: float | None, kinds: tuple[str, ...],
             counts: dict[str, int] | None) -> Iterator[str]:
    """The kinds of fault in turn: exactly ``counts`` of each in a seeded order, or drawn for ``minutes``."""
    if counts:
        order = [kind for kind, count in sorted(counts.items()) for _ in range(count)]
        draw.shuffle(order)
        yield from order
        return
    ends = time.monotonic() + (minutes or 0) * 60
    while time.monotonic() < ends:
        yield draw.choice(kinds)


def run(minutes: float | None, seed: int, work: Path, database: str = "postgresql://postgres@127.0.0.1:5432/test",
        say=print, kinds: tuple[str, ...] = FAULTS, span_s: tuple[float, float] = SPAN_S,
        calm_s: tuple[float, float] = CALM_S, counts: dict[str, int] | None = None) -> Outcome:
    """The chaos run: ``minutes`` of faults of ``kinds`` from ``seed``'s schedule (or exactly ``counts`` of each),
    then the check."""
    draw = random.Random(seed)
    wanted = set(counts or kinds)
    postgres = None
    mounted: list[Path] = []
    started = time.monotonic()
    if wanted & OWN_POSTGRES:
        why = private_postgres.available()
        if why is not None:
            raise SystemExit(f"chaos: {', '.join(sorted(wanted & OWN_POSTGRES))} need a PostgreSQL of the run's own, "
                             f"and {why}; leave them out of --faults")
        postgres = private_postgres.PrivatePostgres(free_port()).start()
        database = postgres.url
    try:
        store = create_schema(database)
        db_port = urlsplit(store).port or 5432
        ports = [free_port() for _ in range(3)]
        disks = [work / f"disk{index}" for index in range(3)]
        if "node-disk-full" in wanted:
            for disk in disks:
                disk.mkdir(parents=True)
                subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={NODE_DISK_MB}m", "tmpfs", str(disk)], check=True)
                mounted.append(disk)
        clocks = [work / f"clock{index}" for index in range(3)]
        envs = [{"PYTHONPATH": str(CLOCK_STEP), "STATEWRIGHT_CLOCK_OFFSET_FILE": str(clock)} for clock in clocks] \
            if "clock-step" in wanted else None
        store_links = [Link(db_port) for _ in ports]
        inbound = [Link(port) for port in ports]
        cluster = Cluster(work, store, stores=[through(store, link.port) for link in store_links],
                          advertised=[f"http://127.0.0.1:{link.port}" for link in inbound], ports=ports,
                          dirs=[disk / "node" for disk in disks], envs=envs).start()
        world = World(cluster, store_links, inbound, clocks, disks, postgres)
        outcome = Outcome()
        workload = Workload(cluster, kinds=CHAOS_KINDS)
        world.runaway = workload.cluster.client(0).create_state_machine(
            name=f"runaway-{uuid.uuid4().hex[:8]}", definition=json.dumps(RUNAWAY),
            roleArn=ROLE_ARN)["stateMachineArn"]
        try:
            enough = threading.Event()
            trickle = workload.trickle(10**9, pause_s=0.1, until=enough)
            for kind in schedule(draw, minutes, kinds, counts):
                time.sleep(draw.uniform(*calm_s))
                node, span = draw.randrange(3), draw.uniform(*span_s)
                say(f"chaos: {kind} node {node} for {span:.1f} s ({sum(outcome.faults.values())} faults, "
                    f"{len(workload.acknowledged)} started so far)")
                began = time.time()
                _fault(world, kind, node, span, draw)
                world.spans.append((kind, began, time.time()))
                outcome.faults[kind] += 1
                cluster.wait_for_assignment()
            enough.set()  # no more starts; the workers and the callbacks' answers go on until the audit is done
            trickle.join(30)
            _audit(workload, outcome, world.runaways, world.spans)
        finally:
            workload.close()
            cluster.close()
            for link in (*store_links, *inbound):
                link.close()
    finally:
        for disk in mounted:
            subprocess.run(["umount", "-l", str(disk)], check=False)
        if postgres is not None:
            postgres.close()
    outcome.seconds = time.monotonic() - started
    return outcome


def _fault(world: World, kind: str, node: int, span: float, draw: random.Random) -> None:
    cluster = world.cluster
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
        link = (world.store_links if kind == "store-cut" else world.inbound)[node]
        link.cut()
        time.sleep(span)
        link.heal()
    elif kind == "clock-step":
        step_ms = draw.uniform(*STEP_MS) * draw.choice((-1, 1))
        world.clocks[node].write_text(f"{step_ms:.0f}")
        time.sleep(span)
        world.clocks[node].write_text("0")
    elif kind == "pg-restart":
        world.postgres.stop("immediate")
        time.sleep(span)
        world.postgres.start()
    elif kind == "db-disk-full":
        world.postgres.fill_disk()
        time.sleep(span)
        world.postgres.free_disk()
    elif kind == "node-disk-full":
        ballast = world.disks[node] / "ballast"
        private_postgres.fill(ballast)
        time.sleep(span)
        ballast.unlink(missing_ok=True)
    else:  # beside the rest: they must fail alone, and the Waits stay on time
        for _ in range(5):
            world.runaways.append(cluster.any_node("start_execution", stateMachineArn=world.runaway,
                                                   input="{}")["executionArn"])
        time.sleep(span)


def _audit(workload: Workload, outcome: Outcome, runaways: list[str], spans: list[tuple[str, float, float]]) -> None:
    """Every acknowledged execution: closed SUCCEEDED with its output, started and closed once (a redrive: failed
    once, redriven once), its history gapless, each attempt started once, each callback answered once; a Wait due
    beside runaway expressions (and clear of the other faults) ended on time."""
    deadline = time.monotonic() + 180
    pending = set(workload.acknowledged)
    while pending and time.monotonic() < deadline:
        for arn in sorted(pending):
            if workload.closed(arn):
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
        closes = Counter({kind_: count for kind_, count in types.items() if kind_ in CLOSES})
        started = Counter(event["previousEventId"] for event in events if event["type"] == "TaskStarted")
        expected_closes = {"ExecutionSucceeded": 1}
        if kind == "redrive":
            expected_closes["ExecutionFailed"] = 1
            outcome.redrives += types["ExecutionRedriven"]
        if types["ExecutionStarted"] != 1 or closes != Counter(expected_closes) or any(
                count > 1 for count in started.values()) or types["ExecutionRedriven"] != (kind == "redrive"):
            outcome.doubled.append(f"{arn}: {dict(types)}")
        if [event["id"] for event in events] != list(range(1, len(events) + 1)):
            outcome.problems.append(f"{arn}: its history has gaps")
        if kind == "callback" and types["TaskSucceeded"] != 1:
            outcome.doubled.append(f"{arn}: its callback answered {types['TaskSucceeded']} times")
        if kind == "wait":
            entered = next(event for event in events if event["type"] == "WaitStateEntered")
            exited = next(event for event in events if event["type"] == "WaitStateExited")
            secs = json.loads(entered["stateEnteredEventDetails"]["input"])["secs"]
            late_ms = (exited["timestamp"] - entered["timestamp"]).total_seconds() * 1000 - secs * 1000
            outcome.wait_lateness_ms.append(late_ms)
            due_s = entered["timestamp"].timestamp() + secs
            if _beside_runaways(due_s, spans):
                outcome.beside_runaways_ms.append(late_ms)
                if late_ms > ON_TIME_MS:
                    outcome.problems.append(f"{arn}: its Wait, due beside runaway expressions, ended {late_ms:.0f} ms "
                                            f"late (more than {ON_TIME_MS} ms)")
    for arn in runaways:
        described = workload.cluster.any_node("describe_execution", executionArn=arn)
        if described["status"] != "FAILED" or described.get("error") != "States.QueryEvaluationError":
            outcome.problems.append(f"runaway {arn}: {described['status']} {described.get('error')}")
    outcome.runaways = len(runaways)


CLOSES = frozenset({"ExecutionSucceeded", "ExecutionFailed", "ExecutionTimedOut", "ExecutionAborted"})


def _beside_runaways(due_s: float, spans: list[tuple[str, float, float]]) -> bool:
    """Whether a timer due at ``due_s`` fell due while runaway expressions ran, and clear of every other fault (a
    killed or cut-off node's timers wait for its lease to pass to another node: late by design)."""
    during = any(kind == "runaway" and began <= due_s <= ended for kind, began, ended in spans)
    return during and not any(kind != "runaway" and began - CLEAR_S <= due_s <= ended + CLEAR_S
                              for kind, began, ended in spans)


def _counts(text: str) -> dict[str, int]:
    counts = {}
    for part in filter(None, text.split(",")):
        kind, _, number = part.partition("=")
        if kind not in FAULTS or not number.isdigit():
            raise argparse.ArgumentTypeError(f"{part!r}: give KIND=COUNT with KIND one of {', '.join(FAULTS)}")
        counts[kind] = int(number)
    return counts


def _span(text: str) -> tuple[float, float]:
    low, _, high = text.partition(",")
    try:
        span = (float(low), float(high or low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give seconds as LOW,HIGH") from None
    if not 0 <= span[0] <= span[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 <= LOW <= HIGH")
    return span


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="./dev chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5, help="how long faults are injected (default 5)")
    parser.add_argument("--counts", type=_counts, default=None, metavar="KIND=N,...",
                        help="instead of --minutes: exactly these faults, in a seeded order (e.g. "
                             "kill=1000,store-cut=50,peers-cut=50)")
    parser.add_argument("--seed", type=int, default=0, help="the fault schedule's seed (default 0)")
    parser.add_argument("--faults", default=",".join(FAULTS),
                        help=f"the kinds of fault drawn from, comma-separated (default all: {','.join(FAULTS)})")
    parser.add_argument("--span", type=_span, default=SPAN_S, metavar="LOW,HIGH",
                        help=f"how long a fault lasts, in seconds (default {SPAN_S[0]:g},{SPAN_S[1]:g})")
    parser.add_argument("--calm", type=_span, default=CALM_S, metavar="LOW,HIGH",
                        help=f"the pause between faults, in seconds (default {CALM_S[0]:g},{CALM_S[1]:g})")
    parser.add_argument("--database", default="postgresql://postgres@127.0.0.1:5432/test",
                        help="the PostgreSQL database a fresh schema is made in, when no fault needs one of the "
                             "run's own (default the tests')")
    args = parser.parse_args(argv)
    kinds = tuple(kind for kind in args.faults.split(",") if kind)
    if not kinds or set(kinds) - set(FAULTS):
        parser.error(f"--faults takes some of {', '.join(FAULTS)}")
    with tempfile.TemporaryDirectory(prefix="statewright-chaos-") as work:
        outcome = run(None if args.counts else args.minutes, args.seed, Path(work), args.database, kinds=kinds,
                      span_s=args.span, calm_s=args.calm, counts=args.counts)
    lateness = sorted(outcome.wait_lateness_ms)
    print(f"chaos: {outcome.line()} in {outcome.seconds / 60:.0f} minutes; {outcome.redrives} redrives")
    if lateness:
        print(f"chaos: Waits ended late by p50 {lateness[len(lateness) // 2]:.0f} ms, max {lateness[-1]:.0f} ms; "
              f"{outcome.runaways} runaway executions beside them")
    beside = sorted(outcome.beside_runaways_ms)
    if beside:
        print(f"chaos: {len(beside)} Waits due beside runaways ended late by p50 {beside[len(beside) // 2]:.0f} ms, "
              f"max {beside[-1]:.0f} ms (at most {ON_TIME_MS} ms)")
    for problem in outcome.lost + outcome.doubled + outcome.problems:
        print(f"chaos: {problem}")
    return 1 if outcome.lost or outcome.doubled or outcome.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
