"""``python -m bench.profiled DIR serve ...``: statewright under cProfile, one profile per thread.

The engine thread's profile goes to DIR/engine.prof, the HTTP (event loop, main thread) profile to DIR/http.prof,
written when the server stops (SIGINT). Each profile counts its thread's CPU time (``time.thread_time``), not
wall time, so waiting for fsync, the GIL or the network is left out. cProfile is deterministic and slows every
call, so read the shares, not the absolute figures (py-spy, a sampling profiler, cannot read this machine's
Python build).
"""

from __future__ import annotations

import cProfile
import sys
import time
from pathlib import Path

from statewright import cli
from statewright.engine.engine import Engine


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    run = Engine._run

    def profiled_run(engine: Engine) -> None:
        profile = cProfile.Profile(time.thread_time)
        profile.enable()
        try:
            run(engine)
        finally:
            profile.disable()
            profile.dump_stats(out / "engine.prof")

    Engine._run = profiled_run  # type: ignore[method-assign]
    profile = cProfile.Profile(time.thread_time)
    profile.enable()
    try:
        return cli.main(sys.argv[2:])
    finally:
        profile.disable()
        profile.dump_stats(out / "http.prof")


if __name__ == "__main__":
    raise SystemExit(main())
