"""W10: a chain of Lambda invocations (``lambda:invoke``) against a local HTTP function (``serve --functions``).

Each execution runs LINKS Task states, each invoking the function with the previous state's Payload. The peer in
the same run is the function itself: the load generator POSTs the same payloads to it directly, over keep-alive
connections at the same concurrency, which is the most invocations per second this machine serves without any
workflow engine in between.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import orjson

from .client import Pool, _Connection
from .servers import FunctionServer, Statewright
from .workloads import run_to_end

LINKS = 5


def definition() -> dict:
    names = [f"L{index}" for index in range(LINKS)]
    states = {}
    for index, name in enumerate(names):
        state = {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "OutputPath": "$.Payload",
                 "Parameters": {"FunctionName": "inc", "Payload.$": "$"}}
        state.update({"Next": names[index + 1]} if index + 1 < LINKS else {"End": True})
        states[name] = state
    return {"Comment": "W10 Lambda chain", "StartAt": names[0], "States": states}


def chain_input(index: int) -> str:
    return orjson.dumps({"n": 0, "id": f"w10-{index}"}).decode()


async def direct(port: int, n: int, concurrency: int) -> dict[str, Any]:
    """n POSTs straight to the function, ``concurrency`` keep-alive connections at a time."""
    head = (b"POST /inc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ")
    remaining = iter(range(n))

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        connection = _Connection(reader, writer)
        for index in remaining:
            status, _ = await connection.request(head, chain_input(index).encode())
            assert status == 200
        connection.close()

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.monotonic() - started
    return {"n": n, "elapsed_s": elapsed, "invocations_per_s": n / elapsed}


async def w10(work: Path, n: int, concurrency: int) -> dict[str, Any]:
    function = FunctionServer(work / "w10-function.log")
    function.start()
    functions = work / "w10-functions.json"
    functions.write_bytes(orjson.dumps({"inc": f"{function.endpoint}/inc"}))
    server = Statewright(work / "w10-statewright", extra_args=("--functions", str(functions)))
    server.start()
    pool = Pool(server.endpoint, concurrency)
    try:
        ours = await run_to_end(server, pool, definition(), chain_input, n, concurrency, "w10", 600)
        function_cpu = function.cpu_s()
        peer = await direct(function.port, n * LINKS, concurrency)
        peer["function_cpu_s"] = function.cpu_s() - function_cpu
    finally:
        pool.close()
        server.stop()
        function.stop()
    ours["invocations_per_s"] = ours["executions_per_s"] * LINKS
    return {"statewright": ours, "direct": peer, "links": LINKS}
