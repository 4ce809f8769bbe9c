"""A TCP link between a node and its database that a test can hold, release and cut: the network faults the fencing
tests need on real processes (a node's writes reaching the database late, or never).

``Link(upstream_port)`` listens on a free port of its own and forwards each connection to the upstream port. While
held, the bytes each way wait in the link (in order) instead of going on; ``release`` sends them on and forwards
again; ``release_requests`` sends on only the node's side (its answers stay held); ``cut`` closes every
connection, dropping what waits, and refuses new ones until ``heal``. One thread, one selector.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from urllib.parse import urlsplit, urlunsplit

_CHUNK = 65536


class _Pair:
    """One proxied connection: the node's socket and the upstream one, with what waits to go each way."""

    def __init__(self, near: socket.socket, far: socket.socket) -> None:
        self.near, self.far = near, far
        self.to_far, self.to_near = bytearray(), bytearray()


class Link:
    def __init__(self, upstream_port: int, host: str = "127.0.0.1") -> None:
        self._upstream = (host, upstream_port)
        self._listener = socket.create_server((host, 0))
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[_Pair] = []
        self._hold_up = self._hold_down = self._refusing = False
        self._closed = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread = threading.Thread(target=self._run, name="link", daemon=True)
        self._thread.start()

    # -- what a test does

    def hold(self) -> None:
        self._set(up=True, down=True)

    def release(self) -> None:
        self._set(up=False, down=False)

    def release_requests(self) -> None:
        """The node's bytes go on (its requests reach the database); the database's answers stay held."""
        self._set(up=False, down=True)

    def cut(self) -> None:
        """Every connection closed (what waited in the link is lost); new ones are refused until ``heal``."""
        with self._lock:
            self._refusing = True
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in (pair.near, pair.far):
                _close(sock)
        self._wake()

    def heal(self) -> None:
        with self._lock:
            self._refusing = False
        self._set(up=False, down=False)

    def held_bytes(self) -> int:
        """Bytes waiting in the link from the node to the database."""
        with self._lock:
            return sum(len(pair.to_far) for pair in self._pairs)

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._thread.join(5)
        for sock in (self._listener, self._wake_r, self._wake_w):
            _close(sock)

    # -- the loop

    def _set(self, *, up: bool, down: bool) -> None:
        with self._lock:
            self._hold_up, self._hold_down = up, down
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _run(self) -> None:
        with selectors.DefaultSelector() as selector:
            while not self._closed:
                self._register(selector)
                for key, _ in selector.select(0.05):
                    if key.fileobj is self._wake_r:
                        self._wake_r.recv(_CHUNK)
                    elif key.fileobj is self._listener:
                        self._accept()
                    else:
                        self._read(*key.data)
                self._flush()

    def _register(self, selector: selectors.BaseSelector) -> None:
        for key in list(selector.get_map().values()):
            selector.unregister(key.fileobj)
        selector.register(self._wake_r, selectors.EVENT_READ)
        selector.register(self._listener, selectors.EVENT_READ)
        with self._lock:
            for pair in self._pairs:
                selector.register(pair.near, selectors.EVENT_READ, (pair, True))
                selector.register(pair.far, selectors.EVENT_READ, (pair, False))

    def _accept(self) -> None:
        try:
            near, _ = self._listener.accept()
        except BlockingIOError:
            return
        with self._lock:
            refusing = self._refusing
        if refusing:
            _close(near)
            return
        try:
            far = socket.create_connection(self._upstream, timeout=5)
        except OSError:
            _close(near)
            return
        near.setblocking(False)
        far.setblocking(False)
        with self._lock:
            refusing = self._refusing  # cut while this one was being connected
            if not refusing:
                self._pairs.append(_Pair(near, far))
        if refusing:
            _close(near)
            _close(far)

    def _read(self, pair: _Pair, from_near: bool) -> None:
        sock = pair.near if from_near else pair.far
        try:
            data = sock.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # one side closed: so does the other, as a real network connection would end
            self._drop(pair)
            return
        (pair.to_far if from_near else pair.to_near).extend(data)

    def _flush(self) -> None:
        with self._lock:
            pairs, hold_up, hold_down = list(self._pairs), self._hold_up, self._hold_down
        for pair in pairs:
            if not hold_up:
                _send(pair.far, pair.to_far)
            if not hold_down:
                _send(pair.near, pair.to_near)

    def _drop(self, pair: _Pair) -> None:
        with self._lock:
            if pair in self._pairs:
                self._pairs.remove(pair)
        _close(pair.near)
        _close(pair.far)


def through(url: str, port: int) -> str:
    """A database URL whose host's port is ``port``: the same database, reached through a link listening there."""
    parts = urlsplit(url)
    credentials = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{credentials}{parts.hostname or '127.0.0.1'}:{port}"))


def _send(sock: socket.socket, waiting: bytearray) -> None:
    while waiting:
        try:
            sent = sock.send(waiting)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            waiting.clear()
            return
        del waiting[:sent]


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()
