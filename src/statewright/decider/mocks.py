"""Mocked service integrations in Step Functions Local's mock configuration format (``serve --mock-config FILE``).

The file names test cases per state machine and, per test case, the mocked response each Task state answers with::

    {"StateMachines": {"<state machine name>": {"TestCases": {"<case>": {"<Task state name>": "<response>"}}}},
     "MockedResponses": {"<response>": {"0": {"Return": <the task's result>},
                                        "1-2": {"Throw": {"Error": "...", "Cause": "..."}}}}}

An execution runs a test case when it is started on ``<state machine ARN>#<case>``. Its Task states named in the
case do not call their resource: attempt n (0 for the first, counted per state and per branch or iteration, as
Retry counts; each branch and Map iteration counts its own from 0) gets the response whose key covers n (a number
or an inclusive range; the keys cover every attempt from 0 on); past the last key, the last response answers
again. States the case does not name call their real resource; a name that is no Task state of the machine is
refused when the execution starts (api/executions.py). A mocked attempt is recorded as the real one would be:
scheduled, started, then (a .sync or .waitForTaskToken task first records the call it stands for as submitted,
decider/tasks.py ``submit_mocked``) succeeded with ``Return`` as its result or failed with ``Throw``.

Pure data: ``MockConfig.parse`` checks a parsed file and says where it is wrong; the decider asks ``response``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

_RANGE = re.compile(r"(\d{1,9})(?:-(\d{1,9}))?", re.ASCII)


class InvalidMockConfig(ValueError):
    """The mock configuration cannot be used; the message names the place."""


@dataclass(frozen=True, slots=True)
class MockConfig:
    cases: dict[str, dict[str, dict[str, str]]]  # state machine name -> test case -> Task state -> response
    responses: dict[str, tuple[tuple[int, int, dict[str, Any]], ...]]  # name -> (first, last, outcome), ordered

    @classmethod
    def parse(cls, raw: Any) -> MockConfig:
        """Check a parsed mock configuration file; InvalidMockConfig names what is wrong and where."""
        _object(raw, "the mock configuration")
        unknown = set(raw) - {"StateMachines", "MockedResponses"}
        if unknown:
            raise InvalidMockConfig(f"the mock configuration has unknown fields {sorted(unknown)}; it takes "
                                    "StateMachines and MockedResponses")
        responses = {name: _attempts(name, attempts)
                     for name, attempts in _object(raw.get("MockedResponses", {}), "MockedResponses").items()}
        cases: dict[str, dict[str, dict[str, str]]] = {}
        for machine, entry in _object(raw.get("StateMachines", {}), "StateMachines").items():
            where = f"StateMachines.{machine}"
            test_cases = _object(_object(entry, where).get("TestCases"), f"{where}.TestCases")
            cases[machine] = {}
            for case, states in test_cases.items():
                named = _object(states, f"{where}.TestCases.{case}")
                for state, response in named.items():
                    if response not in responses:
                        raise InvalidMockConfig(f"{where}.TestCases.{case}.{state} names the response "
                                                f"{response!r}, which MockedResponses does not define")
                cases[machine][case] = dict(named)
        return cls(cases, responses)

    def has_case(self, machine: str, case: str) -> bool:
        return case in self.cases.get(machine, {})

    def response(self, machine: str, case: str, state: str, attempt: int) -> dict[str, Any] | None:
        """The mocked outcome of attempt ``attempt`` (0-based) of ``state`` in a test case: ``{"Return": value}``
        or ``{"Throw": {"Error", "Cause"}}``; None when the case leaves the state to its real resource."""
        name = self.cases.get(machine, {}).get(case, {}).get(state)
        if name is None:
            return None
        attempts = self.responses[name]
        for first, last, outcome in attempts:
            if first <= attempt <= last:
                return outcome
        return attempts[-1][2]


def _object(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise InvalidMockConfig(f"{where} must be a JSON object, not {type(value).__name__}")
    return value


def _attempts(name: str, attempts: Any) -> tuple[tuple[int, int, dict[str, Any]], ...]:
    where = f"MockedResponses.{name}"
    ranges = []
    for key, outcome in _object(attempts, where).items():
        match = _RANGE.fullmatch(key)
        if match is None:
            raise InvalidMockConfig(f"{where} has the key {key!r}; keys are attempt numbers from 0 (\"0\") or "
                                    f"ranges (\"1-2\")")
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if last < first:
            raise InvalidMockConfig(f"{where}.{key} is a range that ends before it starts")
        ranges.append((first, last, _outcome(outcome, f"{where}.{key}")))
    if not ranges:
        raise InvalidMockConfig(f"{where} defines no response")
    ranges.sort(key=lambda entry: entry[0])
    if ranges[0][0] != 0:
        raise InvalidMockConfig(f"{where} does not answer attempt 0, the first; its keys must cover every attempt "
                                "from 0 on")
    for (_, last, _), (first, _, _) in itertools.pairwise(ranges):
        if first <= last:
            raise InvalidMockConfig(f"{where} answers attempt {first} twice")
        if first > last + 1:
            raise InvalidMockConfig(f"{where} does not answer attempt {last + 1}; its keys must cover every attempt "
                                    "from 0 on")
    return tuple(ranges)


def _outcome(outcome: Any, where: str) -> dict[str, Any]:
    _object(outcome, where)
    if set(outcome) == {"Return"}:
        return {"Return": outcome["Return"]}
    if set(outcome) == {"Throw"}:
        thrown = _object(outcome["Throw"], f"{where}.Throw")
        error, cause = thrown.get("Error"), thrown.get("Cause")
        if not isinstance(error, str) or not isinstance(cause, str | None) or set(thrown) - {"Error", "Cause"}:
            raise InvalidMockConfig(f"{where}.Throw takes an Error string and an optional Cause string")
        return {"Throw": {"Error": error} if cause is None else {"Error": error, "Cause": cause}}
    raise InvalidMockConfig(f"{where} must hold exactly one of Return or Throw, not {sorted(outcome)}")
