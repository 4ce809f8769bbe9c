"""The load generator's client: AWS JSON 1.0 over HTTP/1.1 keep-alive connections on raw asyncio streams.

No SigV4 by default: statewright (and moto) accept any Authorization header; the header sent only names the
service and region, which both servers read. A pool given a ``key`` signs every request with botocore's signer
(for ``--auth sigv4``; its cost shows in the load generator's CPU). Each connection carries one request at a time;
a ``Pool`` hands connections to coroutines and reopens one the server closed. Bodies are JSON encoded and decoded
with orjson.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

IDLE_S = 2.0  # reuse an idle connection only this long: servers close idle ones (uvicorn after 5 s)
_AUTH = (b"AWS4-HMAC-SHA256 Credential=bench/20240101/us-east-1/states/aws4_request, "
         b"SignedHeaders=host;x-amz-date;x-amz-target, Signature=0")


class AwsError(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.code = str(body.get("__type", "")).rpartition("#")[2]
        super().__init__(f"{status} {self.code}: {body.get('message') or body.get('Message') or body}")


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.open = True
        self.used = time.monotonic()

    async def request(self, head: bytes, body: bytes) -> tuple[int, bytes]:
        self.writer.write(head + str(len(body)).encode() + b"\r\n\r\n" + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length, chunked = None, False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
            elif name == b"connection" and value.strip().lower() == b"close":
                self.open = False
        if length is not None:
            data = await self.reader.readexactly(length)
        elif chunked:
            data = await self._chunks()
        else:
            data = await self.reader.read()
            self.open = False
        if lines[0].startswith(b"HTTP/1.0"):
            self.open = False
        return status, data

    async def _chunks(self) -> bytes:
        parts = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")
                return b"".join(parts)
            parts.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)

    def close(self) -> None:
        self.open = False
        self.writer.close()


class Pool:
    """Keep-alive connections to one endpoint (``http://host:port``), at most ``size`` at a time."""

    def __init__(self, endpoint: str, size: int, key: tuple[str, str] | None = None) -> None:
        host, _, port = endpoint.removeprefix("http://").rstrip("/").partition(":")
        self.host, self.port = host, int(port or 80)
        self._signer = None if key is None else SigV4Auth(Credentials(*key), "states", "us-east-1")
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(size)
        self.requests = 0

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[_Connection]:
        async with self._slots:
            connection = None
            while self._idle and connection is None:
                connection = self._idle.pop()
                if time.monotonic() - connection.used > IDLE_S:
                    connection.close()
                    connection = None
            if connection is None:
                reader, writer = await asyncio.open_connection(self.host, self.port, limit=1 << 24)
                connection = _Connection(reader, writer)
            try:
                yield connection
            except BaseException:
                connection.close()
                raise
            if connection.open:
                connection.used = time.monotonic()
                self._idle.append(connection)
            else:
                connection.close()

    async def call(self, operation: str, params: dict[str, Any], retries: int = 3) -> dict[str, Any]:
        """One operation; transport errors are retried on a new connection (the request may be re-sent)."""
        body = orjson.dumps(params)
        head = (b"POST / HTTP/1.1\r\nHost: " + f"{self.host}:{self.port}".encode()
                + b"\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AWSStepFunctions."
                + operation.encode() + self._authorization(operation, body) + b"\r\nContent-Length: ")
        for attempt in range(retries + 1):
            try:
                async with self._connection() as connection:
                    status, data = await connection.request(head, body)
                break
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                if attempt == retries:
                    raise
                self.close()  # the other idle connections are likely closed by the server too
                await asyncio.sleep(0.05 * (attempt + 1))
        self.requests += 1
        result = orjson.loads(data) if data else {}
        if status != 200:
            raise AwsError(status, result)
        return result

    def _authorization(self, operation: str, body: bytes) -> bytes:
        """The Authorization header (and, signed, its X-Amz-Date) of one request."""
        if self._signer is None:
            return b"\r\nAuthorization: " + _AUTH
        request = AWSRequest(method="POST", url=f"http://{self.host}:{self.port}/", data=body, headers={
            "Host": f"{self.host}:{self.port}", "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": f"AWSStepFunctions.{operation}"})
        self._signer.add_auth(request)
        return (b"\r\nX-Amz-Date: " + request.headers["X-Amz-Date"].encode() + b"\r\nAuthorization: "
                + request.headers["Authorization"].encode())

    async def get(self, path: str) -> bytes:
        """A plain GET (the /metrics page) on its own connection."""
        reader, writer = await asyncio.open_connection(self.host, self.port)
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\nConnection: close\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            data = await reader.read()
            if b"transfer-encoding: chunked" in head.lower():
                data = _dechunk(data)
            if status != 200:
                raise AwsError(status, {"message": data[:200].decode(errors="replace")})
            return data
        finally:
            writer.close()

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()


def _dechunk(data: bytes) -> bytes:
    parts, at = [], 0
    while True:
        end = data.index(b"\r\n", at)
        size = int(data[at:end].split(b";")[0], 16)
        if size == 0:
            return b"".join(parts)
        parts.append(data[end + 2:end + 2 + size])
        at = end + 2 + size + 2


async def list_all(pool: Pool, state_machine_arn: str, status: str | None = None) -> list[dict[str, Any]]:
    """Every execution of a machine (optionally with one status), following nextToken, 1,000 a page."""
    items: list[dict[str, Any]] = []
    token = None
    while True:
        params: dict[str, Any] = {"stateMachineArn": state_machine_arn, "maxResults": 1000}
        if status:
            params["statusFilter"] = status
        if token:
            params["nextToken"] = token
        page = await pool.call("ListExecutions", params)
        items += page.get("executions", [])
        token = page.get("nextToken")
        if not token:
            return items


async def count_status(pool: Pool, state_machine_arn: str, status: str) -> int:
    return len(await list_all(pool, state_machine_arn, status))


async def any_with_status(pool: Pool, state_machine_arn: str, status: str) -> bool:
    page = await pool.call("ListExecutions", {"stateMachineArn": state_machine_arn, "maxResults": 1,
                                              "statusFilter": status})
    return bool(page.get("executions"))
