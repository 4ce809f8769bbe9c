"""The workloads: definitions, how they are driven, and what is measured for each.

Completion is observed with ListExecutions (statusFilter RUNNING until none is left, then one listing of every
execution for stop dates), never one DescribeExecution per execution. End-to-end latency of an execution is
``max(StartExecution answered, stopDate) - StartExecution sent``: for statewright the answer comes after the
commit that closed a pure chain, for moto the answer comes first and the execution runs afterwards.
"""

from __future__ import annotations

import asyncio
import random
import resource
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from prometheus_client.parser import text_string_to_metric_families

from .client import AwsError, Pool, any_with_status, list_all
from .servers import Child, Statewright

ROLE = "arn:aws:iam::123456789012:role/bench"


# -- definitions

def chain_definition() -> dict:
    """W1: ten states, Pass and Choice alternating, with InputPath, Parameters and ResultPath."""
    names = [f"S{index:02d}" for index in range(1, 11)]
    states: dict[str, dict] = {}
    for index, name in enumerate(names, start=1):
        following = names[index] if index < 10 else None
        if index % 2 == 0 and following:
            states[name] = {"Type": "Choice", "Choices": [
                {"Variable": "$.last.step", "NumericGreaterThan": 0, "Next": following}], "Default": following}
        else:
            state = {"Type": "Pass", "InputPath": "$.doc", "Parameters": {"id.$": "$.id", "step": index},
                     "ResultPath": "$.last"}
            state.update({"Next": following} if following else {"End": True})
            states[name] = state
    return {"Comment": "W1 chain", "StartAt": names[0], "States": states}


def chain_input(index: int) -> str:
    return orjson.dumps({"n": index, "doc": {"id": f"doc-{index}", "tags": ["a", "b"]}}).decode()


TIMER_DEFINITION = {"StartAt": "W", "States": {"W": {"Type": "Wait", "TimestampPath": "$.due", "End": True}}}
SLEEPER_DEFINITION = {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 90 * 86_400, "End": True}}}
MAP_DEFINITION = {"StartAt": "M", "States": {"M": {
    "Type": "Map", "ItemsPath": "$.items", "ResultPath": "$.out", "End": True,
    "ItemProcessor": {"ProcessorConfig": {"Mode": "INLINE"}, "StartAt": "A", "States": {
        "A": {"Type": "Pass", "Parameters": {"v.$": "$.v"}, "Next": "B"},
        "B": {"Type": "Pass", "Result": 1, "ResultPath": "$.b", "End": True}}}}}}
MAP_INPUT = orjson.dumps({"items": [{"v": index} for index in range(100)]}).decode()
MAP_TRANSITIONS = 1 + 100 * 2  # states entered per execution


