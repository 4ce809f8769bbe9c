"""What a simulated run is given (a seed, faults, sizes: ``SimConfig`` and the constants the world is built with) and
what it returns (``SimResult``), with the command that replays it."""

from __future__ import annotations

from dataclasses import dataclass

from ..cluster.membership import LeaseSettings
from ..engine.limits import Limits
from ..engine.retention import RetentionSettings
from .faults import ALL_FAULTS

ACCOUNT = "123456789012"
BURST_ACCOUNT = "210987654321"  # the bursts' (the "burst" fault): another tenant's, beside the workload's account
REGION = "us-east-1"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/simulated"
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the virtual clock's origin
SHARDS = 4
ACTIVITIES = 3
MACHINES = 6  # the first two are children only (no nested starts of their own)
LIVENESS_MS = 6 * 3600 * 1000  # virtual time the run may take to close everything once the faults stop
TICKS_PER_STEP_MAX = 64
ACK_RETRY_MS = 5_000  # an acknowledgement with no reply by then is sent again
CLAIMED_ELSEWHERE = 0.5  # several nodes: how often a worker polling another node also goes for an activity task
CLAIM_MS = 5_000  # how long such a claim holds the task from other claims, as the API's matcher claims it
STEPS_DEFAULT = 400
FAULT_RATE_DEFAULT = 0.05
# Small limits, so that paging, full windows and read-backs run in every simulation.
SIM_LIMITS = Limits(tick_commands_max=64, refill_rows_max=16, timer_window_max=4096, outbox_window_max=24,
                    outbox_page_rows_max=8, inbox_commands_max=10_000, cached_executions_max=16,
                    apply_states_max=3, apply_steps_max=4,  # a JSONata state or two make a step heavy: the lane runs
                    evaluation_slice_steps=6)  # and a few more, past the engine thread's slice, send a step there
LANE_DELAY_MS_MAX = 2_000  # how long the heavy lane may take to send a decision back
LEASES = LeaseSettings()  # the defaults a server runs with: 10 s leases renewed every 3 s
FORWARD_TIMEOUT_MS = 2_000  # a forwarded call that was lost fails its sender after this
REDRIVABLE = frozenset({"FAILED", "ABORTED", "TIMED_OUT"})
# Retention in minutes instead of days, so that a run of minutes compacts histories (redrivable ones too, and
# redriven ones again) and redrives executions from their objects; the redrive window ends before retention, as on
# a server. A run ends with time moved past retention (``_age``): every execution is then deleted.
RETENTION = RetentionSettings(retention_ms=30 * 60_000, compact_after_ms=30_000)
REDRIVABLE_MS = 20 * 60_000
SWEEP_MS = 10_000  # how often each node sweeps (a server: every second, and at once while catching up)
SWEEPS_PER_STEP_MAX = 8  # sweeps run back to back while a batch was full
# The "burst" fault: executions whose Waits all end in the same millisecond, with a client's call made just then (the
# fairness checker: the call must get its share of the first tick that fires them); a few per run, more than a tick
# takes.
BURST_EXECUTIONS = 80
BURSTS_MAX = 2
BURST_WAIT_S = 30
BURST_DEFINITION = {"StartAt": "W", "States": {"W": {"Type": "Wait", "TimestampPath": "$.at", "End": True}}}
# Odd seeds hold the account to a StateTransition budget (engine/transitions.py) this small, per node: its loops
# and fan-outs then wait on continuation timers in every run, and every checker runs over them.
TRANSITION_BUDGET = (12.0, 25.0)  # bucket, refill per second
SETTLE_MS = 4 * LEASES.lease_ms  # after the liveness phase: time for the membership to settle before it is checked


@dataclass(frozen=True, slots=True)
class SimConfig:
    seed: int
    faults: frozenset[str] = frozenset(ALL_FAULTS)
    steps: int = STEPS_DEFAULT
    nodes: int = 1
    fault_rate: float = FAULT_RATE_DEFAULT
    planted: frozenset[str] = frozenset()  # test-only bugs in the engine (sim/planted.py)
    limits: str = "small"  # "small" (SIM_LIMITS: paging, full windows and re-reads in every run) or "default"


@dataclass
class SimResult:
    config: SimConfig
    injected: dict[str, int]
    violations: list[str]
    executions: int
    closed: int
    virtual_ms: int
    attempts: int = 0  # activity attempts handed to simulated workers
    tokens: int = 0  # task tokens answered from children's inputs
    redrives: int = 0  # redrives the engine answered with a new redrive
    compacted: int = 0  # histories the retention sweep compacted (of every execution, children included)
    expired: int = 0  # acknowledged executions it deleted at the end of their retention
    compacted_redrives: int = 0  # redrives (of those above) of executions whose history was compacted
    laned: int = 0  # steps decided in the heavy lane
    map_runs: int = 0  # distributed Maps' map runs checked at the end
    callers_first: int = 0  # ticks of the API's commands alone, behind a full tick
    late_calls: int = 0  # the API's commands that joined a tick while it applied

    def line(self) -> str:
        faults = sum(self.injected.values())
        verdict = "ok" if not self.violations else f"{len(self.violations)} VIOLATIONS"
        return (f"seed {self.config.seed}: {self.executions} executions ({self.closed} closed, {self.expired} of "
                f"them expired), {self.attempts} attempts, {self.tokens} tokens, {self.redrives} redrives "
                f"({self.compacted_redrives} from compacted histories), {self.compacted} histories compacted, "
                f"{self.laned} laned, {self.map_runs} map runs, {self.callers_first} callers-first ticks, "
                f"{self.late_calls} late calls, {faults} faults injected, "
                f"{self.virtual_ms // 1000} s virtual: {verdict}")


def replay_command(config: SimConfig) -> str:
    parts = [f"statewright simulate --seed {config.seed} --steps {config.steps}",
             f"--faults {','.join(sorted(config.faults)) or 'none'}"]
    if config.fault_rate != FAULT_RATE_DEFAULT:
        parts.append(f"--fault-rate {config.fault_rate}")
    if config.limits != "small":
        parts.append(f"--limits {config.limits}")
    if config.nodes != 1:
        parts.append(f"--nodes {config.nodes}")
    if config.planted:
        parts.append(f"--plant {','.join(sorted(config.planted))}")
    return " ".join(parts)
