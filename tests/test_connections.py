"""Connections a client leaves idle or half-sent are closed, and open connections are bounded (issue 14, finding 6),
against a real server process over raw sockets. The waits are bounded reads (a closed connection reads EOF), not
timing assertions."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from server import ServerProcess

pytestmark = pytest.mark.slow  # a real server process: not in the fast tier

WAIT_S = 30  # a socket that is still open after this fails the test
REQUEST = (b"POST / HTTP/1.1\r\nHost: localhost\r\nX-Amz-Target: AWSStepFunctions.ListActivities\r\n"
           b"Content-Type: application/x-amz-json-1.0\r\nContent-Length: 2\r\n\r\n{}")


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> Iterator[ServerProcess]:
    """A server that gives a request head and an idle connection 200 ms."""
    process = ServerProcess(tmp_path_factory.mktemp("quick") / "data", extra_args=(
        "--keep-alive-ms", "200", "--request-head-timeout-ms", "200", "--request-body-timeout-ms", "200")).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def bounded(tmp_path_factory) -> Iterator[ServerProcess]:
    """A server that holds at most 20 connections, 15 from one address, and would wait a minute for a first byte
    and a request head."""
    process = ServerProcess(tmp_path_factory.mktemp("bounded") / "data", extra_args=(
        "--connections-max", "20", "--connections-per-address-max", "15", "--request-head-timeout-ms", "60000",
        "--first-byte-timeout-ms", "60000")).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def impatient(tmp_path_factory) -> Iterator[ServerProcess]:
    """A server that waits 300 ms for a new connection's first byte, and a minute for its request head."""
    process = ServerProcess(tmp_path_factory.mktemp("impatient") / "data", extra_args=(
        "--first-byte-timeout-ms", "300", "--request-head-timeout-ms", "60000")).start()
    yield process
    process.stop()


def connect(server: ServerProcess, send: bytes = b"", address: str = "127.0.0.1") -> socket.socket:
    """A connection from ``address`` (any 127.x.y.z reaches the loopback: a client address of its own)."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S, source_address=(address, 0))
    sock.sendall(send)
    return sock


def still_open(sock: socket.socket) -> bool:
    """Whether the server has neither closed the connection nor sent anything within a second."""
    sock.settimeout(1)
    try:
        sock.recv(1)  # EOF, or something sent
        return False
    except TimeoutError:
        return True
    except ConnectionResetError:
        return False
    finally:
        sock.settimeout(WAIT_S)


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes the connection (EOF or reset) before WAIT_S; whatever it sent first is read."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False
    finally:
        sock.close()
    return True


def answered(sock: socket.socket) -> bytes:
    """The first response on a connection (its status line and headers, and as much body as came with them)."""
    sock.sendall(REQUEST)
    return sock.recv(65536)


def test_a_connection_that_never_sends_is_closed(quick):
    assert closed_by_server(connect(quick))


@pytest.mark.parametrize("part", [b"POST / HTTP/1.1\r\n", b"POST / HTTP/1.1\r\nHost: localhost\r\nX-Amz-Tar", b"P"])
def test_a_connection_that_sends_part_of_a_request_head_is_closed(quick, part):
    assert closed_by_server(connect(quick, part))


def test_a_connection_that_trickles_its_body_is_closed(quick):
    sock = connect(quick, REQUEST.replace(b"Content-Length: 2", b"Content-Length: 5000")[:-2] + b"{")
    assert closed_by_server(sock)


def test_an_idle_kept_alive_connection_is_closed_after_its_answer(quick):
    sock = connect(quick)
    assert answered(sock).startswith(b"HTTP/1.1 200")
    assert closed_by_server(sock)


def test_a_second_request_head_sent_in_part_is_closed_too(quick):
    sock = connect(quick)
    assert answered(sock).startswith(b"HTTP/1.1 200")
    sock.sendall(REQUEST[:20])
    assert closed_by_server(sock)


def test_requests_are_served_beside_idle_and_half_sent_connections(quick):
    held = [connect(quick) for _ in range(10)] + [connect(quick, REQUEST[:30]) for _ in range(10)]
    try:
        assert quick.client().list_activities()["activities"] == []
    finally:
        for sock in held:
            sock.close()


def test_past_the_limit_the_longest_idle_connection_makes_room_for_a_new_client(bounded):
    held = [connect(bounded, address=f"127.0.0.{1 + index % 2}") for index in range(20)]  # idle: nothing sent
    try:
        newcomer = connect(bounded, address="127.0.0.3")
        assert answered(newcomer).startswith(b"HTTP/1.1 200")
        newcomer.close()
        assert closed_by_server(held[0])  # the longest idle, of the addresses holding most
        assert still_open(held[1])
    finally:
        for sock in held:
            sock.close()


def test_an_address_past_its_bound_closes_its_own_longest_idle_connection(bounded):
    held = [connect(bounded, address="127.0.0.4") for _ in range(16)]
    try:
        assert closed_by_server(held[0])
        assert answered(held[15]).startswith(b"HTTP/1.1 200")
        assert still_open(held[1])
    finally:
        for sock in held:
            sock.close()


def test_when_every_connection_is_busy_a_new_one_is_closed_and_a_retrying_client_is_served_later(bounded):
    activity = bounded.client().create_activity(name="busy-polls")["activityArn"]
    body = json.dumps({"activityArn": activity}).encode()
    poll = (b"POST / HTTP/1.1\r\nHost: localhost\r\nX-Amz-Target: AWSStepFunctions.GetActivityTask\r\n"
            b"Content-Type: application/x-amz-json-1.0\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    held = [connect(bounded, poll, address=f"127.0.0.{5 + index % 2}") for index in range(20)]  # long polls
    try:
        assert all(still_open(sock) for sock in held[:2])  # their polls wait for a task
        assert closed_by_server(connect(bounded, address="127.0.0.7"))
    finally:
        for sock in held:
            sock.close()
    # The server sees the closes in its own time: a client that retries a reset connection is served.
    retrying = bounded.client(retries={"max_attempts": 10, "mode": "standard"})
    assert retrying.list_activities()["activities"]


def test_a_connection_that_sends_nothing_is_closed_after_the_first_byte_timeout(impatient):
    silent, begun = connect(impatient), connect(impatient, b"POST / HTTP/1.1\r\n")
    try:
        assert closed_by_server(silent)  # long before its request head's minute
        assert still_open(begun)  # it sent a byte: its head has the minute
    finally:
        begun.close()


def test_a_nul_byte_in_the_target_header_is_answered_in_aws_shape(quick):
    sock = connect(quick, REQUEST.replace(b"ListActivities", b"List\x00Activities"))
    response = b""
    try:
        while chunk := sock.recv(65536):
            response += chunk
    finally:
        sock.close()
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400")
    assert b"content-type: application/x-amz-json-1.0" in head
    error = json.loads(body)
    assert error["__type"].endswith("#SerializationException")
    assert "NUL" in error["message"]
