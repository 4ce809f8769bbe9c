"""A stepped wall clock for one statewright process of the chaos run (tools/chaos.py's ``clock-step`` fault): put
this directory on the process's PYTHONPATH and name a file in STATEWRIGHT_CLOCK_OFFSET_FILE; the offset it holds
(milliseconds, may be negative; read every 50 ms) is added to ``time.time`` and ``time.time_ns``, the wall clock
statewright reads (leases, timers, history times). The monotonic clocks are left alone, as a step of the system
clock leaves them. Linux's time namespaces cannot step CLOCK_REALTIME for one process, hence this hook, which does
for Python what libfaketime does with LD_PRELOAD."""

import os
import threading
import time

_path = os.environ.get("STATEWRIGHT_CLOCK_OFFSET_FILE")
if _path:
    _real_time_ns = time.time_ns
    _offset_ns = 0

    def _time_ns() -> int:
        return _real_time_ns() + _offset_ns

    def _time() -> float:
        return (_real_time_ns() + _offset_ns) / 1e9

    def _watch() -> None:
        global _offset_ns
        while True:
            try:
                with open(_path) as file:
                    _offset_ns = int(float(file.read().strip() or 0) * 1_000_000)
            except (OSError, ValueError):
                pass
            time.sleep(0.05)

    time.time_ns, time.time = _time_ns, _time
    threading.Thread(target=_watch, name="clock-step", daemon=True).start()
