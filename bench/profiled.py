"""``python -m bench.profiled DIR serve ...``: statewright under cProfile, one profile per thread.

The engine thread's profile goes to DIR/engine.prof, the HTTP (event loop, main thread) profile to DIR/http.prof,
written when the server stops (SIGINT). Each profile counts its thread's CPU time (``time.thread_time``), not
wall time, so waiting for fsync, the GIL or the network is left out. cProfile is deterministic and slows every
call, so read the shares, not the absolute figures (py-spy, a sampling profiler, cannot read this machine's
Python build). SIGUSR1 starts the engine thread's profile afresh at its next tick, so a workload can leave its
set-up out (W3 profiles the burst, not the starts before it).
"""

from __future__ import annotations

import cProfile
import signal
import sys
import threading
import time
from pathlib import Path

from statewright import cli
from statewright.engine.engine import Engine


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    run, tick = Engine._run, Engine.tick
    afresh = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: afresh.set())
    engine_profile = cProfile.Profile(time.thread_time)

    def profiled_run(engine: Engine) -> None:
        engine_profile.enable()
        try:
            run(engine)
        finally:
            engine_profile.disable()
            engine_profile.dump_stats(out / "engine.prof")

    def tick_maybe_afresh(engine: Engine, now_ms: int) -> int:
        nonlocal engine_profile
        if afresh.is_set():
            afresh.clear()
            engine_profile.disable()
            engine_profile = cProfile.Profile(time.thread_time)
            engine_profile.enable()
        return tick(engine, now_ms)

    Engine._run = profiled_run  # type: ignore[method-assign]
    Engine.tick = tick_maybe_afresh  # type: ignore[method-assign]
    profile = cProfile.Profile(time.thread_time)
    profile.enable()
    try:
        return cli.main(sys.argv[2:])
    finally:
        profile.disable()
        profile.dump_stats(out / "http.prof")


if __name__ == "__main__":
    raise SystemExit(main())
