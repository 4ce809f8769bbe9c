"""Each account's StateTransition budget: a token bucket of state transitions, on the engine's clock.

AWS throttles an account's state transitions (5,000 a second, with a bucket of 5,000, in its larger regions) and a
throttled execution is delayed, never failed. Here a step of an account whose bucket holds less than a step's
share of states (``Services.apply_states_max``) gets as many as the bucket holds, and at least the one state every
step enters; a flow past that stops on its continuation timer as it would at its share, due once the bucket has
refilled (``Services.continue_after_ms``). So an account over its budget waits as timer rows in its shards: nothing
is held in memory, and a crash loses nothing. The states a staged decision entered are then taken from the bucket
(it may go below zero: the debt is paid before the account's next continuation runs).

Express executions are not counted (AWS: unlimited). A step sent to the heavy lane carries its budget with it
(``budget_for``, ``within``). Per node: on a cluster each node's engine has its share of
the account's rate (node.py). Pure but for its buckets: the time is a parameter.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from ..decider import Decision, Services

Rate = tuple[float, float]  # (bucket size, refill per second)
Budget = tuple[int, int]  # a shortened step: (states it may enter, its continuation's wait in ms)
BUCKETS_MAX = 100_000  # (region, account) pairs kept; a forgotten bucket comes back full
_ENTERED = "StateEntered"


class TransitionBudgets:
    def __init__(self, rate: Callable[[str, str], Rate | None] | None = None) -> None:
        """``rate(region, account)``: that account's bucket and refill per second, None for no budget."""
        self._rate = rate
        self._buckets: dict[tuple[str, str], tuple[float, int]] = {}  # (tokens, as of ms)

    def budget_for(self, arn: str, services: Services, now_ms: int) -> Budget | None:
        """What a step of ``arn``'s account decided elsewhere (the heavy lane) must keep to: None, its whole share."""
        budgeted = self.services_for(arn, services, now_ms)
        return None if budgeted is services else (budgeted.apply_states_max, budgeted.continue_after_ms)

    def services_for(self, arn: str, services: Services, now_ms: int) -> Services:
        """``services`` as a step of ``arn``'s account may use them now."""
        if self._rate is None:
            return services
        found = self._tokens(arn, now_ms)
        if found is None:
            return services
        tokens, (_, refill) = found
        share = services.apply_states_max
        if tokens >= share:
            return services
        allowed = max(1, math.floor(tokens))
        # After this step the bucket holds tokens - allowed at most; the next one waits until it holds one again
        wait_ms = math.ceil((1 + allowed - tokens) / refill * 1000) if refill > 0 else 60_000
        return replace(services, apply_states_max=allowed, continue_after_ms=max(wait_ms, 1))

    def spent(self, arn: str, decision: Decision, now_ms: int) -> None:
        """Take the states ``decision`` entered from its account's bucket."""
        found = None if self._rate is None else self._tokens(arn, now_ms)
        if found is None:
            return
        entered = sum(1 for event in decision.effects.events if event["type"].endswith(_ENTERED))
        if entered:
            self._buckets[_scope(arn)] = (found[0] - entered, now_ms)

    def _tokens(self, arn: str, now_ms: int) -> tuple[float, Rate] | None:
        scope = _scope(arn)
        rate = self._rate(*scope)
        if rate is None:
            return None
        size, refill = rate
        held = self._buckets.get(scope)
        if held is None:
            if len(self._buckets) >= BUCKETS_MAX:
                del self._buckets[next(iter(self._buckets))]  # the one kept longest: it comes back full
            tokens, as_of = size, now_ms
        else:
            as_of = max(held[1], now_ms)  # a clock that stepped back credits nothing twice
            tokens = min(size, held[0] + (as_of - held[1]) * refill / 1000)
        self._buckets[scope] = (tokens, as_of)
        return tokens, rate


def within(services: Services, budget: Budget | None) -> Services:
    """``services`` for a step decided under ``budget`` (``TransitionBudgets.budget_for``)."""
    return services if budget is None else replace(services, apply_states_max=budget[0],
                                                   continue_after_ms=budget[1])


def _scope(arn: str) -> tuple[str, str]:
    parts = arn.split(":", 5)
    return parts[3], parts[4]
