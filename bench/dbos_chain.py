"""``python -m bench.dbos_chain --db URL --n N --threads T``: the W1 chain as a DBOS durable workflow.

Ten steps mirror the ten states of W1 (Pass: select the document, build a small object, place it under
``last``; Choice: test ``last.step``); DBOS checkpoints every step's output in its system database before the
next step runs, as statewright commits every transition. DBOS is a library, so this one process is both the
load and the engine: its CPU figure covers both. Prints one JSON line of results.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import orjson
import sqlalchemy
from dbos import DBOS, DBOSConfig


@DBOS.step()
def pass_step(document: dict, step: int) -> dict:
    return {"id": document["id"], "step": step}


@DBOS.step()
def choice_step(last: dict) -> bool:
    return last["step"] > 0


@DBOS.workflow()
def chain(data: dict) -> dict:
    state = dict(data)
    for step in range(1, 11):
        if step % 2 == 0 and step < 10:
            if not choice_step(state["last"]):
                raise ValueError("no choice matched")
        else:
            state["last"] = pass_step(state["doc"], step)
    return state


SCHEMA = "statewright_bench_dbos"


def drop_schema(url: str) -> None:
    engine = sqlalchemy.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as connection:
        connection.execute(sqlalchemy.text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True, help="system database URL (sqlite:///path or postgresql://...)")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=32)
    args = parser.parse_args()
    config: DBOSConfig = {"name": "statewright-bench", "system_database_url": args.db, "log_level": "WARNING",
                          "max_executor_threads": max(args.threads, 4)}
    if args.db.startswith("postgres"):
        config["dbos_system_schema"] = SCHEMA  # out of the way of the shared database's other schemas
        drop_schema(args.db)  # every run starts from empty tables
    DBOS(config=config)
    DBOS.launch()
    run_id = uuid.uuid4().hex[:8]
    chain({"n": 7, "doc": {"id": "warm-up", "tags": ["a", "b"]}})  # the first call creates connections

    latencies: list[float] = []

    def one(index: int) -> None:
        started = time.perf_counter()
        chain({"n": index, "doc": {"id": f"{run_id}-{index}", "tags": ["a", "b"]}})
        latencies.append(time.perf_counter() - started)

    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    with ThreadPoolExecutor(args.threads) as pool:
        list(pool.map(one, range(args.n)))
    elapsed = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    latencies.sort()
    print(orjson.dumps({
        "completed": args.n, "elapsed_s": elapsed, "executions_per_s": args.n / elapsed,
        "steps_per_s": args.n * 10 / elapsed, "p50_s": statistics.median(latencies),
        "p99_s": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "cpu_s": cpu_s, "cpu_per_step_us": cpu_s / (args.n * 10) * 1e6,
    }).decode(), flush=True)
    DBOS.destroy()
    if args.db.startswith("postgres"):
        drop_schema(args.db)


if __name__ == "__main__":
    main()
