"""The deterministic simulator: fixed seeds run clean with every fault on, a seed replays exactly, for each fault a bug
planted in the engine (behind its test-only switch) is caught, and the printed replay command reproduces a catch."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterable

import pytest

from statewright.cli import main
from statewright.sim.config import SimConfig, replay_command
from statewright.sim.faults import ALL_FAULTS, CLUSTER_FAULTS, ENGINE_FAULTS, SINGLE_NODE_FAULTS
from statewright.sim.simulator import simulate

pytestmark = pytest.mark.slow  # long simulations: not in the fast tier

CI_SEEDS = range(12, 18)  # seeds whose runs reach every behaviour asserted below (compacted redrives among them)
CLUSTER_SEEDS = (3, 4, 6, 8)  # 6 runs distributed Maps across the nodes
STEPS = 200
NODES = 3
# Each fault, and a bug it exposes: the checker that must catch it is named in the comment.
PLANTED_FOR = {
    "commit-fails": "no-reread",  # liveness: timers popped for a failed commit never fire
    "outcome-unknown": "no-reread",  # liveness: dispatches of a commit that did land are never offered
    "version-conflict": "no-reread",  # liveness
    "busy": "no-reread",  # liveness: a timer whose execution could not be read is dropped
    "crash": "no-outbox-read-at-start",  # liveness: what was dispatched before the crash is never offered
    "restart": "skip-timers-at-start",  # liveness: a timer due while the process was down never fires
    "duplicate-result": "start-attempt-twice",  # an attempt handed out twice
    "late-result": "results-for-any-attempt",  # an attempt answered twice
    "reordered-results": "results-for-any-attempt",  # an attempt answered twice
    "clock-jump": "refill-skips-overdue",  # liveness: timers due during the jump are skipped
    "lane-dies": "lane-drops-failures",  # liveness: a continuation the lane lost never runs
    "worker-dies": "lose-timeouts",  # liveness: a dead worker's attempt never times out
    "burst": "timers-first",  # fairness: a client's call waits while a burst of timers takes whole ticks
    "call-mid-tick": "late-calls-answered-early",  # a call that joins a tick late is answered before its commit
    # several nodes
    "lease-stolen": "act-on-fenced-writes",  # a reply ahead of its commit: the fenced write never landed
    "node-paused": "commit-without-fencing",  # two nodes commit for one shard at one range id
    "node-leaves": "skip-timers-at-start",  # liveness: a Wait on a shard that moved never fires
    "forward-lost": "forward-once",  # liveness: a child never started, a parent never told
    "forward-duplicated": "results-for-any-attempt",  # an attempt answered twice
}


@pytest.fixture(scope="module")
def ci_runs():
    return [simulate(SimConfig(seed, frozenset(SINGLE_NODE_FAULTS), STEPS)) for seed in CI_SEEDS]


@pytest.fixture(scope="module")
def cluster_runs():
    return [simulate(SimConfig(seed, frozenset(ALL_FAULTS), STEPS, NODES)) for seed in CLUSTER_SEEDS]


def test_fixed_seeds_with_every_fault_keep_every_invariant(ci_runs):
    for result in ci_runs:
        assert result.violations == [], replay_command(result.config)
        assert result.executions > 50 and result.closed == result.executions


def test_the_fixed_seeds_reach_workers_approvers_and_every_fault(ci_runs):
    assert all(result.attempts > 20 for result in ci_runs)
    assert sum(result.tokens for result in ci_runs) > 10
    injected = {name for result in ci_runs for name, count in result.injected.items() if count}
    assert injected == set(SINGLE_NODE_FAULTS)


def test_three_nodes_with_every_fault_keep_every_invariant_and_end_with_one_owner_per_shard(cluster_runs):
    for result in cluster_runs:
        assert result.violations == [], replay_command(result.config)
        assert result.executions > 5 and result.closed == result.executions
    injected = {name for result in cluster_runs for name, count in result.injected.items() if count}
    assert injected >= set(ALL_FAULTS) - set(ENGINE_FAULTS)  # the single-node seeds surely reach those


def caught_in(seeds: Iterable[int], config: Callable[[int], SimConfig], says: str = "") -> bool:
    """Whether a run of one of ``seeds`` reports a violation that says ``says`` (the seeds run in turn, until one
    does)."""
    return any(any(says in violation for violation in simulate(config(seed)).violations) for seed in seeds)


def test_an_engine_that_runs_flows_unbounded_is_caught():
    # Seeds whose workloads run a long stretch of pure states in one step (odd seeds run under a transition
    # budget, which shortens steps too: it hides the bug on some of them)
    assert caught_in((16, 19, 22), lambda seed: SimConfig(seed, frozenset(), 60, planted=frozenset({"run-unbounded"})),
                     "more than 3")


def test_an_engine_that_never_stops_abandoned_jobs_is_caught():
    assert caught_in(range(6), lambda seed: SimConfig(seed, frozenset(), 150, planted=frozenset({"drop-job-stops"})),
                     "was abandoned and never stopped")


def test_a_map_run_that_ignores_max_concurrency_is_caught():
    assert caught_in(range(5, 7),  # seeds whose workloads run distributed Maps with a MaxConcurrency
                     lambda seed: SimConfig(seed, frozenset(), STEPS, planted=frozenset({"map-run-unbounded"})),
                     "children ran at once")


def test_a_map_run_that_counts_a_close_told_before_its_redrive_is_caught():
    # A stopped child's close, told again after its run was redriven, counted as the redriven child's: the run
    # fails though that child succeeds (seed 6 with these faults; without the bug it passes)
    faults = frozenset({"busy", "call-mid-tick", "commit-fails", "crash", "restart"})
    config = SimConfig(6, faults, 400, fault_rate=0.2, planted=frozenset({"map-run-counts-any-round"}))
    assert any("its children: {'SUCCEEDED': 1, 'ABORTED': 0}" in violation
               for violation in simulate(config).violations)
    assert simulate(dataclasses.replace(config, planted=frozenset())).violations == []


def test_queues_that_serve_the_account_that_came_first_are_caught():
    # A burst of another account's starts, and a call of the workload's account just then, waiting behind it
    config = SimConfig(0, frozenset({"burst"}), 40, fault_rate=0.3, planted=frozenset({"accounts-in-order"}))
    assert any("account 123456789012's API calls on executions waited through a tick" in violation
               for violation in simulate(config).violations)
    assert simulate(dataclasses.replace(config, planted=frozenset())).violations == []


def test_the_fixed_seeds_redrive_executions(ci_runs):
    assert sum(result.redrives for result in ci_runs) > 5


def test_a_redrive_that_reruns_what_had_succeeded_is_caught():
    assert caught_in(range(4, 8),  # seeds whose workloads redrive often enough
                     lambda seed: SimConfig(seed, frozenset(), STEPS, planted=frozenset({"redrive-from-start"})),
                     "which had succeeded")


def test_the_fixed_seeds_compact_histories_redrive_from_them_expire_every_execution_and_run_map_runs(
        ci_runs, cluster_runs):
    assert all(result.compacted > 0 and result.expired == result.executions for result in ci_runs + cluster_runs)
    assert sum(result.compacted_redrives for result in ci_runs) > 0
    assert sum(result.map_runs for result in ci_runs) > 0 and sum(result.map_runs for result in cluster_runs) > 0


def test_a_sweep_that_deletes_executions_before_their_retention_ended_is_caught():
    result = simulate(SimConfig(0, frozenset(), 60, planted=frozenset({"expire-early"})))
    assert any("before its retention" in violation for violation in result.violations)


def test_a_compaction_that_drops_what_an_earlier_object_held_is_caught():
    """A redriven execution compacted again from its rows alone loses the events its first object held. Clock
    jumps leave time for histories to be compacted before they are redriven."""
    assert caught_in(range(3), lambda seed: SimConfig(seed, frozenset({"clock-jump"}), STEPS, fault_rate=0.5,
                                                      planted=frozenset({"compact-rows-only"})),
                     "(compacted): reads back")


def test_status_events_sent_ahead_of_their_commit_are_caught():
    """A commit that fails (or is refused for a version conflict) must not have told anyone its status."""
    faults = frozenset({"commit-fails", "version-conflict"})
    assert caught_in(range(4), lambda seed: SimConfig(seed, faults, STEPS, fault_rate=0.2,
                                                      planted=frozenset({"status-before-commit"})),
                     "event was sent for a change its history does not hold")


def test_a_lane_decision_committed_over_a_newer_state_is_caught():
    """The heavy lane decides on the state as it was sent; committing that after the execution moved on (a stop,
    a result, another timer) would undo what landed meanwhile."""
    assert caught_in(range(4, 8), lambda seed: SimConfig(seed, frozenset(SINGLE_NODE_FAULTS), STEPS,
                                                         planted=frozenset({"lane-ignores-version"})))


def test_a_seed_replays_exactly():
    config = SimConfig(3, frozenset(ALL_FAULTS), 120)
    first, second = simulate(config), simulate(config)
    assert (first.line(), first.injected, first.violations) == (second.line(), second.injected, second.violations)


# Faults no planted bug is known to expose yet, and why.
UNPLANTED = {
    # A node cut off from the store cannot commit, and its shards move once its lease runs out; the engine's own
    # stop before the lease ends guards nothing the range id does not (no API answer comes from the engine's memory
    # without a commit), so a bug there changes no outcome. Fencing and liveness still run under it.
    "store-cut-off",
}


def test_every_fault_has_a_planted_bug():
    assert set(PLANTED_FOR) | UNPLANTED == set(ALL_FAULTS)


@pytest.mark.parametrize("fault", sorted(PLANTED_FOR))
def test_a_planted_bug_is_caught(fault):
    assert caught_by(fault).violations


def test_the_replay_command_of_a_caught_seed_reproduces_it():
    """Once for one fault: the command is the same for every fault, and a seed replays exactly whatever it runs
    (test_a_seed_replays_exactly, in another process too)."""
    caught = caught_by("lease-stolen")  # the quickest to catch (a tenth of a second), on three nodes
    printed = run_cli(replay_command(caught.config))
    assert printed[0] == caught.line()
    assert f"  replay: {replay_command(caught.config)}" in printed
    assert printed[-1].endswith(f"{len(caught.violations)} violations")


# The first seed that catches each planted bug, tried first (the others only when a change moved it): a scan from
# seed 0 spent up to 15 s on seeds that could not catch it.
CAUGHT_AT = {"busy": 3, "commit-fails": 3, "forward-lost": 4, "lane-dies": 3, "node-paused": 1,
             "version-conflict": 1}


def caught_by(fault: str):
    """A seed whose run with ``fault`` and the bug planted for it reports a violation."""
    planted = frozenset({PLANTED_FOR[fault]})
    nodes = NODES if fault in CLUSTER_FAULTS else 1
    first = CAUGHT_AT.get(fault, 0)
    for seed in (first, *(seed for seed in range(12) if seed != first)):
        result = simulate(SimConfig(seed, frozenset({fault}), STEPS, nodes, fault_rate=0.2, planted=planted))
        if result.violations:
            return result
    raise AssertionError(f"no seed caught {planted} under {fault}")


def test_without_the_planted_bug_the_same_seeds_pass():
    for fault, bug in sorted(PLANTED_FOR.items())[:3]:
        result = simulate(SimConfig(0, frozenset({fault}), STEPS, fault_rate=0.1))
        assert result.violations == [], (fault, bug)


def run_cli(command: str) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(shlex.split(command)[1:])
    return out.getvalue().splitlines()


def test_replies_ahead_of_their_commit_are_caught():
    result = simulate(SimConfig(0, frozenset({"commit-fails"}), STEPS, fault_rate=0.2,
                                planted=frozenset({"reply-before-commit"})))
    assert any("before its commit was visible" in violation or "not in the store" in violation
               for violation in result.violations)


def test_timers_applied_before_they_are_due_are_caught():
    # A few steps suffice (and keep it short: early heartbeat timers re-arm and fire early again and again).
    result = simulate(SimConfig(0, frozenset(), 12, planted=frozenset({"timers-fire-early"})))
    assert any("applied at" in violation for violation in result.violations)


def test_a_seed_replays_exactly_in_another_process():
    """The replay command is the whole story: string hashing differs between processes, and nothing the run
    does may depend on it (a set's order once decided which executions the prefetch kept)."""
    command = [sys.executable, "-m", "statewright", "simulate", "--seed", "4", "--steps", "120", "--nodes", "2"]
    runs = [subprocess.run(command, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONHASHSEED": str(hash_seed)}) for hash_seed in (1, 2)]
    assert runs[0].returncode == 0, runs[0].stderr
    assert runs[0].stdout == runs[1].stdout
