"""The console's HTTP side: its page and scripts, the stream that tells a page an execution moved on, and the
few views the public API has no call for.

The page is static (``static/``: HTML, CSS and ES modules, no build step) and does everything else through the
public AWS JSON API on the same port, as the AWS console does, so it shows exactly what boto3 would read. The
console's own GETs, each of this node:

- ``/console/events?executionArn=...`` (server-sent events): ``committed`` whenever a commit on this node added
  to that execution's history (``HistoryFeed``); the page then reads the new events.
- ``/console/express?stateMachineArn=...`` and ``?executionArn=...``: the last Express executions kept here
  (``ExpressRing``), which no API call returns.
- ``/console/activities``: per activity, the tasks waiting here for a worker and the workers polling here.
- ``/console/cluster``: the nodes and every shard's lease (on PostgreSQL; on SQLite this node holds them all).

Under ``--auth sigv4`` the API admits these GETs as it admits its own calls (the page signs them) and names the
caller's account and region: each view then shows that account's resources there only. Must not import the API.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import orjson

from ..store.base import Store
from .express import ExpressRing
from .feed import HistoryFeed

Place = tuple[str, str]  # a caller's (region, account)
STATIC = Path(__file__).parent / "static"
_TYPES = {".html": b"text/html; charset=utf-8", ".js": b"text/javascript; charset=utf-8",
          ".css": b"text/css; charset=utf-8", ".txt": b"text/plain; charset=utf-8",
          ".svg": b"image/svg+xml"}
EVENTS_PATH = "/console/events"
VIEWS = ("/console/express", "/console/activities", "/console/cluster")
KEEP_ALIVE_S = 15.0  # a comment line this often keeps proxies from closing a quiet stream
WATCHERS_MAX = 200  # streams open at once on this node; past it a page falls back to reading on a timer


def _assets() -> dict[str, Path]:
    """Every file the console serves, by URL path (read once: nothing outside ``static/`` can be named)."""
    assets = {f"/console/{path.relative_to(STATIC).as_posix()}": path
              for path in STATIC.rglob("*") if path.is_file() and path.suffix in _TYPES}
    assets["/"] = STATIC / "index.html"
    return assets


@dataclass(frozen=True, slots=True)
class ConsoleSources:
    """What the console reads of this node beside the public API (built by node.py)."""

    feed: HistoryFeed
    express: ExpressRing
    activities: Callable[[], dict[str, Any]]  # ActivityMatcher.waiting, on the event loop
    cluster: Callable[[], dict[str, Any]]  # blocking (the store): run on a worker thread


class Console:
    def __init__(self, sources: ConsoleSources | None) -> None:
        """``sources``: None for an app without a node's parts (then no stream and no views)."""
        self.sources = sources
        self.feed = None if sources is None else sources.feed
        self._assets = _assets()
        self._streams = 0

    def serves(self, scope: dict) -> bool:
        """Whether this request is the console's: a GET of its page, a file of it, its stream or a view."""
        path = scope["path"]
        return scope["method"] in ("GET", "HEAD") and (path in self._assets or self.reads_data(scope))

    @staticmethod
    def reads_data(scope: dict) -> bool:
        """Whether this request of the console's reads what a caller may only see of its own (a view, a stream),
        rather than a file of the page."""
        return scope["path"] == EVENTS_PATH or scope["path"] in VIEWS

    async def __call__(self, scope: dict, receive: Any, send: Any, place: Place | None = None) -> None:
        """``place``: the caller's (region, account), whose resources alone the views show (None: any caller sees
        everything)."""
        if scope["path"] == EVENTS_PATH:
            await self._events(scope, receive, send, place)
            return
        if scope["path"] in VIEWS:
            status, view = await self._view(scope["path"], _query(scope), place)
            await send_json(send, status, view)
            return
        path = self._assets[scope["path"]]
        body = path.read_bytes()
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", _TYPES[path.suffix]), (b"content-length", b"%d" % len(body)),
            (b"cache-control", b"no-cache"), (b"x-content-type-options", b"nosniff")]})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})

    async def _view(self, path: str, query: dict[str, str], place: Place | None) -> tuple[int, Any]:
        sources = self.sources
        if sources is None:
            return 503, {"message": "this server has no console views"}
        if path == "/console/activities":
            return 200, {"activities": {arn: waiting for arn, waiting in sources.activities().items()
                                        if _owned(arn, place)}}
        if path == "/console/cluster":
            return 200, await asyncio.to_thread(sources.cluster)
        if not _owned(query.get("executionArn") or query.get("stateMachineArn", ""), place):
            return 403, {"message": "not a resource of the caller's account and region"}
        if "executionArn" in query:
            found = sources.express.execution(query["executionArn"])
            return (200, found) if found is not None else (404, {"message": "not among the Express executions kept "
                                                                            "on this node"})
        return 200, {"executions": sources.express.recent(query.get("stateMachineArn", "")),
                     "kept": sources.express.size}

    async def _events(self, scope: dict, receive: Any, send: Any, place: Place | None) -> None:
        arn = _query(scope).get("executionArn", "")
        if not arn or not _owned(arn, place) or self.feed is None or self._streams >= WATCHERS_MAX:
            status = 400 if not arn else 403 if not _owned(arn, place) else 503
            message = (b"executionArn is required" if not arn
                       else b"not an execution of the caller's account and region"
                       if status == 403 else b"no stream here: read the history on a timer")
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
    """``committed`` after each commit that added to the execution's history, until the page goes away or the
    server stops (then the response ends: the page's EventSource connects again, to whichever server answers)."""
    with feed.watch(arn) as changed:
        await send({"type": "http.response.body", "body": b"retry: 2000\nevent: watching\ndata: {}\n\n",
                    "more_body": True})
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            while not gone.done():
                if feed.closed:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    return
                woken = asyncio.ensure_future(changed.wait())
                await asyncio.wait([woken, gone], timeout=KEEP_ALIVE_S, return_when=asyncio.FIRST_COMPLETED)
                woken.cancel()
                if gone.done() or feed.closed:
                    continue
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


def cluster_view(store: Store, node_id: str, now_ms: int) -> dict[str, Any]:
    """The nodes the store knows and every shard's lease, as this node reads them now."""
    leases = store.shard_leases()
    owned = Counter(lease.owner for lease in leases if lease.owner and lease.lease_until_ms > now_ms)
    return {"node": node_id, "now": now_ms / 1000,
            "nodes": [{"nodeId": node.node_id, "address": node.address, "live": node.lease_until_ms > now_ms,
                       "leaseUntil": node.lease_until_ms / 1000, "shards": owned.get(node.node_id, 0)}
                      for node in store.nodes()],
            "shards": [{"shardId": lease.shard_id, "owner": lease.owner, "rangeId": lease.range_id,
                        "leaseUntil": lease.lease_until_ms / 1000} for lease in leases]}


async def send_json(send: Any, status: int, answer: Any) -> None:
    body = orjson.dumps(answer)
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)),
        (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": body})


def _owned(arn: str, place: Place | None) -> bool:
    return place is None or tuple(arn.split(":")[3:5]) == place


def _query(scope: dict) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(scope.get("query_string", b"").decode("latin-1")).items()}


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
