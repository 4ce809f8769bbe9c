"""The fuzz of ``tests/fuzz.py`` on a fixed seed against a real server process of its own: every operation of the
service model, no 5xx, every error in AWS's shape, and no resource or tag that only refused requests wrote.
``./dev fuzz`` runs the same generator much longer."""

from __future__ import annotations

import pytest

import fuzz
from server import ServerProcess

pytestmark = pytest.mark.slow  # a real server process: not in the fast tier

SEED = 14
REQUESTS = 4_000


def test_fuzzed_requests_get_no_5xx_and_leave_no_partial_write(tmp_path):
    server = ServerProcess(tmp_path / "data").start()
    try:
        report = fuzz.run(server.port, REQUESTS, SEED)
    finally:
        server.stop()
    assert report.failures == []
    assert {operation for operation, _ in report.counts} == set(fuzz.Fuzzer(SEED).operations)
    assert report.by_status()[200] > 0  # some requests were valid enough to reach the handlers' success paths


def test_one_seed_gives_the_same_requests():
    first, second = fuzz.Fuzzer(SEED), fuzz.Fuzzer(SEED)
    assert [first.request() for _ in range(200)] == [second.request() for _ in range(200)]


def test_every_request_that_once_broke_a_rule_is_answered_within_the_rules(tmp_path):
    kept = fuzz.regressions()
    assert kept, "tests/fuzz_regressions.jsonl holds the cases kept so far"
    server = ServerProcess(tmp_path / "data").start()
    try:
        report = fuzz.run(server.port, 0, SEED, replay=kept)
    finally:
        server.stop()
    assert report.failures == []
    assert sum(report.counts.values()) == len(kept)


def test_keep_adds_only_new_cases(tmp_path, monkeypatch):
    monkeypatch.setattr(fuzz, "REGRESSIONS", tmp_path / "kept.jsonl")
    cases = [fuzz.Fuzzer(SEED).request() for _ in range(3)]
    assert fuzz.keep(cases) == 3 and fuzz.keep(cases[:2]) == 0
    assert [(case.target, case.body) for case in fuzz.regressions()] == [(case.target, case.body) for case in cases]