def iso_ms(epoch_ms: int) -> str:
    moment = datetime.fromtimestamp(epoch_ms // 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


# -- measuring

def client_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


async def scrape(pool: Pool) -> dict[str, float]:
    """statewright's /metrics as {sample name{labels}: value}."""
    text = (await pool.get("/metrics")).decode()
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{key}={value}" for key, value in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return found


def stop_seconds(item: dict) -> float | None:
    stop = item.get("stopDate")
    if stop is None:
        return None
    if isinstance(stop, int | float):
        return float(stop)
    return datetime.fromisoformat(str(stop).replace("Z", "+00:00")).timestamp()


@dataclass
class Run:
    """What one driven batch of executions produced."""
    n: int
    sent: dict[str, float] = field(default_factory=dict)  # name -> StartExecution sent (epoch s)
    answered: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    began: float = 0.0
    starts_done: float = 0.0


async def create_machine(pool: Pool, prefix: str, definition: dict) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    created = await pool.call("CreateStateMachine", {"name": name, "definition": orjson.dumps(definition).decode(),
                                                     "roleArn": ROLE})
    return created["stateMachineArn"]


async def start_one(pool: Pool, machine: str, name: str | None, input_text: str, run: Run, record: bool) -> None:
    """One StartExecution (``name`` None: the server names it); its send and answer times go into ``run`` under
    its name (an error is counted instead)."""
    sent = time.time()
    params = {"stateMachineArn": machine, "input": input_text}
    if name is not None:
        params["name"] = name
    try:
        answer = await pool.call("StartExecution", params)
    except AwsError as error:
        run.errors.append(str(error))
        return
    if record:
        name = answer["executionArn"].rsplit(":", 1)[1]
        run.sent[name] = sent
        run.answered[name] = time.time()


async def start_closed_loop(pool: Pool, machine: str, n: int, concurrency: int, make_input: Callable[[int], str],
                            prefix: str | None, record: bool = True) -> Run:
    """n StartExecution calls by ``concurrency`` workers, each sending its next as soon as one is answered; named
    ``prefix-index``, or by the server when ``prefix`` is None."""
    run = Run(n)
    indexes = iter(range(n))

    async def worker() -> None:
        for index in indexes:
            name = None if prefix is None else f"{prefix}-{index}"
            await start_one(pool, machine, name, make_input(index), run, record)

    run.began = time.time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    run.starts_done = time.time()
    return run


async def start_open_loop(pool: Pool, machine: str, rate_per_s: float, duration_s: float,
                          make_input: Callable[[int], str], prefix: str, in_flight_max: int = 2000) -> Run:
    """StartExecution at a fixed rate, whatever the answers do (latency under a given load)."""
    n = max(int(rate_per_s * duration_s), 1)
    run = Run(n)
    slots = asyncio.Semaphore(in_flight_max)

    async def one(index: int) -> None:
        async with slots:
            await start_one(pool, machine, f"{prefix}-{index}", make_input(index), run, True)

    loop = asyncio.get_running_loop()
    tasks = []
    run.began = time.time()
    origin = loop.time()
    for index in range(n):
        delay = origin + index / rate_per_s - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(index)))
    await asyncio.gather(*tasks)
    run.starts_done = time.time()
    return run


async def wait_none_running(pool: Pool, machine: str, deadline_s: float, poll_s: float = 0.05) -> bool:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if not await any_with_status(pool, machine, "RUNNING"):
            return True
        await asyncio.sleep(poll_s)
    return False


async def completions(pool: Pool, machine: str, run: Run, keep_latencies: bool = False) -> dict[str, Any]:
    """Statuses, throughput and end-to-end latencies of a run, from one listing of every execution (each latency
    too with ``keep_latencies``)."""
    items = await list_all(pool, machine)
    statuses: dict[str, int] = {}
    latencies, finished = [], []
    for item in items:
        statuses[item["status"]] = statuses.get(item["status"], 0) + 1
        sent = run.sent.get(item["name"])
        stop = stop_seconds(item)
        if sent is None or stop is None:
            continue
        done = max(stop, run.answered.get(item["name"], stop))
        latencies.append(done - sent)
        finished.append(done)
    last = max(finished) if finished else run.starts_done
    elapsed = max(last - run.began, 1e-9)
    found = {"statuses": statuses, "succeeded": statuses.get("SUCCEEDED", 0), "elapsed_s": elapsed,
             "executions_per_s": statuses.get("SUCCEEDED", 0) / elapsed, "p50_s": percentile(latencies, 0.5),
             "p99_s": percentile(latencies, 0.99), "errors": len(run.errors),
             "first_error": run.errors[0] if run.errors else None}
    if keep_latencies:
        found["latencies_s"] = latencies
    return found


def metric_delta(before: dict[str, float], after: dict[str, float], name: str) -> float:
    return after.get(name, 0.0) - before.get(name, 0.0)


# -- W1 and W5: executions that run to the end without waiting

