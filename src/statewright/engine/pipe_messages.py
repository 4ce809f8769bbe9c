"""Messages between a server and a helper process of its own (the heavy lane, the trace lane) over a pipe: each a
length, then a pickle. Both ends are this build, and nothing else writes to the pipes."""

from __future__ import annotations

import pickle
import struct
from typing import IO, Any

MESSAGE_MAX = 1 << 30  # a longer length on a pipe is no message of ours: the stream is broken
_LENGTH = struct.Struct("!I")


def put(pipe: IO[bytes], message: object) -> None:
    data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
    pipe.write(_LENGTH.pack(len(data)) + data)
    pipe.flush()


def take(pipe: IO[bytes]) -> Any:
    """The next message, or None once the other side has closed the pipe; ValueError on a broken stream."""
    head = pipe.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack(head)
    if length > MESSAGE_MAX:
        raise ValueError(f"a message of {length} bytes on a helper's pipe: the stream is broken")
    data = pipe.read(length)
    if len(data) < length:
        return None
    return pickle.loads(data)
