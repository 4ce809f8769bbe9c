"""The local Lambda function W10 invokes (``serve --functions``): an ASGI app that answers each POSTed payload with
the payload and its ``n`` one higher. Served by uvicorn in a process of its own: ``python -m uvicorn
bench.function_server:app``."""

from __future__ import annotations

from typing import Any

import orjson


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    payload = orjson.loads(body or b"{}")
    if isinstance(payload, dict):
        payload["n"] = payload.get("n", 0) + 1
    answer = orjson.dumps(payload)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]})
    await send({"type": "http.response.body", "body": answer})
