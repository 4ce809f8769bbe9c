"""``statewright backup`` and ``statewright restore``: a SQLite data directory copied while its server serves it, and
put back into an empty one.

The database is copied with SQLite's online backup in one step: a snapshot of one moment, taken beside the
server's writes (WAL mode: the server neither waits for it nor is seen half-written). The compacted histories
(``payloads/``, write-once files) are copied after it, so every history the snapshot points at is there, unless
retention deleted its execution in between (then the restored server deletes the execution too). A restore
starts where the snapshot stopped: executions go on from their last committed step (timers that fell due since
fire at once; a task in flight is run again when its attempt times out or by its heartbeat), and task tokens
minted before the snapshot still verify, its keys being in the database.

On PostgreSQL, use PostgreSQL's own tools (pg_dump, or continuous archiving for point-in-time recovery): see the
README.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

from .data_dir import DataDirInUse, lock_data_dir

DATABASE = "statewright.db"
PAYLOADS = "payloads"


class BackupRefused(Exception):
    """The backup or restore cannot be made as asked; the message says what to do."""


def backup(data_dir: Path, to: Path) -> str:
    """Copy the data directory ``data_dir`` (served or not) into ``to``, a new or empty directory; what was
    copied, for the operator."""
    source = data_dir / DATABASE
    if not source.is_file():
        raise BackupRefused(f"no statewright data in {data_dir} ({DATABASE} is missing): pass the server's --data-dir")
    if to.exists() and any(to.iterdir()):
        raise BackupRefused(f"{to} is not empty: back up into a new directory")
    to.mkdir(parents=True, exist_ok=True)
    _copy_database(source, to / DATABASE)
    files = _copy_payloads(data_dir / PAYLOADS, to / PAYLOADS)
    return f"backed up {data_dir} to {to}: {_size(to / DATABASE)} of database, {files} compacted histories"


def restore(source: Path, data_dir: Path) -> str:
    """Put the backup ``source`` into ``data_dir``, which must hold no data (a server must not be serving it: its
    lock is taken meanwhile); what was restored."""
    if not (source / DATABASE).is_file():
        raise BackupRefused(f"{source} is no statewright backup ({DATABASE} is missing)")
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        lock = lock_data_dir(data_dir)
    except DataDirInUse as exc:
        raise BackupRefused(str(exc)) from None
    try:
        if (data_dir / DATABASE).exists():
            raise BackupRefused(f"{data_dir} holds data already: restore into an empty --data-dir (or move "
                                f"{data_dir / DATABASE} and {data_dir / PAYLOADS} away first)")
        _copy_database(source / DATABASE, data_dir / DATABASE)
        files = _copy_payloads(source / PAYLOADS, data_dir / PAYLOADS)
    finally:
        os.close(lock)
    return (f"restored {source} into {data_dir}: {_size(data_dir / DATABASE)} of database, {files} compacted "
            f"histories; start the server with --data-dir {data_dir}")


def _copy_database(source: Path, target: Path) -> None:
    """SQLite's online backup, in one step (a consistent snapshot, whatever the source's writers do)."""
    reading = sqlite3.connect(source, timeout=30)
    try:
        writing = sqlite3.connect(target)
        try:
            reading.backup(writing)
            writing.execute("PRAGMA journal_mode = WAL")  # as the server keeps it
        finally:
            writing.close()
    finally:
        reading.close()


def _copy_payloads(source: Path, target: Path) -> int:
    if not source.is_dir():
        return 0
    shutil.copytree(source, target, dirs_exist_ok=True)
    return sum(1 for path in target.rglob("*") if path.is_file())


def _size(path: Path) -> str:
    size = path.stat().st_size
    return f"{size / 1_048_576:.1f} MiB" if size >= 1_048_576 else f"{size / 1024:.0f} KiB"