async def run_to_end(server: Child, pool: Pool, definition: dict, make_input: Callable[[int], str], n: int,
                     concurrency: int, label: str, deadline_s: float) -> dict[str, Any]:
    """Create the machine, warm up, then drive n executions at full speed and measure them."""
    is_statewright = isinstance(server, Statewright)
    machine = await create_machine(pool, label, definition)
    warm = await start_closed_loop(pool, machine, min(50, n), min(concurrency, 10), make_input, "warm")
    await wait_none_running(pool, machine, deadline_s)
    if warm.errors:
        return {"error": warm.errors[0]}
    before = await scrape(pool) if is_statewright else {}
    server_cpu, client_cpu = server.cpu_s(), client_cpu_s()
    run = await start_closed_loop(pool, machine, n, concurrency, make_input, "run")
    finished = await wait_none_running(pool, machine, deadline_s)
    server_cpu, client_cpu = server.cpu_s() - server_cpu, client_cpu_s() - client_cpu
    after = await scrape(pool) if is_statewright else {}
    result = await completions(pool, machine, run)
    result["succeeded"] -= warm.n - len(warm.errors)  # the listing includes the warm-up
    result["executions_per_s"] = result["succeeded"] / result["elapsed_s"]
    result.update(machine=machine, finished=finished, n=n, concurrency=concurrency, server_cpu_s=server_cpu,
                  client_cpu_s=client_cpu, client_cpu_per_execution_us=client_cpu / n * 1e6,
                  server_cpu_per_execution_us=server_cpu / n * 1e6)
    if is_statewright:
        transitions = metric_delta(before, after, "statewright_state_transitions_committed_total")
        steps = metric_delta(before, after, "statewright_transition_steps_committed_total")
        commits = metric_delta(before, after, "statewright_commit_seconds_count")
        apply_s = metric_delta(before, after, "statewright_engine_apply_seconds_sum")
        commit_s = metric_delta(before, after, "statewright_commit_seconds_sum")
        result.update(
            transitions=transitions, transition_steps=steps, commits=commits,
            transitions_per_s=transitions / result["elapsed_s"],
            writes_per_commit=steps / commits if commits else float("nan"),
            apply_us_per_transition=apply_s / transitions * 1e6 if transitions else float("nan"),
            commit_us_per_transition=commit_s / transitions * 1e6 if transitions else float("nan"),
            commit_ms_mean=commit_s / commits * 1e3 if commits else float("nan"),
            server_cpu_per_transition_us=server_cpu / transitions * 1e6 if transitions else float("nan"))
    return result


async def latency_at_rate(server: Statewright, pool: Pool, definition: dict, make_input: Callable[[int], str],
                          rate_per_s: float, duration_s: float, label: str,
                          keep_latencies: bool = False) -> dict[str, Any]:
    """Open loop at a fixed rate: end-to-end latency of pure chains (all their transitions durable)."""
    machine = await create_machine(pool, label, definition)
    before = await scrape(pool)
    run = await start_open_loop(pool, machine, rate_per_s, duration_s, make_input, "rate")
    await wait_none_running(pool, machine, 120)
    after = await scrape(pool)
    result = await completions(pool, machine, run, keep_latencies)
    transitions = metric_delta(before, after, "statewright_state_transitions_committed_total")
    commits = metric_delta(before, after, "statewright_commit_seconds_count")
    result.update(rate_per_s=rate_per_s, duration_s=duration_s, transitions=transitions,
                  applies_over_5ms=_slow_applies(after) - _slow_applies(before),
                  commit_ms_mean=metric_delta(before, after, "statewright_commit_seconds_sum") / commits * 1e3
                  if commits else float("nan"))
    return result


def _slow_applies(metrics: dict[str, float]) -> float:
    """Commands the engine thread took over 5 ms to apply (decide and stage), so far: each held up the others."""
    return (metrics.get("statewright_engine_apply_seconds_count", 0.0)
            - metrics.get("statewright_engine_apply_seconds_bucket{le=0.005}", 0.0))


# -- W3: timers due inside one minute, with and without a crash just before

