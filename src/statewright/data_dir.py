"""The data directory's lock: one process serves (or restores into) a SQLite data directory at a time."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class DataDirInUse(Exception):
    """Another statewright process holds the data directory."""


def lock_data_dir(data_dir: Path) -> int:
    """Hold an exclusive lock on the data directory for the life of the process."""
    descriptor = os.open(data_dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise DataDirInUse(f"another statewright process is serving {data_dir}; stop it or pass another "
                           f"--data-dir") from None
    return descriptor
