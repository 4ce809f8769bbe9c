"""The API's connections join the writes of one event-loop turn into one system call (api/transport.py)."""

from __future__ import annotations

import asyncio
import socket

from statewright.api.transport import _Corked


async def _received_by_one_read(send: list[bytes], then_close: bool) -> tuple[bytes, int]:
    """Write ``send`` through a corked transport in one turn; returns what the peer read and in how many reads."""
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    transport, _ = await loop.create_connection(asyncio.Protocol, sock=ours)
    writes: list[bytes] = []
    real_write = transport.write
    transport.write = lambda data: (writes.append(data), real_write(data))  # type: ignore[method-assign]
    corked = _Corked(transport, loop)
    for part in send:
        corked.write(part)
    if then_close:
        corked.close()
    await asyncio.sleep(0.05)
    received = b""
    while chunk := await loop.sock_recv(theirs, 65536):
        received += chunk
        if then_close is False and received == b"".join(send):
            break
    theirs.close()
    if not then_close:
        transport.close()
    return received, len(writes)


def test_writes_of_one_turn_reach_the_socket_as_one():
    received, writes = asyncio.run(_received_by_one_read([b"HTTP/1.1 200 OK\r\n\r\n", b"{}"], then_close=False))
    assert received == b"HTTP/1.1 200 OK\r\n\r\n{}" and writes == 1


def test_closing_sends_what_waits_first():
    received, writes = asyncio.run(_received_by_one_read([b"head", b"body"], then_close=True))
    assert received == b"headbody" and writes == 1