async def timers(server: Statewright, n: int, start_rate_guess: float, spread_s: float, concurrency: int,
                 restart: bool, started: Callable[[], None] | None = None) -> dict[str, Any]:
    """``started``: called once every execution has started, before the first is due."""
    pool = Pool(server.endpoint, concurrency)
    machine = await create_machine(pool, "w3", TIMER_DEFINITION)
    now_ms = int(time.time() * 1000)
    window_ms = now_ms + int((n / start_rate_guess + 10) * 1000)
    due = {f"t-{index}": window_ms + int(spread_s * 1000 * index / n) for index in range(n)}
    began = time.time()
    run = await start_closed_loop(pool, machine, n, concurrency,
                                  lambda index: orjson.dumps({"due": iso_ms(due[f"t-{index}"])}).decode(), "t")
    start_s = run.starts_done - run.began
    started_late = sum(1 for name, sent in run.answered.items() if sent * 1000 >= due[name])
    result: dict[str, Any] = {"n": n, "start_rate_per_s": n / start_s, "spread_s": spread_s,
                              "started_after_due": started_late, "start_errors": len(run.errors)}
    pool.close()
    if started is not None:
        started()
    if restart:
        await asyncio.sleep(max(window_ms / 1000 - 3 - time.time(), 0))
        killed_before_due_s = window_ms / 1000 - time.time()
        server.kill()
        restart_s = server.start()
        result.update(killed_before_first_due_s=killed_before_due_s, restart_to_serving_s=restart_s)
        pool = Pool(server.endpoint, concurrency)
    else:
        pool = Pool(server.endpoint, concurrency)
    await asyncio.sleep(max((window_ms + spread_s * 1000) / 1000 - time.time(), 0))
    result["all_closed"] = await wait_none_running(pool, machine, 600, poll_s=0.5)
    items = await list_all(pool, machine)
    lateness = []
    statuses: dict[str, int] = {}
    for item in items:
        statuses[item["status"]] = statuses.get(item["status"], 0) + 1
        stop = stop_seconds(item)
        name = item["name"]
        if stop is not None and name in due and name in run.answered and run.answered[name] * 1000 < due[name]:
            lateness.append(stop - due[name] / 1000)
    # the stop date is the WaitStateExited event's time (one decision); check that on a sample of histories
    sample = random.Random(7).sample(items, min(200, len(items)))
    worst = 0.0
    for item in sample:
        history = await pool.call("GetExecutionHistory", {"executionArn": item["executionArn"], "maxResults": 10})
        exited = [event["timestamp"] for event in history["events"] if event["type"] == "WaitStateExited"]
        if exited and stop_seconds(item) is not None:
            worst = max(worst, abs(exited[0] - stop_seconds(item)))
    pool.close()
    result.update(statuses=statuses, succeeded=statuses.get("SUCCEEDED", 0),
                  lost=n - len(run.errors) - statuses.get("SUCCEEDED", 0),
                  lateness_p50_s=percentile(lateness, 0.5), lateness_p99_s=percentile(lateness, 0.99),
                  lateness_max_s=max(lateness) if lateness else float("nan"),
                  history_check_max_diff_s=worst, elapsed_s=time.time() - began)
    return result


# -- W4: many open executions sleeping for months

