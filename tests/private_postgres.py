"""A PostgreSQL server of one's own, for the chaos run's faults that the machine's shared one must not suffer: a
restart (``restart``, immediate: its processes killed, its WAL replayed at the next start, as after a crash) and a
full disk (``fill_disk`` / ``free_disk``: its data directory is on a tmpfs of its own, filled with a ballast file).

It needs PostgreSQL's server binaries (``pg_config --bindir``), root (initdb and the server run as the ``postgres``
user, the tmpfs is mounted), and Linux. ``available`` says whether this machine can.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

USER = "postgres"
DISK_MB = 4096  # the tmpfs the data directory is on (memory is taken only as it fills)
START_TIMEOUT_S = 60


def available() -> str | None:
    """None if a private server can run here, else why not."""
    if os.geteuid() != 0:
        return "it needs root (the server runs as the postgres user on a tmpfs mounted for it)"
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return f"there is no {USER} user"
    if _bindir() is None:
        return "PostgreSQL's server binaries are not installed (pg_config --bindir)"
    return None


def _bindir() -> Path | None:
    try:
        found = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return Path(found) if (Path(found) / "initdb").exists() else None


def fill(ballast: Path) -> None:
    """Fill the filesystem ``ballast`` is on, to the last byte, with that file."""
    with open(ballast, "wb", buffering=0) as file:
        with contextlib.suppress(OSError):
            os.posix_fallocate(file.fileno(), 0, max(shutil.disk_usage(ballast.parent).free - 2**20, 0))
        with contextlib.suppress(OSError):
            while True:  # what the allocation left, in ever smaller writes
                file.write(b"\0" * (2**16 if shutil.disk_usage(ballast.parent).free >= 2**16 else 512))


class PrivatePostgres:
    def __init__(self, port: int) -> None:
        """Its files go in a new directory of its own (the postgres user must reach it: not under a private one)."""
        self.root = Path(tempfile.mkdtemp(prefix="statewright-postgres-"))
        self.root.chmod(0o755)
        self.port = port
        self.disk = self.root / "disk"
        self.data = self.disk / "pgdata"
        self.socket_dir = self.root / "socket"
        self.log = self.root / "postgres.log"
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        self._bin = _bindir()
        self._mounted = False

    def start(self) -> PrivatePostgres:
        """Create the cluster (first time) and start the server; returns once it takes connections."""
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        if not self.data.exists():
            self.disk.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(self.disk)], check=True)
            self._mounted = True
            self.socket_dir.mkdir(parents=True, exist_ok=True)
            owner = pwd.getpwnam(USER)
            for path in (self.root, self.disk, self.socket_dir):
                os.chown(path, owner.pw_uid, owner.pw_gid)
            self._as_postgres("initdb", "-D", str(self.data), "-A", "trust", "-U", USER, "--no-sync")
            Path(self.log).touch()
            os.chown(self.log, owner.pw_uid, owner.pw_gid)
        self._as_postgres("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", str(START_TIMEOUT_S),
                          "-o", f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1 "
                                "-c max_connections=300", "start")
        self._wait_ready()

    def restart(self) -> None:
        """Stop it the way a crash does (immediate: no checkpoint, every connection cut), then start it: it replays
        its WAL."""
        self.stop("immediate")
        self.start()

    def stop(self, mode: str = "fast") -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._as_postgres("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def running(self) -> bool:
        return subprocess.run([str(self._bin / "pg_ctl"), "-D", str(self.data), "status"], capture_output=True,
                              user=USER).returncode == 0

    def fill_disk(self) -> None:
        """Fill its disk to the last byte with a ballast file."""
        fill(self.disk / "ballast")

    def free_disk(self) -> None:
        """Remove the ballast; a server that stopped for want of space is started again, as an operator would."""
        (self.disk / "ballast").unlink(missing_ok=True)
        if not self.running():
            self.start()

    def close(self) -> None:
        """Stop it and remove everything it had."""
        if self.data.exists():
            self.stop("immediate")
        if self._mounted:
            subprocess.run(["umount", "-l", str(self.disk)], check=False)
            self._mounted = False
        shutil.rmtree(self.root, ignore_errors=True)

    def _as_postgres(self, program: str, *args: str) -> None:
        done = subprocess.run([str(self._bin / program), *args], capture_output=True, text=True, user=USER,
                              cwd=self.root)
        if done.returncode != 0:
            raise subprocess.CalledProcessError(done.returncode, program, done.stdout, done.stderr)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
