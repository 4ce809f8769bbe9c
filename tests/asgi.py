"""statewright's ASGI app in the test's own process: built on a real store, called the way uvicorn calls it.

``call`` sends one AWS JSON 1.0 request through ``App.__call__`` and returns (status, parsed body). ``Threaded``
serves the same app with uvicorn on a thread, for a real client (boto3) in the same process.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import uvicorn

from server import free_port
from statewright.api.app import App
from statewright.engine.engine import Engine
from statewright.node import build_node
from statewright.store.sqlite import SqliteStore

ACCOUNT = "123456789012"


def build(data_dir: Path, engine_class: type[Engine] = Engine, **service_options: Any) -> App:
    """An app over a fresh SQLite store; the engine is not started (commands wait in its inbox)."""
    store = SqliteStore(data_dir / "statewright.db", 2)
    node = build_node(store, lambda edges, histories: engine_class(store, edges=edges, histories=histories),
                      account_id=ACCOUNT, **service_options)
    return App(node.service)


def close(app: App) -> None:
    app.service.close()
    app.service.store.close()


async def call(app: App, operation: str, params: dict) -> tuple[int, dict]:
    body = orjson.dumps(params)
    scope = {"type": "http", "method": "POST", "path": "/", "headers": [
        (b"x-amz-target", f"AWSStepFunctions.{operation}".encode()),
        (b"content-type", b"application/x-amz-json-1.0")]}
    sent: list[dict] = []
    requested = False

    async def receive() -> dict:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client stays connected
        raise AssertionError("unreachable")

    async def send(message: dict) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"], orjson.loads(sent[1]["body"])


class Threaded:
    """uvicorn serving ``app`` on 127.0.0.1 from a thread of this process."""

    def __init__(self, app: App, lifespan: str = "off") -> None:
        """With ``lifespan="on"`` the app serves as under ``statewright serve``: attached to the loop at start
        (dispatches flow), its engine stopped and its connections to other nodes closed on exit."""
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, lifespan=lifespan,
                                                     log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, name="test-uvicorn", daemon=True)

    def __enter__(self) -> Threaded:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:  # a bounded wait for the socket, not a timing assertion
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        self._thread.join(30)