async def sleepers(server: Statewright, n: int, concurrency: int) -> dict[str, Any]:
    pool = Pool(server.endpoint, concurrency)
    machine = await create_machine(pool, "w4", SLEEPER_DEFINITION)
    cpu = server.cpu_s()
    run = await start_closed_loop(pool, machine, n, concurrency, lambda index: "{}", "s", record=False)
    start_s = run.starts_done - run.began
    cpu = server.cpu_s() - cpu
    memory = server.memory()
    pool.close()
    database = server.database_bytes()
    server.kill()
    footprint = server.footprint()
    restart_s = server.start()
    memory_restart = server.memory()
    pool = Pool(server.endpoint, 4)
    counted_after_s = found = None
    began = time.monotonic()
    while time.monotonic() - began < 600:
        found = (await scrape(pool)).get("statewright_open_executions")
        if found is not None:
            counted_after_s = time.monotonic() - began
            break
        await asyncio.sleep(0.1)
    pool.close()
    return {"n": n, "started": n - len(run.errors), "start_errors": len(run.errors),
            "first_error": run.errors[0] if run.errors else None, "start_rate_per_s": n / start_s,
            "server_cpu_per_start_us": cpu / n * 1e6, "rss_bytes": memory.get("VmRSS"),
            "rss_peak_bytes": memory.get("VmHWM"), "database_bytes": database, "footprint": footprint,
            "restart_to_serving_s": restart_s,
            "rss_after_restart_bytes": memory_restart.get("VmRSS"), "open_gauge": found,
            "open_gauge_after_restart_s": counted_after_s}


# -- W2: a Task on an activity, K workers long-polling

def activity_definition(activity_arn: str) -> dict:
    return {"StartAt": "T", "States": {"T": {"Type": "Task", "Resource": activity_arn, "End": True}}}


async def answer_tasks(pool: Pool, activity: str, worker_name: str, answered: list[float], errors: list[str],
                       on_task: Callable[[dict], None] = lambda task: None) -> None:
    """One long-polling worker, until cancelled: each task it gets is answered SendTaskSuccess with its input."""
    while True:
        task = await pool.call("GetActivityTask", {"activityArn": activity, "workerName": worker_name})
        if not task.get("taskToken"):
            continue
        on_task(task)
        try:
            await pool.call("SendTaskSuccess", {"taskToken": task["taskToken"], "output": task["input"]})
        except AwsError as error:
            errors.append(str(error))
            continue
        answered.append(time.time())


async def activities(server: Statewright, n: int, workers: int, concurrency: int,
                     half_load_s: float) -> dict[str, Any]:
    """Peak: n executions of one activity Task started as fast as they are answered, ``workers`` long-polling
    workers answering SendTaskSuccess at once. Then dispatch latency (ActivityScheduled to ActivityStarted, from
    histories) with executions started at half that peak rate, so the backlog does not hide the engine."""
    pool = Pool(server.endpoint, concurrency)
    worker_pool = Pool(server.endpoint, workers * 2)
    activity = (await pool.call("CreateActivity", {"name": f"w2-{uuid.uuid4().hex[:8]}"}))["activityArn"]
    machine = await create_machine(pool, "w2", activity_definition(activity))
    answered: list[float] = []
    errors: list[str] = []

    running = [asyncio.create_task(answer_tasks(worker_pool, activity, f"w{index}", answered, errors))
               for index in range(workers)]
    try:
        before = await scrape(pool)
        server_cpu, client_cpu = server.cpu_s(), client_cpu_s()
        run = await start_closed_loop(pool, machine, n, concurrency, lambda index: f'{{"i": {index}}}', "a")
        finished = await wait_none_running(pool, machine, 600)
        server_cpu, client_cpu = server.cpu_s() - server_cpu, client_cpu_s() - client_cpu
        after = await scrape(pool)
        tasks = len(answered)
        elapsed = (max(answered) if answered else time.time()) - run.began
        result = await completions(pool, machine, run)
        half_rate = tasks / elapsed / 2
        half = await start_open_loop(pool, machine, half_rate, half_load_s, lambda index: f'{{"i": {index}}}', "h")
        await wait_none_running(pool, machine, 600)
    finally:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        worker_pool.close()
    sample = random.Random(7).sample(sorted(half.sent), min(1000, len(half.sent)))
    prefix = machine.replace(":stateMachine:", ":execution:", 1)
    dispatch: list[float] = []
    for name in sample:
        history = await pool.call("GetExecutionHistory", {"executionArn": f"{prefix}:{name}", "maxResults": 20})
        times = {event["type"]: event["timestamp"] for event in history["events"]}
        if "ActivityScheduled" in times and "ActivityStarted" in times:
            dispatch.append(times["ActivityStarted"] - times["ActivityScheduled"])
    pool.close()
    steps = metric_delta(before, after, "statewright_transition_steps_committed_total")
    result.update(n=n, workers=workers, concurrency=concurrency, finished=finished, tasks=tasks,
                  tasks_per_s=tasks / elapsed, reply_errors=len(errors), half_rate_per_s=half_rate,
                  dispatch_sampled=len(dispatch), dispatch_p50_s=percentile(dispatch, 0.5),
                  dispatch_p99_s=percentile(dispatch, 0.99),
                  dispatch_max_s=max(dispatch) if dispatch else float("nan"), transition_steps=steps,
                  server_cpu_s=server_cpu, server_cpu_per_task_us=server_cpu / max(tasks, 1) * 1e6,
                  client_cpu_per_task_us=client_cpu / max(tasks, 1) * 1e6,
                  transitions=metric_delta(before, after, "statewright_state_transitions_committed_total"))
    return result


