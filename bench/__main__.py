"""``./dev bench``: statewright against its peers in one run; prints a table of figures, ratios and targets.

Starts what it needs: statewright (a fresh temporary data directory per workload, or with ``--store`` a fresh
database on that PostgreSQL), moto's server with its Step Functions interpreter switched on, and DBOS (a library:
a child process runs the W1 workflow on SQLite and, when reachable, on PostgreSQL). The load generator is this
process (asyncio + uvloop, keep-alive connections); its CPU is reported apart from the servers'. ``--quick`` runs
small sizes; ``--help`` lists every size.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import pstats
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from . import accounts, against, backlog, bursts, ceiling, cluster, express, lambda_chain, retention, workloads
from .client import Pool
from .servers import Moto, Statewright, drop_databases

QUICK = {"w1_n": 3000, "w2_n": 2000, "moto_n": 200, "dbos_n": 300, "w3_n": 5000, "w4_n": 20000, "w5_n": 200,
         "moto_w5_n": 10, "half_load_s": 5.0, "w6_n": 40_000, "moto_w6_n": 1000, "w10_n": 1000, "w11_n": 3000,
         "w12_n": 10_000, "w12_w1_n": 3000, "w15_n": 20_000, "w3_ceiling_n": 10_000}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="./dev bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"small sizes for a quick look: {QUICK}")
    parser.add_argument("--only", default="W1,W2,W3,W4,W5,W6,W10", help="workloads to run (default all)")
    parser.add_argument("--w1-n", type=int, default=20_000, help="W1 executions on statewright (default 20000)")
    parser.add_argument("--concurrency", type=int, default=256, help="client connections to statewright (256)")
    parser.add_argument("--moto-n", type=int, default=1000, help="W1 executions on moto (default 1000)")
    parser.add_argument("--moto-concurrency", type=int, default=32, help="client connections to moto (32)")
    parser.add_argument("--dbos-n", type=int, default=1000, help="W1 workflows on DBOS (default 1000)")
    parser.add_argument("--dbos-threads", type=int, default=32, help="concurrent DBOS workflows (default 32)")
    parser.add_argument("--dbos-postgres", default="postgresql://postgres@127.0.0.1:5432/test",
                        help="DBOS system database on PostgreSQL; skipped when unreachable ('' to skip)")
    parser.add_argument("--half-load-s", type=float, default=10.0, help="seconds of W1 at half its peak rate")
    parser.add_argument("--w2-n", type=int, default=20_000, help="W2 activity tasks (default 20000)")
    parser.add_argument("--w2-workers", type=int, default=64, help="W2 long-polling workers (default 64)")
    parser.add_argument("--w3-n", type=int, default=100_000, help="W3 timers (default 100000)")
    parser.add_argument("--w3-spread-s", type=float, default=60.0, help="W3 due times spread over (default 60)")
    parser.add_argument("--w3-start-rate", type=float, default=2000.0,
                        help="starts/s assumed when placing W3's due minute after the start phase (default 2000)")
    parser.add_argument("--w3-ceiling-n", type=int, default=50_000,
                        help="W3's ceilings: timers fired each way past the engine's own (default 50000; 0 skips)")
    parser.add_argument("--w4-n", type=int, default=1_000_000, help="W4 sleeping executions (default 1000000)")
    parser.add_argument("--w5-n", type=int, default=1000, help="W5 Map executions on statewright (default 1000)")
    parser.add_argument("--moto-w5-n", type=int, default=50, help="W5 Map executions on moto (default 50)")
    parser.add_argument("--w6-n", type=int, default=200_000,
                        help="W6 activity tasks started with no worker polling, then drained (default 200000)")
    parser.add_argument("--w6-workers", type=int, default=64, help="W6 long-polling workers draining (default 64)")
    parser.add_argument("--moto-w6-n", type=int, default=5000,
                        help="W6 start phase on moto, if its activity tasks wait for a worker (default 5000)")
    parser.add_argument("--w7-n", type=int, default=6000, help="W7 chain executions per node count (default 6000)")
    parser.add_argument("--w7-rounds", type=int, default=2, help="W7 rounds over 1, 2 and 3 nodes (default 2)")
    parser.add_argument("--w7-quota", type=float, default=0.15,
                        help="W7 CPU quota of each node, in cores (cgroup v1 cpu.cfs_quota_us; default 0.15)")
    parser.add_argument("--w9-rate", type=float, default=1000.0, help="W9: W1 starts/s, alone and beside (1000)")
    parser.add_argument("--w9-s", type=float, default=10.0, help="W9: seconds of each W1 phase (default 10)")
    parser.add_argument("--w9-runaways", type=int, default=1, help="W9: runaway executions (default 1)")
    parser.add_argument("--w9-range", type=int, default=1000,
                        help="W9: items each runaway Pass sums with $reduce (default 1000)")
    parser.add_argument("--w14-rate", type=float, default=200.0,
                        help="W14 (opt-in): the steady account's W1 executions/s, alone and beside (default 200)")
    parser.add_argument("--w14-s", type=float, default=10.0, help="W14: seconds of each phase (default 10)")
    parser.add_argument("--w14-loops", type=int, default=10,
                        help="W14: the runaway account's executions of a tight Pass loop kept running (default 10)")
    parser.add_argument("--w14-flood", type=int, default=32,
                        help="W14: the runaway account's callers flooding StartExecution at once (default 32)")
    parser.add_argument("--w14-nodes", type=int, default=1,
                        help="W14: run it on this many nodes too, on a fresh database of --store (PostgreSQL): "
                             "the runaway account spread over every node, the steady one calling the first "
                             "(default 1: one node only)")
    parser.add_argument("--w14-timers", type=int, default=30_000,
                        help="W14 (b): the runaway account's Waits ending in one second, beside 50 of the steady "
                             "account's a second later (default 30000; 0: skip)")
    parser.add_argument("--w15-n", type=int, default=100_000,
                        help="W15 (opt-in): executions whose timers are due in the same second (default 100000)")
    parser.add_argument("--w15-rate", type=float, default=100.0,
                        help="W15: the neighbour's W1 executions/s, beside its start every 50 ms (default 100)")
    parser.add_argument("--w15-alone-s", type=float, default=10.0,
                        help="W15: seconds the neighbour runs alone (default 10), and beside the bombs")
    parser.add_argument("--w15-bombs", type=int, default=20,
                        help="W15 (b): executions started at once whose first state is a runaway JSONata (20)")
    parser.add_argument("--w15-cases", default="abcdef",
                        help="W15: which bursts, by letter (default abcdef: all; see bench/bursts.py)")
    parser.add_argument("--w10-n", type=int, default=5000,
                        help="W10 executions of the Lambda chain, 5 invocations each (default 5000)")
    parser.add_argument("--w11-n", type=int, default=20_000,
                        help="W11: W1 executions as Standard, async Express and sync Express each (default 20000)")
    parser.add_argument("--w12-n", type=int, default=100_000,
                        help="W12: closed W1 executions whose hot database is measured (default 100000; 1000000 "
                             "measures the million the figures are given per, with some 25 GB free under $TMPDIR)")
    parser.add_argument("--w12-w1-n", type=int, default=20_000,
                        help="W12: W1 executions run with nothing to compact, then while compacting (default 20000)")
    parser.add_argument("--no-peers", action="store_true", help="statewright only")
    parser.add_argument("--store", metavar="URL", default=None,
                        help="a PostgreSQL server (postgresql://...): each statewright server keeps its data in a "
                             "fresh database there (dropped at the end) instead of SQLite")
    parser.add_argument("--profile", action="store_true",
                        help="also run W1, W2 and W3 once more under cProfile and print where the server's time goes")
    parser.add_argument("--out", type=Path, help="write every figure as JSON to this file")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data directories, databases and logs")
    parser.add_argument("--against", metavar="REV", default=None,
                        help="run the chosen workloads on REV (a git commit, branch or tag, checked out in a worktree) "
                             "and on the working tree, alternated, and print both side by side")
    parser.add_argument("--rounds", type=int, default=2, help="with --against: rounds on each side (default 2)")
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            if getattr(args, name) == parser.get_default(name):
                setattr(args, name, value)
    args.only = {name.strip().upper() for name in args.only.split(",")}
    return args


def reachable(url: str) -> bool:
    host_port = url.split("@")[-1].split("/")[0]
    host, _, port = host_port.partition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port or 5432)), timeout=1).close()
        return True
    except OSError:
        return False


def run_dbos(url: str, n: int, threads: int, log: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.dbos_chain", "--db", url, "--n", str(n), "--threads", str(threads)]
    with open(log, "ab") as output:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=output, timeout=1800,
                              cwd=Path(__file__).resolve().parent.parent)
    lines = [line for line in done.stdout.decode().splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"error": f"DBOS exited {done.returncode}; see {log}"}
    return orjson.loads(lines[-1])


class Table:
    def __init__(self) -> None:
        self.rows: list[list[str]] = []

    def add(self, workload: str, metric: str, ours: str, peers: dict[str, str] | None = None, target: str = "",
            verdict: bool | None = None) -> None:
        peers = peers or {}
        status = "" if verdict is None else ("MET" if verdict else "MISSED")
        self.rows.append([workload, metric, ours, peers.get("moto", ""), peers.get("dbos/sqlite", ""),
                          peers.get("dbos/postgres", ""), f"{target}: {status}" if target else ""])

    def render(self) -> str:
        header = ["workload", "metric", "statewright", "moto (ratio)", "DBOS sqlite (ratio)", "DBOS postgres (ratio)",
                  "target"]
        widths = [max(len(row[index]) for row in [header, *self.rows]) for index in range(len(header))]
        lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
                 for row in [header, ["-" * width for width in widths], *self.rows]]
        return "\n".join(lines)


def fmt(value: float | None, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def ratio(ours: float | None, theirs: float | None) -> str:
    if not ours or not theirs:
        return ""
    return f" ({ours / theirs:,.1f}x)"


def with_ratio(theirs: dict[str, Any] | str | None, key: str, ours: float | None, digits: int = 0) -> str:
    if theirs is None:
        return "not run"
    if isinstance(theirs, str):
        return theirs
    if "error" in theirs:
        return f"failed: {theirs['error'][:60]}"
    return fmt(theirs.get(key), digits) + ratio(ours, theirs.get(key))


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


async def main_async(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    results: dict[str, Any] = {"args": {key: (sorted(value) if isinstance(value, set) else str(value))
                                        for key, value in vars(args).items()}}
    table = Table()
    peers = not args.no_peers
    if "W1" in args.only or "W5" in args.only:
        await w1_w5(args, work, results, table, peers)
    if "W2" in args.only:
        await w2(args, work, results, table)
        if args.profile:
            results["profile_w2"] = await profile_w2(args, work)
    if "W3" in args.only:
        await w3(args, work, results, table)
        if args.profile:
            results["profile_w3"] = await profile_w3(args, work)
    if "W4" in args.only:
        await w4(args, work, results, table)
    if "W6" in args.only:
        await w6(args, work, results, table, peers)
    if "W7" in args.only:
        await w7(args, work, results, table)
    if "W9" in args.only:
        await w9(args, work, results, table)
    if "W14" in args.only:
        await w14(args, work, results, table)
    if "W10" in args.only:
        await w10(args, work, results, table)
    if "W15" in args.only:
        await w15(args, work, results, table)
    if "W11" in args.only:
        await w11(args, work, results, table)
    if "W12" in args.only:
        await w12(args, work, results, table)
    results["table"] = table.render()
    return results


async def w7(args: argparse.Namespace, work: Path, results: dict, table: Table) -> None:
    """Several nodes on PostgreSQL (opt-in: --only W7 --store postgresql://...): scale-out, failover, hand-over."""
    if not args.store:
        table.add("W7 cluster", "nodes on one PostgreSQL", "not run: pass --store postgresql://...")
        return
    run = await cluster.w7(work, args.store, args.w7_n, args.concurrency, args.w7_quota, args.w7_rounds)
    results["w7"] = run
    for key, starts in (("scale_out", "named starts"), ("scale_out_unnamed", "unnamed starts")):
        one = run[key][0]["transitions_per_s"]
        for point in run[key]:
            ratio = point["transitions_per_s"] / one
            rounds = ", ".join(f"{each:.2f}x" for each in point["round_ratios"])
            table.add("W7 cluster", f"committed transitions/s, {starts}, {point['nodes']} node(s) at "
                      f"{args.w7_quota} core each, mean of {run['rounds']} rounds",
                      f"{point['transitions_per_s']:,.0f} ({ratio:.2f}x one node; rounds {rounds})",
                      target=">= 2.5x one node" if point["nodes"] == 3 else "",
                      verdict=ratio >= 2.5 if point["nodes"] == 3 else None)
            table.add("W7 cluster", f"CPU used per node, {starts}, {point['nodes']} node(s), cores (quota "
                      f"{args.w7_quota})", f"{point['node_cores']:.3f}")
    table.add("W7 cluster", "SIGKILL of 1 of 3 nodes: every shard served again after, s", f"{run['failover_s']:.2f}",
              target="< 11 s (one lease + 1 s)", verdict=run["failover_s"] < 11)
    table.add("W7 cluster", "SIGTERM of 1 of 3 nodes: every shard served again after, ms (each round)",
              " / ".join(f"{each * 1000:.0f}" for each in run["handover_s"]), target="< 100 ms",
              verdict=max(run["handover_s"]) < 0.1)
    for dispatch in run["dispatch"]:
        moderate = dispatch["rate_per_s"] == cluster.MODERATE_RATE_PER_S
        load = (f"{dispatch['rate_per_s']}/s, machine {dispatch['machine_busy']:.0%} busy, "
                f"{dispatch['workers']} workers on one node")
        for where, whose in (("across", "other nodes' executions"), ("local", "the polled node's own executions")):
            p50, p99, worst = (dispatch[f"{where}_{stat}_ms"] for stat in ("p50", "p99", "max"))
            checked = moderate and where == "across"
            table.add("W7 cluster", f"dispatch p50 / p99 / max, tasks of {whose} ({load}, "
                      f"{dispatch[f'{where}_n']} tasks), ms", f"{p50:.1f} / {p99:.1f} / {worst:.1f}",
                      target="p99 < 20 ms" if checked else "", verdict=p99 < 20 if checked else None)


async def w10(args: argparse.Namespace, work: Path, results: dict, table: Table) -> None:
    """A chain of lambda:invoke states against a local HTTP function (serve --functions)."""
    run = await lambda_chain.w10(work, args.w10_n, args.concurrency)
    results["w10"] = run
    ours, direct = run["statewright"], run["direct"]
    table.add("W10 Lambda", f"invocations/s, {run['links']}-invoke chains (the function called directly: peer)",
              f"{ours['invocations_per_s']:,.0f} ({ours['invocations_per_s'] / direct['invocations_per_s']:.2f}x "
              f"direct {direct['invocations_per_s']:,.0f})", target=">= 1,000/s",
              verdict=ours["invocations_per_s"] >= 1000)
    table.add("W10 Lambda", "server CPU per invocation, us",
              f"{ours['server_cpu_s'] / (ours['n'] * run['links']) * 1e6:,.0f}")


async def w12(args: argparse.Namespace, work: Path, results: dict, table: Table) -> None:
    """The hot database of closed executions with and without compaction (opt-in: --only W12; SQLite only)."""
    if args.store:
        table.add("W12 retention", "hot database per closed executions", "not run: the virtual clock needs SQLite")
        return
    run = await retention.w12(work, args.w12_n, args.w12_w1_n, args.concurrency)
    results["w12"] = run
    per = f"per {retention.PER:,} closed W1 executions"
    gb = 1 << 30
    table.add("W12 retention", f"hot database {per}, histories in it, GiB (n={run['n']:,})",
              fmt(run["without_per"] / gb, 2))
    table.add("W12 retention", f"hot database {per}, histories compacted, GiB",
              f"{run['with_per'] / gb:,.2f} ({run['with_per'] / run['without_per']:.2f}x)")
    table.add("W12 retention", f"payload store {per} (one gzip object each), GiB", fmt(run["payload_per"] / gb, 2))
    table.add("W12 retention", "compaction in the background, executions/s", fmt(run["compacted_per_s"]))
    table.add("W12 retention", f"W1 completed executions/s: nothing to compact / while compacting (n={run['w1_n']:,})",
              f"{run['w1_quiet_per_s']:,.0f} / {run['w1_beside_per_s']:,.0f} "
              f"({run['w1_beside_per_s'] / run['w1_quiet_per_s']:.2f}x)")


async def w11(args: argparse.Namespace, work: Path, results: dict, table: Table) -> None:
    """W1 as an EXPRESS machine, through StartExecution and StartSyncExecution, beside W1 as STANDARD (opt-in:
    --only W11)."""
    server = Statewright(work / "w11-statewright", postgres=args.store)
    server.start()
    pool = Pool(server.endpoint, args.concurrency)
    try:
        run = await express.w11(server, pool, args.w11_n, args.concurrency, args.half_load_s)
    finally:
        pool.close()
        server.stop()
    results["w11"] = run
    standard = run["standard"]["executions_per_s"]
    label = f"(n={args.w11_n:,}, {args.concurrency} conns)"
    table.add("W11 express", f"Standard W1: completed executions/s {label}", fmt(standard))
    for kind, name in (("async", "StartExecution"), ("sync", "StartSyncExecution")):
        rate = run[kind]["executions_per_s"]
        table.add("W11 express", f"Express W1 via {name}: completed executions/s",
                  f"{fmt(rate)} ({rate / standard:.1f}x Standard)", target=">= 3x Standard",
                  verdict=rate >= 3 * standard)
        table.add("W11 express", f"Express W1 via {name}: server CPU us/execution",
                  fmt(run[kind]["server_cpu_per_execution_us"]))
    floor_us = run["floor"]["server_cpu_per_execution_us"]
    standard_us = run["standard"]["server_cpu_per_execution_us"]
    table.add("W11 express", "server CPU us/execution: Standard W1 / a one-Pass StartSyncExecution (the request's "
              "floor)", f"{fmt(standard_us)} / {fmt(floor_us)} (so at most {standard_us / floor_us:.1f}x Standard)")
    half = run["sync_half_load"]
    table.add("W11 express", f"StartSyncExecution p50 / p99 at half peak ({half['rate_per_s']:,.0f}/s), ms",
              f"{fmt(ms(half['p50_s']), 1)} / {fmt(ms(half['p99_s']), 1)}", target="p99 < 5 ms",
              verdict=half["p99_s"] < 0.005)
    table.add("W11 express", "errors: Standard / async / sync / at half peak",
              f"{run['standard']['errors']} / {run['async']['errors']} / {run['sync']['errors']} / {half['errors']}")


def add_beside(table: Table, workload: str, label: str, beside_what: str, run: dict) -> None:
    """The rows of a steady W1 alone and beside a load (``run``'s pooled ``alone`` and ``beside``): its p50 / p99
    each way, the target on p99, and the two alone phases against each other (the host's own noise)."""
    alone, beside = run["alone"], run["beside"]
    change = beside["p99_s"] / alone["p99_s"] - 1
    table.add(workload, f"{label} alone: p50 / p99 end-to-end, ms",
              f"{fmt(ms(alone['p50_s']), 1)} / {fmt(ms(alone['p99_s']), 1)}")
    table.add(workload, f"{label} beside {beside_what}: p50 / p99, ms",
              f"{fmt(ms(beside['p50_s']), 1)} / {fmt(ms(beside['p99_s']), 1)} ({change:+.1%} p99)",
              target="p99 within 10 %", verdict=abs(change) < 0.10)
    first, second = (phase["p99_s"] for phase in alone["phases"])
    table.add(workload, f"{label} alone, first and second time: p99, ms (the host's own noise)",
              f"{fmt(ms(first), 1)} / {fmt(ms(second), 1)} ({second / first - 1:+.1%})")


async def w14(args: argparse.Namespace, work: Path, results: dict, table: Table) -> None:
    """A runaway account beside a steady one (opt-in: --only W14): the front door's buckets and fair queues."""
    server = accounts.server(work, args.store)
    try:
        server.start()  # inside: a server that never answered is stopped too
        run = await accounts.runaway_account_beside_w1([server], args.concurrency, args.w14_rate, args.w14_s,
                                                       args.w14_loops, args.w14_flood)
    finally:
        server.stop()
    results["w14"] = run
    _w14_rows("W14 accounts", run, args, table)
    if args.w14_nodes > 1:
        if not args.store:
            raise SystemExit("bench: --w14-nodes needs --store postgresql://... (the nodes share its database)")
        name, store = cluster.fresh_database(args.store, "w14-cluster")
        nodes = cluster.start_nodes(work / "w14-cluster", store, args.w14_nodes, None, (
            "--auth", "sigv4", "--accounts", str(accounts.accounts_file(work)), "--limits", "aws"))
        try:
            run = await accounts.runaway_account_beside_w1(nodes, args.concurrency, args.w14_rate, args.w14_s,
                                                           args.w14_loops, args.w14_flood)
        finally:
            cluster.stop_nodes(nodes)
            cluster.drop_database(args.store, name)
        results["w14_nodes"] = run
        _w14_rows(f"W14 on {args.w14_nodes} nodes", run, args, table)
    if args.w14_timers:
        server = accounts.server(work, args.store, limits="local")
        try:
            server.start()
            timers = await accounts.timers_beside_a_burst(server, args.w14_timers, 50, args.concurrency)
        finally:
            server.stop()
        results["w14_timers"] = timers
        label = f"W14 (b) {args.w14_timers:,} timers"
        table.add(label, "the runaway account's burst: drained after its due second / its last close, s",
                  f"{timers['burst_drain_s']:.2f} / {timers['burst_last_s']:.2f}")
        table.add(label, f"the steady account's {timers['steady_closed']} Waits a second later: late p50 / p99 / "
                  "max, ms", f"{timers['steady_late_p50_s'] * 1000:.0f} / {timers['steady_late_p99_s'] * 1000:.0f}"
                  f" / {timers['steady_late_max_s'] * 1000:.0f}")


def _w14_rows(workload: str, run: dict, args: argparse.Namespace, table: Table) -> None:
    add_beside(table, workload, f"steady account's W1 at {args.w14_rate:,.0f}/s", "the runaway account", run)
    for index, flood in enumerate(run["runaway"]):
        allowed = 1300 + 300 * flood["seconds"]  # AWS's StartExecution bucket in us-east-1: full, then refilled
        table.add(workload, f"runaway account, round {index + 1}: starts accepted / refused ({args.w14_flood} "
                  f"callers, {flood['seconds']:.1f} s)", f"{flood['accepted']:,} / {flood['throttled']:,}",
                  target="accepted <= its bucket", verdict=flood["accepted"] <= allowed)
        table.add(workload, f"runaway account, round {index + 1}: loops started / transitions committed "
                  "(both accounts)", f"{flood['loops_started']:,} / {flood['transitions']:,.0f}")


async def w9(args: argparse.Namespace, work: Path, results: dict, table: Table) -> None:
    """W1 at a steady rate alone, then beside runaway executions (opt-in: --only W9): the engine's fairness."""
    server = Statewright(work / "w9-statewright", postgres=args.store)
    server.start()
    pool = Pool(server.endpoint, args.concurrency)
    try:
        run = await workloads.runaway_beside_w1(server, pool, args.w9_rate, args.w9_s, args.w9_runaways,
                                                args.w9_range)
    finally:
        pool.close()
        server.stop()
    results["w9"] = run
    alone, beside = run["alone"], run["beside"]
    add_beside(table, "W9 runaway", f"W1 at {args.w9_rate:,.0f}/s", f"{run['runaways']} looping JSONata Pass "
               f"($reduce over {run['range_items']:,} items)", run)
    table.add("W9 runaway", "commands the engine thread took over 5 ms to apply: alone / beside",
              f"{alone['applies_over_5ms']:,.0f} / {beside['applies_over_5ms']:,.0f}")
    table.add("W9 runaway", "W1 executions succeeded alone / beside",
              f"{alone['succeeded']:,} / {beside['succeeded']:,}")
    table.add("W9 runaway", "history events the runaways reached meanwhile", ", ".join(
        f"{events:,}" for events in run["runaway_events"]))


async def w15(args: argparse.Namespace, work: Path, results: dict, table: Table) -> None:
    """Bursts beside a neighbour (opt-in: --only W15): the engine's fairness (bursts.py)."""
    cases = {
        "c": ("10 retrying heavy Tasks", bursts.retrying_bombs(10)),
        "d": ("2 Maps of 5,000 + 50 Parallels of 100", bursts.wide_fan_outs(2, 5_000, 50, 100)),
        "e": ("5,000 nested executions", bursts.nested_starts(2, 2_500)),
        "f": ("20,000 task results at once", bursts.results_at_once(20_000, args.concurrency)),
    }
    server = Statewright(work / "w15-statewright", postgres=args.store)
    server.start()
    try:
        if "a" in args.w15_cases:
            results["w15"] = await bursts.timer_burst(server, args.w15_n, args.w15_rate, args.w15_alone_s,
                                                      args.concurrency)
            _w15_timers(results["w15"], table)
        if "b" in args.w15_cases:
            results["w15_bombs"] = await bursts.bomb_burst(server, args.w15_bombs, args.w15_rate, args.w15_alone_s,
                                                           args.concurrency)
            _w15_bombs(results["w15_bombs"], table)
        for letter, (title, (prepare, fire)) in cases.items():
            if letter in args.w15_cases:
                case = await bursts.burst_case(server, letter, prepare, fire, args.w15_rate, args.w15_alone_s,
                                               args.concurrency)
                results[f"w15_{letter}"] = case
                _w15_case(f"W15 ({letter}) {title}", case, table)
    finally:
        server.stop()


def _neighbour_rows(label: str, alone: dict, beside: dict, table: Table) -> None:
    table.add(label, "neighbour's StartExecution every 50 ms alone: p50 / p99 / max, ms",
              f"{fmt(ms(alone['probe_p50_s']), 1)} / {fmt(ms(alone['probe_p99_s']), 1)} / "
              f"{fmt(ms(alone['probe_max_s']), 1)}")
    table.add(label, "the same beside the burst: p50 / p99 / max, ms",
              f"{fmt(ms(beside['probe_p50_s']), 1)} / {fmt(ms(beside['probe_p99_s']), 1)} / "
              f"{fmt(ms(beside['probe_max_s']), 1)}", target="p99 < 100 ms", verdict=beside["probe_p99_s"] < 0.1)
    ratio = beside["probe_p99_s"] / alone["probe_p99_s"]
    table.add(label, "the neighbour's p99 beside the burst / alone", f"{ratio:.1f}x", target="<= 2x",
              verdict=ratio <= 2)
    table.add(label, "neighbour's W1 end to end, alone / beside: p99, ms",
              f"{fmt(ms(alone['chain_p99_s']), 1)} / {fmt(ms(beside['chain_p99_s']), 1)}")


def _w15_timers(run: dict, table: Table) -> None:
    label = f"W15 (a) {run['n']:,} timers"
    _neighbour_rows(label, run["neighbour_alone"], run["neighbour_beside"], table)
    burst_alone, burst_beside = run["burst_alone"], run["burst_beside"]
    share = burst_alone["drain_s"] / burst_beside["drain_s"]
    table.add(label, "burst drained alone / beside the neighbour, s",
              f"{burst_alone['drain_s']:.2f} / {burst_beside['drain_s']:.2f} ({share:.0%} of its rate alone)",
              target=">= 80 %", verdict=share >= 0.8)


def _w15_bombs(bombs: dict, table: Table) -> None:
    label = f"W15 (b) {bombs['bombs']} bombs"
    _neighbour_rows(label, bombs["neighbour_alone"], bombs["neighbour_beside"], table)
    table.add(label, "the bombs: statuses, and s until the last closed",
              f"{bombs['statuses']}, {bombs['bombs_done_s']:.1f}")


def _w15_case(label: str, case: dict, table: Table) -> None:
    _neighbour_rows(label, case["neighbour_alone"], case["neighbour_beside"], table)
    share = case["burst_alone_s"] / case["burst_beside_s"]
    table.add(label, "burst drained alone / beside the neighbour, s",
              f"{case['burst_alone_s']:.2f} / {case['burst_beside_s']:.2f} ({share:.0%} of its rate alone)",
              target=">= 80 %", verdict=share >= 0.8)


async def w1_w5(args: argparse.Namespace, work: Path, results: dict, table: Table, peers: bool) -> None:
    server = Statewright(work / "w1-statewright", postgres=args.store)
    server.start()
    pool = Pool(server.endpoint, args.concurrency)
    moto = Moto(work / "moto.log") if peers else None
    try:
        if "W1" in args.only:
            ours = await workloads.run_to_end(server, pool, workloads.chain_definition(), workloads.chain_input,
                                              args.w1_n, args.concurrency, "w1", 600)
            half_rate = ours["executions_per_s"] / 2
            half = await workloads.latency_at_rate(server, pool, workloads.chain_definition(), workloads.chain_input,
                                                   half_rate, args.half_load_s, "w1-half")
            results["w1"] = {"statewright": ours, "statewright_half_load": half,
                             "store": "PostgreSQL (one node)" if args.store else "SQLite"}
        if "W5" in args.only:
            results.setdefault("w5", {})["statewright"] = await workloads.run_to_end(
                server, pool, workloads.MAP_DEFINITION, lambda index: workloads.MAP_INPUT, args.w5_n,
                min(args.concurrency, 64), "w5", 600)
        results["statewright_memory"] = server.memory()
    finally:
        pool.close()
        server.stop()
    if args.profile and "W1" in args.only:
        results["profile"] = await profile_w1(args, work)
    if peers:
        moto.start()
        moto_pool = Pool(moto.endpoint, args.moto_concurrency)
        try:
            if "W1" in args.only:
                results["w1"]["moto"] = await guarded(workloads.run_to_end(
                    moto, moto_pool, workloads.chain_definition(), workloads.chain_input, args.moto_n,
                    args.moto_concurrency, "w1", 600))
            if "W5" in args.only:
                results["w5"]["moto"] = await guarded(workloads.run_to_end(
                    moto, moto_pool, workloads.MAP_DEFINITION, lambda index: workloads.MAP_INPUT, args.moto_w5_n,
                    min(args.moto_concurrency, 8), "w5", 600))
        finally:
            moto_pool.close()
            moto.stop()
        if "W1" in args.only:
            results["w1"]["dbos/sqlite"] = run_dbos(f"sqlite:///{work / 'dbos.sqlite'}", args.dbos_n,
                                                    args.dbos_threads, work / "dbos.log")
            if args.dbos_postgres and reachable(args.dbos_postgres):
                results["w1"]["dbos/postgres"] = run_dbos(args.dbos_postgres, args.dbos_n, args.dbos_threads,
                                                          work / "dbos.log")
            else:
                results["w1"]["dbos/postgres"] = "PostgreSQL not reachable"
    if "W1" in args.only:
        add_w1(results["w1"], table, peers)
    if "W5" in args.only:
        add_w5(results["w5"], table, peers)


async def guarded(coroutine: Any) -> dict[str, Any]:
    try:
        return await coroutine
    except Exception as exc:  # a peer that cannot run a workload is reported, not fatal
        return {"error": f"{type(exc).__name__}: {exc}"}


def add_w1(w1: dict, table: Table, peers: bool) -> None:
    ours, half = w1["statewright"], w1["statewright_half_load"]
    table.add("W1 chain", "statewright's store", w1["store"])
    moto = w1.get("moto") if peers else "not run"
    dbos_sqlite = w1.get("dbos/sqlite") if peers else "not run"
    dbos_pg = w1.get("dbos/postgres") if peers else "not run"
    rate = ours["executions_per_s"]

    def peer_row(key: str) -> dict[str, str]:
        return {name: with_ratio(peer, key, rate)
                for name, peer in (("moto", moto), ("dbos/sqlite", dbos_sqlite), ("dbos/postgres", dbos_pg))}

    moto_rate = moto.get("executions_per_s") if isinstance(moto, dict) else None
    table.add("W1 chain", f"completed executions/s (n={ours['n']:,}, {ours['concurrency']} conns)", fmt(rate),
              peer_row("executions_per_s"), ">= 20x moto",
              rate >= 20 * moto_rate if moto_rate else None)
    dbos_steps = {name: ({"steps": peer["steps_per_s"]} if isinstance(peer, dict) and "steps_per_s" in peer else peer)
                  for name, peer in (("dbos/sqlite", dbos_sqlite), ("dbos/postgres", dbos_pg))}
    table.add("W1 chain", "committed transitions/s (DBOS: steps/s)", fmt(ours["transitions_per_s"]),
              {"moto": "-", "dbos/sqlite": with_ratio(dbos_steps["dbos/sqlite"], "steps", ours["transitions_per_s"]),
               "dbos/postgres": with_ratio(dbos_steps["dbos/postgres"], "steps", ours["transitions_per_s"])},
              ">= 10,000", ours["transitions_per_s"] >= 10_000)
    for key, label in (("p50_s", "p50"), ("p99_s", "p99")):
        table.add("W1 chain", f"{label} end-to-end latency at peak, ms", fmt(ms(ours[key]), 1), {
            name: (f"{fmt(ms(peer[key]), 1)}" if isinstance(peer, dict) and key in peer else with_ratio(peer, key, 0))
            for name, peer in (("moto", moto), ("dbos/sqlite", dbos_sqlite), ("dbos/postgres", dbos_pg))})
    table.add("W1 chain", f"p99 end-to-end at half peak ({half['rate_per_s']:,.0f}/s), ms", fmt(ms(half["p99_s"]), 1),
              target="< 10 ms (all 10 transitions durable)", verdict=ms(half["p99_s"]) < 10)
    table.add("W1 chain", "p50 end-to-end at half peak, ms", fmt(ms(half["p50_s"]), 1))
    table.add("W1 chain", "engine apply (decide) us/transition", fmt(ours["apply_us_per_transition"], 1))
    table.add("W1 chain", "commit us/transition (shared by the batch)", fmt(ours["commit_us_per_transition"], 1))
    table.add("W1 chain", "writes per group commit / mean commit ms",
              f"{ours['writes_per_commit']:,.1f} / {ours['commit_ms_mean']:,.1f}")
    cpu_peers = {name: (f"{fmt(peer['cpu_per_step_us'])} (incl. load)" if isinstance(peer, dict)
                        and "cpu_per_step_us" in peer else with_ratio(peer, "x", 0))
                 for name, peer in (("dbos/sqlite", dbos_sqlite), ("dbos/postgres", dbos_pg))}
    if isinstance(moto, dict) and "server_cpu_per_execution_us" in moto:
        cpu_peers["moto"] = f"{fmt(moto['server_cpu_per_execution_us'] / 10)} (per state)"
    table.add("W1 chain", "server CPU us/transition", fmt(ours["server_cpu_per_transition_us"], 1), cpu_peers,
              "<= 100 us", ours["server_cpu_per_transition_us"] <= 100)
    table.add("W1 chain", "load generator CPU us/execution", fmt(ours["client_cpu_per_execution_us"]))


def add_w5(w5: dict, table: Table, peers: bool) -> None:
    ours = w5["statewright"]
    moto = w5.get("moto") if peers else "not run"
    table.add("W5 map", f"completed executions/s (n={ours['n']:,}, 100 items x 2 Pass)",
              fmt(ours["executions_per_s"], 1),
              {"moto": with_ratio(moto, "executions_per_s", ours["executions_per_s"], 1),
               "dbos/sqlite": "not run (W1 only)", "dbos/postgres": "not run (W1 only)"})
    table.add("W5 map", "committed transitions/s", fmt(ours["transitions_per_s"]))
    table.add("W5 map", "p50 / p99 end-to-end, ms", f"{fmt(ms(ours['p50_s']), 1)} / {fmt(ms(ours['p99_s']), 1)}",
              {"moto": (f"{fmt(ms(moto['p50_s']), 1)} / {fmt(ms(moto['p99_s']), 1)}"
                        if isinstance(moto, dict) and "p50_s" in moto else with_ratio(moto, "x", 0))})
    table.add("W5 map", "server CPU us/transition", fmt(ours["server_cpu_per_transition_us"], 1))


async def w2(args: argparse.Namespace, work: Path, results: dict, table: Table) -> None:
    server = Statewright(work / "w2-statewright", postgres=args.store)
    server.start()
    try:
        run = await guarded(workloads.activities(server, args.w2_n, args.w2_workers, args.concurrency,
                                                         args.half_load_s))
    finally:
        server.stop()
    results["w2"] = run
    peers = {"moto": "not run (no GetActivityTask)", "dbos/sqlite": "not run (W1 only)",
             "dbos/postgres": "not run (W1 only)"}
    if "error" in run:
        table.add("W2 activities", "tasks/s", f"failed: {run['error'][:60]}", peers)
        return
    table.add("W2 activities", f"tasks/s (n={run['n']:,}, {run['workers']} workers)", fmt(run["tasks_per_s"]), peers,
              ">= 2,000", run["tasks_per_s"] >= 2000)
    table.add("W2 activities", f"dispatch p50 / p99 / max at half peak ({run['half_rate_per_s']:,.0f}/s), ms",
              f"{fmt(ms(run['dispatch_p50_s']), 1)} / {fmt(ms(run['dispatch_p99_s']), 1)} / "
              f"{fmt(ms(run['dispatch_max_s']), 1)}", {}, "p99 < 20 ms", ms(run["dispatch_p99_s"]) < 20)
    table.add("W2 activities", "succeeded / reply errors", f"{run['succeeded']:,} / {run['reply_errors']:,}")
    table.add("W2 activities", "server CPU us/task (3 steps: schedule, start, succeed)",
              fmt(run["server_cpu_per_task_us"]))
    table.add("W2 activities", "load generator + workers CPU us/task", fmt(run["client_cpu_per_task_us"]))


async def w3(args: argparse.Namespace, work: Path, results: dict, table: Table) -> None:
    out = {}
    for restart in (False, True):
        server = Statewright(work / f"w3-statewright-{'restart' if restart else 'steady'}", postgres=args.store)
        server.start()
        try:
            out["restart" if restart else "steady"] = await workloads.timers(
                server, args.w3_n, args.w3_start_rate, args.w3_spread_s, args.concurrency, restart)
        finally:
            server.stop()
    results["w3"] = out
    for key, label in (("steady", "W3 timers"), ("restart", "W3 timers + kill -9")):
        run = out[key]
        table.add(label, f"lateness p50 / p99 / max, ms (n={run['n']:,} in {run['spread_s']:.0f} s)",
                  f"{fmt(ms(run['lateness_p50_s']), 1)} / {fmt(ms(run['lateness_p99_s']), 1)} / "
                  f"{fmt(ms(run['lateness_max_s']), 1)}", {"moto": "not run (in memory)"},
                  "p99 < 100 ms", ms(run["lateness_p99_s"]) < 100)
        table.add(label, "succeeded / lost / started after due",
                  f"{run['succeeded']:,} / {run['lost']:,} / {run['started_after_due']:,}", {},
                  "nothing lost", run["lost"] == 0)
        table.add(label, "start rate /s", fmt(run["start_rate_per_s"]))
        if key == "restart":
            table.add(label, "killed before first due, s / restart to serving, s",
                      f"{run['killed_before_first_due_s']:.1f} / {run['restart_to_serving_s']:.2f}")
    if args.w3_ceiling_n and not args.store:
        results["w3_ceilings"] = found = await ceiling.ceilings(work, args.w3_ceiling_n, args.concurrency, 300)
        label = f"W3 ceilings (n={found['n']:,})"
        table.add(label, "fsync: one-row commits/s (ms each)",
                  f"{fmt(found['fsync']['commits_per_s'])} ({fmt(found['fsync']['ms_per_commit'], 2)})")
        for key, what in (("store_only", "store only: its writes, 300 a commit"),
                          ("skeleton", "skeleton: + decode, change, encode the state"),
                          ("engine", "the engine, in process, no HTTP")):
            run = found[key]
            extra = f", {fmt(run['writes_per_commit'])} a commit" if key == "engine" else ""
            table.add(label, f"{what}: fired/s (CPU us each{extra})", f"{fmt(run['per_s'])} ({fmt(run['cpu_us'])})",
                      {}, *(("1M in 30 s: 33,333/s", run["per_s"] >= 33_333) if key == "engine" else ()))


async def w4(args: argparse.Namespace, work: Path, results: dict, table: Table) -> None:
    server = Statewright(work / "w4-statewright", postgres=args.store)
    server.start()
    try:
        run = await workloads.sleepers(server, args.w4_n, args.concurrency)
    finally:
        server.stop()
    results["w4"] = run
    mib = 1024 * 1024
    table.add("W4 sleepers", f"start rate /s (n={run['n']:,} open)", fmt(run["start_rate_per_s"]),
              {"moto": "not run (in memory)"})
    table.add("W4 sleepers", "server RSS / peak, MiB", f"{fmt(run['rss_bytes'] / mib)} / "
              f"{fmt(run['rss_peak_bytes'] / mib)}", {}, f"< 500 MiB at {run['n']:,}",
              run["rss_peak_bytes"] < 500 * mib)
    table.add("W4 sleepers", "database size, MiB (bytes/execution)",
              f"{fmt(run['database_bytes'] / mib)} ({fmt(run['database_bytes'] / run['n'])})", {},
              "<= 1 KiB/execution", run["database_bytes"] / run["n"] <= 1024)
    if run["footprint"]:
        table.add("W4 sleepers", "bytes/execution by table: pages (rows' own)", ", ".join(
            f"{name} {fmt(pages / run['n'])} ({fmt(own / run['n'])})" for name, (pages, own)
            in run["footprint"].items() if pages / run["n"] >= 1))
    table.add("W4 sleepers", "kill -9, restart to serving, s", f"{run['restart_to_serving_s']:.2f}", {}, "< 10 s",
              run["restart_to_serving_s"] < 10)
    table.add("W4 sleepers", "open-executions gauge after restart (s to count)",
              f"{fmt(run['open_gauge'])} ({fmt(run['open_gauge_after_restart_s'], 1)})")


async def w6(args: argparse.Namespace, work: Path, results: dict, table: Table, peers: bool) -> None:
    moto_run: dict[str, Any] | str = "not run"
    if peers:
        moto = Moto(work / "moto-w6.log")
        moto.start()
        try:
            moto_run = await backlog.peer(moto, args.moto_w6_n, args.moto_concurrency)
        finally:
            moto.stop()
    server = Statewright(work / "w6-statewright", postgres=args.store)
    server.start()
    try:
        ours = await guarded(backlog.statewright(server, args.w6_n, args.w6_workers, args.concurrency))
    finally:
        server.stop()
    results["w6"] = {"statewright": ours, "moto": moto_run}
    add_w6(ours, moto_run, table)


def add_w6(run: dict, moto: dict | str, table: Table) -> None:
    mib, kib = 1024 * 1024, 1024
    if "error" in run:
        table.add("W6 backlog", "waiting activity tasks", f"failed: {run['error'][:60]}")
        return
    if isinstance(moto, str):
        moto_growth = moto
    elif not moto.get("supported"):
        moto_growth = f"no activity tasks ({moto['short']})"
    else:
        moto_growth = (f"{fmt(moto['growth_per_1000_bytes'] / kib)} (n={moto['n']:,}, from "
                       f"{moto['growth_from']:,})")
    samples = run["samples"]
    first, last = samples[1], samples[-1]
    table.add("W6 backlog", f"server RSS at {first['started']:,} / {last['started']:,} waiting tasks, MiB",
              f"{fmt(first['VmRSS'] / mib)} / {fmt(last['VmRSS'] / mib)}")
    table.add("W6 backlog", "server RSS after each tenth of the starts, MiB",
              " ".join(fmt(sample["VmRSS"] / mib) for sample in samples[1:]))
    growth = run["growth_per_1000_bytes"]
    table.add("W6 backlog", f"RSS growth per 1,000 waiting tasks past {run['growth_from'] or 0:,}, KiB (heap only)",
              f"{fmt(None if growth is None else growth / kib, 1)} "
              f"({fmt(None if growth is None else run['growth_anon_per_1000_bytes'] / kib, 1)})",
              {"moto": moto_growth})
    table.add("W6 backlog", "in memory at the end: outbox window / activity backlog",
              f"{fmt(last.get('outbox_held'))} / {fmt(last.get('activity_backlog'))}")
    table.add("W6 backlog", "start rate /s / outbox rows before kill -9",
              f"{fmt(run['start_rate_per_s'])} / {fmt(run['outbox_rows'])}")
    held = run["held_after_restart"] or {}
    table.add("W6 backlog + kill -9", "restart to serving, s / to outbox read-back settled, s",
              f"{run['restart_to_serving_s']:.2f} / {run['restart_to_settled_s']:.2f}")
    table.add("W6 backlog + kill -9", "RSS once settled, MiB (window / backlog held)",
              f"{fmt(run['rss_after_restart_bytes'] / mib)} ({fmt(held.get('outbox_held'))} / "
              f"{fmt(held.get('activity_backlog'))})")
    table.add("W6 drain", f"tasks/s ({run['workers']} workers)", fmt(run["tasks_per_s"]) +
              (f" (STALLED at {run['tasks']:,})" if run["stalled"] else ""))
    table.add("W6 drain", "server CPU us/task / writes per group commit",
              f"{fmt(run['server_cpu_per_task_us'])} / {fmt(run['writes_per_commit'], 1)}")
    table.add("W6 drain", "RSS peak while draining, MiB", fmt(run["rss_peak_drain_bytes"] / mib))
    table.add("W6 drain", "succeeded / lost / delivered twice",
              f"{fmt(run['succeeded'])} / {fmt(run['lost'])} / {fmt(run['delivered_twice'])}", {},
              "none lost or doubled",
              run["lost"] == 0 and run["delivered_twice"] == 0 and not run["stalled"])


async def profile_server(work: Path, label: str, drive: Any, unit: str, unit_key: str,
                         store: str | None) -> dict[str, Any]:
    """A workload once more with the server under cProfile: each thread's top functions by own and total time."""
    profile_dir = work / f"profile-{label}"
    server = Statewright(work / f"{label}-profiled", profile_dir=profile_dir, postgres=store)
    server.start()
    try:
        run = await drive(server)
    finally:
        server.stop()
    found: dict[str, Any] = {"label": label, "unit": unit, "units": run.get(unit_key) or 1, "run": run}
    for thread in ("engine", "http"):
        path = profile_dir / f"{thread}.prof"
        if not path.exists():
            continue
        stats = pstats.Stats(str(path))
        total = max(stats.total_tt, 1e-9)
        rows = []
        for (filename, line, function), (_, calls, own, cumulative, _) in stats.stats.items():
            where = f"{Path(filename).parent.name}/{Path(filename).name}:{line}({function})"
            rows.append({"function": where, "calls": calls, "own_s": own, "total_s": cumulative,
                         "own_share": own / total, "total_share": cumulative / total})
        found[thread] = {"total_s": total,
                         "by_own": sorted(rows, key=lambda row: -row["own_s"])[:25],
                         "by_total": sorted(rows, key=lambda row: -row["total_s"])[:40]}
    return found


async def profile_w1(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    async def drive(server: Statewright) -> dict[str, Any]:
        pool = Pool(server.endpoint, args.concurrency)
        try:
            return await workloads.run_to_end(server, pool, workloads.chain_definition(), workloads.chain_input,
                                              args.w1_n, args.concurrency, "w1", 600)
        finally:
            pool.close()

    return await profile_server(work, "w1", drive, "transition", "transitions", args.store)


async def profile_w2(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    async def drive(server: Statewright) -> dict[str, Any]:
        return await workloads.activities(server, args.w2_n, args.w2_workers, args.concurrency, 1.0)

    return await profile_server(work, "w2", drive, "task", "tasks", args.store)


async def profile_w3(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The engine thread while the timers fire, without the starts before them."""
    async def drive(server: Statewright) -> dict[str, Any]:
        return await workloads.timers(server, args.w3_n, args.w3_start_rate, args.w3_spread_s, args.concurrency,
                                      False, server.profile_afresh)

    return await profile_server(work, "w3", drive, "timer", "n", args.store)


def print_profile(profile: dict[str, Any]) -> None:
    units, unit = profile["units"], profile["unit"]
    for thread in ("engine", "http"):
        if thread not in profile:
            continue
        part = profile[thread]
        print(f"\n{profile['label'].upper()}, {thread} thread under cProfile: {part['total_s']:.2f} CPU s for "
              f"{units:,.0f} {unit}s")
        for key, share, seconds, title in (("by_own", "own_share", "own_s", "own time"),
                                           ("by_total", "total_share", "total_s", "time including callees")):
            print(f"  {title} (top 20):")
            for row in part[key][:20]:
                print(f"    {row[share]:6.1%}  {row[seconds] / units * 1e6:7.1f} us/{unit}  "
                      f"{row['calls']:>9,} calls  {row['function']}")


def run(coroutine: Any) -> Any:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    args = parse_args(given)
    if args.against is not None:
        return against.run_against(args.against, against.side_arguments(given), args.rounds, args.keep)
    work = Path(tempfile.mkdtemp(prefix="statewright-bench-"))
    print(f"bench: work directory {work}", flush=True)
    started = time.time()
    # The load generator's own full collections (tens of ms over botocore's model) would show as the servers'
    # latency: what is loaded by now stays out of them, as the server does with its own.
    gc.collect()
    gc.freeze()
    try:
        results = run(main_async(args, work))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
            if args.store:
                drop_databases(args.store)
    results["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    results["wall_s"] = time.time() - started
    print()
    print(results["table"])
    for key in ("profile", "profile_w2", "profile_w3"):
        if key in results:
            print_profile(results[key])
    if args.out:
        args.out.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2, default=str))
        print(f"\nbench: figures written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
