"""The garbage collector's full passes, run when the engine has nothing to do (statewright/collector.py)."""

from __future__ import annotations

import gc
import json
import threading
import time

from statewright.collector import NEVER, Collector
from statewright.engine.commands import StartExecution
from statewright.engine.engine import Engine
from statewright.store.base import StateMachineRecord
from statewright.store.sqlite import SqliteStore


class Heap:
    """A clock, a heap size and a collector to hand ``Collector``, each set by the test."""

    def __init__(self) -> None:
        self.now_s = 100.0
        self.blocks = 1_000
        self.passes: list[float] = []

    def collect(self) -> None:
        self.passes.append(self.now_s)

    def collector(self, **settings) -> Collector:
        return Collector(clock=lambda: self.now_s, blocks=lambda: self.blocks, collect=self.collect, **settings)


def test_a_pass_owed_by_growth_waits_while_the_engine_ticks_and_runs_once_it_is_quiet():
    heap = Heap()
    collector = heap.collector(growth=0.25, defer_s=10.0)
    heap.blocks = 1_300
    heap.now_s += 1.0
    collector.busy()  # owed from now, but the engine has work
    heap.now_s += 5.0
    collector.busy()
    assert heap.passes == []
    assert collector.quiet()
    assert heap.passes == [106.0]
    assert not collector.quiet()  # paid: the heap it left is the new base
    heap.blocks = 1_500
    heap.now_s += 1.0
    assert not collector.quiet()  # 1,500 is not 25 % above 1,300


def test_a_pass_owed_longer_than_its_deferral_runs_between_ticks():
    heap = Heap()
    collector = heap.collector(growth=0.25, defer_s=10.0)
    heap.blocks = 2_000
    heap.now_s += 1.0
    collector.busy()
    heap.now_s += 9.9
    collector.busy()
    assert heap.passes == []
    heap.now_s += 0.1
    collector.busy()
    assert heap.passes == [111.0]


def test_the_heap_is_read_at_most_once_a_second():
    heap = Heap()
    collector = heap.collector(growth=0.25)
    heap.blocks = 5_000
    heap.now_s += 0.5
    assert not collector.quiet()  # not read yet
    heap.now_s += 0.5
    assert collector.quiet()


def test_without_growth_a_pass_is_owed_every_so_often_and_its_time_is_told():
    heap = Heap()
    took: list[float] = []
    collector = heap.collector(every_s=60.0, observed=took.append)
    heap.now_s += 59.0
    assert not collector.quiet()
    heap.now_s += 1.0
    assert collector.quiet()
    assert heap.passes == [160.0] and took == [0.0]  # the test's clock stood still during it


def test_install_turns_the_automatic_full_passes_off_and_uninstall_back_on():
    before = gc.get_threshold()
    collector = Collector()
    collector.install()
    try:
        assert gc.get_threshold() == (before[0], before[1], NEVER)
    finally:
        collector.uninstall()
    assert gc.get_threshold() == before


MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:short"


def test_the_engine_runs_an_owed_pass_when_its_inbox_is_empty(tmp_path):
    store = SqliteStore(tmp_path / "db.sqlite", shard_count=2)
    store.create_state_machine(StateMachineRecord(MACHINE, "short", "STANDARD", json.dumps(
        {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}), "role", "r1", 0, 0, {}, {}))
    ran = threading.Event()
    collector = Collector(every_s=0.05, collect=ran.set)  # owed every 50 ms
    engine = Engine(store)
    engine.start(collector=collector)
    try:
        arn = "arn:aws:states:us-east-1:123456789012:execution:short:one"
        engine.submit(StartExecution(arn, MACHINE, "one", "r1", "role", "{}")).result(timeout=10)
        assert ran.wait(timeout=10)
        # The pass is counted on the engine thread just after it collected: wait (bounded) for that count too
        deadline = time.monotonic() + 10
        while collector.passes < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert collector.passes >= 1
        # and the engine still serves after its passes
        other = "arn:aws:states:us-east-1:123456789012:execution:short:two"
        engine.submit(StartExecution(other, MACHINE, "two", "r1", "role", "{}")).result(timeout=10)
    finally:
        engine.stop()
        store.close()
