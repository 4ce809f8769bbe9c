"""The heavy lane as the simulation runs it: decided at once in the simulator's process, landing later (or never).

``SimulatedLane`` stands where ``engine/heavy_lane.py``'s process stands (``Engine(heavy_lane=...)``); the
simulator passes itself (``simulator``: its ``rng``, ``faults``, ``config``, ``at`` and the ``laned`` count).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import decider
from ..asl.definition import parse_definition
from ..decider.execution import ExecutionState
from ..engine.batch import Reply
from ..engine.heavy_lane import Decided, Job, decide
from ..engine.transitions import within
from .config import LANE_DELAY_MS_MAX


class SimulatedLane:
    """The heavy lane (engine/heavy_lane.py) as the simulation runs it: a step is decided at once by the same
    decider over the state as the lane's process gets it (its blob), on the whole budget, and lands a random while
    later, or the lane's process dies with it ("lane-dies"). A crashed node's engine never applies what lands
    after."""

    def __init__(self, simulator: Any, services: decider.Services,
                 landed: Callable[[Decided, Reply], None]) -> None:
        self._simulator, self._services, self._landed = simulator, services, landed

    def submit(self, job: Job, reply: Reply) -> bool:
        simulator = self._simulator
        simulator.laned += 1
        result: decider.Decision | BaseException | None
        if simulator.faults.fire("lane-dies", min(1.0, 4 * simulator.config.fault_rate)):  # few steps are heavy
            result = RuntimeError("the heavy lane's process died")
        else:
            result = decide(job.command, ExecutionState.from_blob(job.state.to_blob()),
                            parse_definition(job.text()), job.now_ms,
                            within(self._services, job.budget), job.inputs)
        decided = Decided.of(job, result)
        simulator.at(simulator.rng.randint(0, LANE_DELAY_MS_MAX), lambda: self._landed(decided, reply))
        return True

    def close(self) -> None:
        pass
