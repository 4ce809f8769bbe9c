"""The activity worker: poll one activity, run a handler per task, heartbeat while it runs, report the outcome.

Each of ``concurrency`` slot threads loops: long-poll GetActivityTask, run the handler on the task it got, report.
A slot polls only while it has nothing to run, so the worker never holds more tasks than it can run. While a
handler runs, a heartbeat thread sends SendTaskHeartbeat every ``heartbeat_seconds``.

Invariant: a task this worker received is reported at most once, and never after the service said it is gone
(TaskTimedOut or InvalidToken on a heartbeat): that attempt already timed out and a retry may be running elsewhere.
Talks to the service only through boto3; must not import anything else from statewright.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

log = logging.getLogger("statewright.worker")

Handler = Callable[[Any], Any]

POLL_READ_TIMEOUT_S = 70  # the service holds GetActivityTask up to 60 s; a shorter read timeout loses tasks
ERROR_MAX_CHARS = 256  # SendTaskFailure's limits
CAUSE_MAX_CHARS = 32_768
WORKER_NAME_MAX_CHARS = 80
PAUSE_MIN_S = 0.2  # backoff after a failed call: doubles up to PAUSE_MAX_S
PAUSE_MAX_S = 2.0
GONE = frozenset({"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"})  # the attempt is over: stop, report nothing
FATAL_POLL = frozenset({"ActivityDoesNotExist", "InvalidArn", "AccessDeniedException"})


class Worker:
    """Runs ``handler(input)`` for each task of one activity; see the package docstring for an example.

    ``client`` is a boto3 Step Functions client; without one, the worker makes its own from ``client_options``
    (``endpoint_url``, ``region_name``, credentials...; the region defaults to the activity ARN's) with a read
    timeout above the long poll's 60 s. A client passed in should have ``read_timeout`` > 60 s as well.
    """

    def __init__(self, activity_arn: str, handler: Handler, *, client: Any = None, concurrency: int = 4,
                 heartbeat_seconds: float | None = None, worker_name: str | None = None,
                 report_deadline_s: float = 60.0, **client_options: Any) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if heartbeat_seconds is not None and heartbeat_seconds <= 0:
            raise ValueError("heartbeat_seconds must be positive")
        if client is not None and client_options:
            raise ValueError(f"pass either a client or client options, not both: {sorted(client_options)}")
        self.activity_arn = activity_arn
        self.handler = handler
        self.concurrency = concurrency
        self.heartbeat_seconds = heartbeat_seconds
        self.worker_name = (worker_name or f"{socket.gethostname()}-{os.getpid()}")[:WORKER_NAME_MAX_CHARS]
        self.report_deadline_s = report_deadline_s
        self.client = client if client is not None else _make_client(activity_arn, concurrency, client_options)
        self._stopping = threading.Event()
        self._idle = threading.Condition()
        self._busy = 0  # slots holding a task: from the poll that returned it until its report is done
        self._fatal: ClientError | None = None

    # -- running and stopping

    def run(self, *, handle_signals: bool = True) -> None:
        """Poll and run tasks until ``stop()`` (or SIGTERM/SIGINT when ``handle_signals`` and on the main thread).

        On stop no new poll starts; tasks already received run to the end and are reported, then ``run`` returns.
        A poll still waiting on the service is abandoned; should it yet bring a task while the process lives, the
        task is run all the same (the service handed the attempt to this worker and nobody else will get it).
        Raises the service's error if the activity does not exist (or the caller may not poll it).
        """
        previous = self._install_signal_handlers() if handle_signals else {}
        try:
            for index in range(self.concurrency):
                threading.Thread(target=self._slot, name=f"statewright-worker-{index}", daemon=True).start()
            log.info("worker %s polling %s with %d slots", self.worker_name, self.activity_arn, self.concurrency)
            while not self._stopping.wait(0.5):  # a timeout, so signal handlers run promptly on every platform
                pass
            with self._idle:
                while self._busy:
                    self._idle.wait()
            log.info("worker %s stopped", self.worker_name)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if self._fatal is not None:
            raise self._fatal

    def stop(self) -> None:
        """Stop polling; ``run`` returns once the tasks in hand are reported. Safe from any thread or a signal."""
        self._stopping.set()

    def _install_signal_handlers(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}

        def on_signal(signum: int, frame: Any) -> None:
            log.info("worker %s: %s, finishing the tasks in hand", self.worker_name, signal.Signals(signum).name)
            self.stop()

        return {signum: signal.signal(signum, on_signal) for signum in (signal.SIGTERM, signal.SIGINT)}

    # -- one slot: poll, run, report

    def _slot(self) -> None:
        pause_s = PAUSE_MIN_S
        while not self._stopping.is_set():
            try:
                task = self.client.get_activity_task(activityArn=self.activity_arn, workerName=self.worker_name)
            except (ClientError, BotoCoreError) as exc:  # BotoCoreError: refused, reset, timed out (a restart?)
                if isinstance(exc, ClientError) and _code(exc) in FATAL_POLL:
                    log.error("worker %s cannot poll %s: %s", self.worker_name, self.activity_arn, exc)
                    self._fatal = exc
                    self.stop()
                    return
                log.warning("worker %s: poll failed, retrying in %.1f s: %s", self.worker_name, pause_s, exc)
                self._stopping.wait(pause_s)
                pause_s = min(pause_s * 2, PAUSE_MAX_S)
                continue
            pause_s = PAUSE_MIN_S
            if not task.get("taskToken"):
                continue  # the long poll ended empty
            with self._idle:
                self._busy += 1
            try:
                self._run_task(task["taskToken"], task.get("input", "null"))
            finally:
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()

    def _run_task(self, token: str, input_text: str) -> None:
        beat = _Heartbeat(self.client, token, self.heartbeat_seconds) if self.heartbeat_seconds else None
        output: str | None = None
        error = cause = ""
        try:
            try:
                output = json.dumps(self.handler(json.loads(input_text)), allow_nan=False)
            except Exception as exc:
                error, cause = error_of(exc)
                log.info("worker %s: task failed with %s: %s", self.worker_name, error, cause)
        finally:
            if beat is not None:
                beat.stop()
        if beat is not None and beat.gone:
            log.warning("worker %s: the task timed out while it ran; its result is not reported", self.worker_name)
            return
        if output is not None:
            self._report(token, "send_task_success", output=output)
        else:
            self._report(token, "send_task_failure", error=error, cause=cause)

    def _report(self, token: str, operation: str, **fields: str) -> None:
        """Send the outcome, retrying transient failures for up to ``report_deadline_s``."""
        deadline = time.monotonic() + self.report_deadline_s
        pause_s = PAUSE_MIN_S
        while True:
            try:
                getattr(self.client, operation)(taskToken=token, **fields)
                return
            except ClientError as exc:
                code = _code(exc)
                if code in GONE:
                    log.warning("worker %s: %s refused with %s: the task is gone", self.worker_name, operation, code)
                    return
                if operation == "send_task_success" and _status(exc) < 500 and code != "ThrottlingException":
                    # The service will not take this output (too large, say): fail the task rather than leave it.
                    log.error("worker %s: output refused (%s), reporting a failure", self.worker_name, exc)
                    operation, fields = "send_task_failure", {"error": code, "cause": str(exc)[:CAUSE_MAX_CHARS]}
                    continue
                if _status(exc) < 500 and code != "ThrottlingException":
                    log.error("worker %s: %s refused: %s", self.worker_name, operation, exc)
                    return
                failure: Exception = exc
            except BotoCoreError as exc:
                failure = exc
            if time.monotonic() + pause_s > deadline:
                log.error("worker %s: gave up reporting after %.0f s: %s", self.worker_name, self.report_deadline_s,
                          failure)
                return
            log.warning("worker %s: %s failed, retrying in %.1f s: %s", self.worker_name, operation, pause_s, failure)
            time.sleep(pause_s)
            pause_s = min(pause_s * 2, PAUSE_MAX_S)


class _Heartbeat:
    """SendTaskHeartbeat every ``interval_s`` on its own thread until stopped, or until the task is gone."""

    def __init__(self, client: Any, token: str, interval_s: float) -> None:
        self.gone = False
        self._client = client
        self._token = token
        self._interval_s = interval_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="statewright-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()  # a heartbeat in flight may yet say the task is gone

    def _beat(self) -> None:
        while not self._done.wait(self._interval_s):
            try:
                self._client.send_task_heartbeat(taskToken=self._token)
            except ClientError as exc:
                if _code(exc) in GONE:
                    log.warning("heartbeat refused with %s: the task is gone, heartbeats stop", _code(exc))
                    self.gone = True
                    return
                log.warning("heartbeat failed: %s", exc)
            except BotoCoreError as exc:
                log.warning("heartbeat failed: %s", exc)


def error_of(exc: BaseException) -> tuple[str, str]:
    """SendTaskFailure's (error, cause) for an exception: its ``error`` attribute or class name, and its message."""
    error = getattr(exc, "error", None)
    if not isinstance(error, str) or not error:
        error = type(exc).__name__
    return error[:ERROR_MAX_CHARS], str(exc)[:CAUSE_MAX_CHARS]


def _make_client(activity_arn: str, concurrency: int, options: dict[str, Any]) -> Any:
    parts = activity_arn.split(":")
    region = options.pop("region_name", None) or (parts[3] if len(parts) > 3 and parts[3] else None)
    config = Config(read_timeout=POLL_READ_TIMEOUT_S, connect_timeout=10, retries={"total_max_attempts": 1},
                    max_pool_connections=2 * concurrency + 2)  # a poll and a heartbeat per slot
    if "config" in options:
        config = config.merge(options.pop("config"))  # the caller's settings win
    return boto3.client("stepfunctions", region_name=region, config=config, **options)


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
