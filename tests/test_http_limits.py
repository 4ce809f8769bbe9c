"""HttpTasks under its limit: at most ``http_calls_concurrent_max`` calls in flight, each attempt started only
when its call holds a slot. Real calls to a local endpoint that holds every
request until the test lets them go; a stand-in for the engine records the commands it is handed."""

from __future__ import annotations

import asyncio
import json

from statewright.decider.outcomes import AttemptSucceeded
from statewright.engine.commands import Command, CompleteAttempt, EngineUnavailable, StartAttempt
from statewright.engine.limits import Limits
from statewright.integrations.dispatcher import Dispatcher
from statewright.integrations.http import Connections, HttpTasks
from statewright.store.base import Dispatch

CONNECTION = "arn:aws:events:us-east-1:123456789012:connection/held/1"
DEADLOCK_S = 30  # only breaks a hang: a healthy run never waits this long


class HeldEndpoint:
    """Counts the requests it holds; answers them all once ``release`` is set."""

    def __init__(self, holding: int) -> None:
        self.holding = holding
        self.in_flight = self.most = 0
        self.reached = asyncio.Event()  # ``holding`` requests are held at once
        self.release = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")  # a GET: the head is the whole request
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        if self.in_flight == self.holding:
            self.reached.set()
        await self.release.wait()
        self.in_flight -= 1  # before answering: the caller frees its slot only once it has read the answer
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                     b"Connection: close\r\n\r\n{}")
        await writer.drain()
        writer.close()


class Engine:
    """Takes commands as the engine would once they commit; ``unavailable`` commits fail first."""

    def __init__(self, completions: int, unavailable: int = 0) -> None:
        self.commands: list[Command] = []
        self._completions = completions
        self._unavailable = unavailable
        self.completed = asyncio.Event()

    async def run(self, command: Command) -> bool:
        self.commands.append(command)
        if isinstance(command, CompleteAttempt) and self._unavailable:
            self._unavailable -= 1
            raise EngineUnavailable("the commit did not complete; retry the request")
        if sum(isinstance(c, CompleteAttempt) for c in self.commands) == self._completions:
            self.completed.set()
        return True


def connections(tmp_path) -> Connections:
    path = tmp_path / "connections.json"
    path.write_text(json.dumps({CONNECTION: {"AuthorizationType": "API_KEY", "AuthParameters": {
        "ApiKeyAuthParameters": {"ApiKeyName": "x-api-key", "ApiKeyValue": "secret"}}}}))
    return Connections(path)


def http_dispatch(n: int, port: int) -> Dispatch:
    parameters = {"ApiEndpoint": f"http://127.0.0.1:{port}/call/{n}", "Method": "GET",
                  "Authentication": {"ConnectionArn": CONNECTION}}
    return Dispatch(0, f"arn:aws:states:us-east-1:123456789012:execution:m:{n}", str(n),
                    {"kind": "http", "scheduled_id": n, "attempt": 1, "input": parameters})


async def run_calls(tmp_path, engine: Engine, calls: int, limits: Limits, holding: int) -> HeldEndpoint:
    """Dispatch ``calls`` HTTP Tasks; once ``holding`` requests are held, check what started, then release."""
    endpoint = HeldEndpoint(holding)
    server = await asyncio.start_server(endpoint.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    dispatcher = Dispatcher(engine.run)
    HttpTasks(dispatcher, connections(tmp_path), limits)
    dispatcher.attach(asyncio.get_running_loop())
    for n in range(calls):
        dispatcher.submit(http_dispatch(n, port))
    await asyncio.wait_for(endpoint.reached.wait(), DEADLOCK_S)
    assert sum(isinstance(c, StartAttempt) for c in engine.commands) == holding  # the others wait, unstarted
    endpoint.release.set()
    await asyncio.wait_for(engine.completed.wait(), DEADLOCK_S)
    server.close()
    await server.wait_closed()
    return endpoint


def test_calls_beyond_the_limit_wait_for_a_slot_before_their_attempt_starts(tmp_path):
    engine = Engine(completions=5)
    endpoint = asyncio.run(run_calls(tmp_path, engine, 5, Limits(http_calls_concurrent_max=2), holding=2))
    assert endpoint.most == 2
    kinds = [type(c).__name__ for c in engine.commands]
    assert kinds.count("StartAttempt") == kinds.count("CompleteAttempt") == 5
    outcomes = {c.scheduled_id: type(c.result) for c in engine.commands if isinstance(c, CompleteAttempt)}
    assert outcomes == dict.fromkeys(range(5), AttemptSucceeded)


def test_a_result_the_engine_could_not_commit_is_sent_again_not_dropped(tmp_path):
    engine = Engine(completions=3, unavailable=2)
    asyncio.run(run_calls(tmp_path, engine, 1, Limits(), holding=1))
    assert [type(c).__name__ for c in engine.commands] == ["StartAttempt", *["CompleteAttempt"] * 3]