# -- W9: a runaway execution beside a steady W1 load

def runaway_definition(range_items: int) -> dict:
    """A JSONata Pass summing a range, looping through a Choice back to itself for ever (until its history is full)."""
    return {"QueryLanguage": "JSONata", "StartAt": "Sum", "States": {
        "Sum": {"Type": "Pass", "Output": {"sum": "{% $reduce([1.." + str(range_items) + "], "
                                                  "function($a, $b) { $a + $b }) %}"}, "Next": "Again"},
        "Again": {"Type": "Choice", "Choices": [{"Condition": "{% $states.input.sum > 0 %}", "Next": "Sum"}],
                  "Default": "Done"},
        "Done": {"Type": "Succeed"}}}


async def runaway_beside_w1(server: Statewright, pool: Pool, rate_per_s: float, duration_s: float,
                            runaways: int, range_items: int) -> dict[str, Any]:
    """W1 at a fixed rate in four phases of ``duration_s``: alone, beside ``runaways`` looping executions, alone
    again (they are stopped), beside new ones. Alternating the phases spreads the drift of a long run (a growing
    database) over both sides; the two alone phases against each other show the noise of the host."""
    machine = await create_machine(pool, "w9-runaway", runaway_definition(range_items))
    phases: dict[str, list[dict[str, Any]]] = {"alone": [], "beside": []}
    events: list[int] = []
    for round_index in range(2):
        phases["alone"].append(await latency_at_rate(server, pool, chain_definition(), chain_input, rate_per_s,
                                                     duration_s, f"w9-alone-{round_index}", True))
        arns = [(await pool.call("StartExecution", {"stateMachineArn": machine, "name": f"runaway-{round_index}-{i}",
                                                    "input": "{}"}))["executionArn"] for i in range(runaways)]
        phases["beside"].append(await latency_at_rate(server, pool, chain_definition(), chain_input, rate_per_s,
                                                      duration_s, f"w9-beside-{round_index}", True))
        for arn in arns:
            newest = await pool.call("GetExecutionHistory", {"executionArn": arn, "maxResults": 1,
                                                             "reverseOrder": True})
            events.append(newest["events"][0]["id"] if newest["events"] else 0)
            await pool.call("StopExecution", {"executionArn": arn})
    found: dict[str, Any] = {"runaways": runaways, "range_items": range_items, "runaway_events": events}
    found.update(pooled_phases(phases))
    return found


def pooled_phases(phases: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each side's rounds of ``latency_at_rate`` (alone, beside) pooled: p50 and p99 over all their latencies."""
    found = {}
    for side, runs in phases.items():
        pooled = [latency for run in runs for latency in run.pop("latencies_s")]
        found[side] = {"p50_s": percentile(pooled, 0.5), "p99_s": percentile(pooled, 0.99),
                       "succeeded": sum(run["succeeded"] for run in runs),
                       "applies_over_5ms": sum(run["applies_over_5ms"] for run in runs), "phases": runs}
    return found
