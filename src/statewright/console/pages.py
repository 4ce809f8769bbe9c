"""The console's HTTP side: its page and scripts, and the stream that tells a page an execution moved on.

The page is static (``static/``: HTML, CSS and ES modules, no build step) and does everything else through the
public AWS JSON API on the same port, as the AWS console does, so it shows exactly what boto3 would read. One
stream is the console's own: ``GET /console/events?executionArn=...`` (server-sent events) says ``committed``
whenever a commit on this node added to that execution's history (``HistoryFeed``); the page then reads the new
events. Must not import the API.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from .feed import HistoryFeed

STATIC = Path(__file__).parent / "static"
_TYPES = {".html": b"text/html; charset=utf-8", ".js": b"text/javascript; charset=utf-8",
          ".css": b"text/css; charset=utf-8", ".txt": b"text/plain; charset=utf-8",
          ".svg": b"image/svg+xml"}
EVENTS_PATH = "/console/events"
KEEP_ALIVE_S = 15.0  # a comment line this often keeps proxies from closing a quiet stream
WATCHERS_MAX = 200  # streams open at once on this node; past it a page falls back to reading on a timer


def _assets() -> dict[str, Path]:
    """Every file the console serves, by URL path (read once: nothing outside ``static/`` can be named)."""
    assets = {f"/console/{path.relative_to(STATIC).as_posix()}": path
              for path in STATIC.rglob("*") if path.is_file() and path.suffix in _TYPES}
    assets["/"] = STATIC / "index.html"
    return assets


class Console:
    def __init__(self, feed: HistoryFeed | None) -> None:
        """``feed``: the node's committed history (None: no stream; pages read on a timer)."""
        self.feed = feed
        self._assets = _assets()
        self._streams = 0

    def serves(self, scope: dict) -> bool:
        """Whether this request is the console's: a GET of its page, a file of it, or its stream."""
        return scope["method"] in ("GET", "HEAD") and (scope["path"] in self._assets or scope["path"] == EVENTS_PATH)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["path"] == EVENTS_PATH:
            await self._events(scope, receive, send)
            return
        path = self._assets[scope["path"]]
        body = path.read_bytes()
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", _TYPES[path.suffix]), (b"content-length", b"%d" % len(body)),
            (b"cache-control", b"no-cache"), (b"x-content-type-options", b"nosniff")]})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})

    async def _events(self, scope: dict, receive: Any, send: Any) -> None:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        arn = (query.get("executionArn") or [""])[0]
        if not arn or self.feed is None or self._streams >= WATCHERS_MAX:
            status = 400 if not arn else 503
            message = b"executionArn is required" if not arn else b"no stream here: read the history on a timer"
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
            await send({"type": "http.response.body", "body": message})
            return
        self._streams += 1
        try:
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
            await _stream(self.feed, arn, receive, send)
        finally:
            self._streams -= 1


async def _stream(feed: HistoryFeed, arn: str, receive: Any, send: Any) -> None:
    """``committed`` after each commit that added to the execution's history, until the page goes away."""
    with feed.watch(arn) as changed:
        await send({"type": "http.response.body", "body": b"retry: 2000\nevent: watching\ndata: {}\n\n",
                    "more_body": True})
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            while not gone.done():
                woken = asyncio.ensure_future(changed.wait())
                await asyncio.wait([woken, gone], timeout=KEEP_ALIVE_S, return_when=asyncio.FIRST_COMPLETED)
                woken.cancel()
                if gone.done():
                    return
                if changed.is_set():
                    changed.clear()
                    chunk = b"event: committed\ndata: {}\n\n"
                else:
                    chunk = b": still watching\n\n"
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            gone.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await gone


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
