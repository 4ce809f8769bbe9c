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
from ..engine.heavy_lane import Decided
from ..engine.tokens import TaskTokens
from .config import LANE_DELAY_MS_MAX


class SimulatedLane:
    """The heavy lane (engine/heavy_lane.py) as the simulation runs it: a continuation is decided at once by the
    same decider over the state as the lane's process gets it (its blob) and lands a random while later, or the
    lane's process dies with it ("lane-dies"). A crashed node's engine never applies what lands after."""

    def __init__(self, simulator: Any, services: decider.Services,
                 landed: Callable[[Decided], None]) -> None:
        self._simulator, self._services, self._landed = simulator, services, landed

    def submit(self, state: ExecutionState, definition_key: tuple[str, str], text: Callable[[], str],
               mockable: bool, timer_id: str, now_ms: int, tokens: TaskTokens, activities: Any) -> bool:
        simulator = self._simulator
        simulator.laned += 1
        result: decider.Decision | BaseException | None
        if simulator.faults.fire("lane-dies", min(1.0, 4 * simulator.config.fault_rate)):  # few steps are heavy
            result = RuntimeError("the heavy lane's process died")
        else:
            result = decider.fire_timer(ExecutionState.from_blob(state.to_blob()),
                                        parse_definition(text(), mockable=mockable), timer_id, now_ms,
                                        self._services)
        decided = Decided(state.arn, timer_id, (state.version, state.start_ms, state.redrive_count), result)
        simulator.at(simulator.rng.randint(0, LANE_DELAY_MS_MAX), lambda: self._landed(decided))
        return True

    def close(self) -> None:
        pass
