"""How a tick divides its budget between the kinds of work waiting: in equal shares, what one leaves going to the rest.

Each source of work (the API's commands, the integrations' results, the heavy lane's continuations, engine-to-engine
transfers, each shard's due timers) is a *taker*: asked for at most ``n`` items, it appends what it has to the tick's
work and says how many it took. ``take_fairly`` gives every taker an equal share of the budget; a taker that takes
less than its share has nothing more this tick, and what it left is shared again among those that took all theirs
(max-min fairness, found without knowing how much each has waiting). So a burst of one kind (100,000 timers due in
the same second, 20,000 results from the integrations at once) takes at most its share of each tick while the
others wait, and a command of another kind waits a tick or two, not the whole burst.

How long a tick lasts bounds that wait too: ``TickBudget`` sizes the budget so that a full tick takes about
``Limits.tick_ms_target``, from the time per item of recent full ticks (the engine measures them; the simulator
does not, and keeps ``tick_commands_max``). Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

Taker = Callable[[int], int]  # takes at most n items of work; returns how many it took
G = TypeVar("G")  # a group of one account's items (a queue, a heap)


def account_of(arn: str) -> str:
    """The account an ARN names: each kind of work is served per account, in turn."""
    return arn.split(":", 5)[4]


class InTurn:
    """Groups of one kind of work, one per account (a queue, a heap), served in turn: the groups' shares equal
    (``take_fairly``), and the one asked first moving on each time they are divided, so that the odd items go round
    every account."""

    def __init__(self) -> None:
        self._turn = 0

    def take(self, groups: dict[str, G], taker: Callable[[G], Taker], n: int) -> int:
        """At most ``n`` items from ``groups``; ``taker(group)`` takes from one. A group left empty is dropped: an
        account with nothing waiting holds none. Returns how many were taken."""
        if not groups:
            return 0
        if len(groups) == 1:  # one account (always, with --auth open): no division
            taken = taker(next(iter(groups.values())))(n)
        else:
            ordered = list(groups.values())
            self._turn = (self._turn + 1) % len(ordered)
            taken = sum(take_fairly(n, [taker(group) for group in ordered[self._turn:] + ordered[:self._turn]]))
        for account in [account for account, group in groups.items() if not group]:
            del groups[account]
        return taken


def take_fairly(budget: int, takers: Sequence[Taker]) -> list[int]:
    """Ask ``takers`` for work within ``budget`` items in all, in equal shares (of the items that do not divide
    evenly, earlier takers get the first); returns how many each took."""
    taken = [0] * len(takers)
    wanting = list(range(len(takers)))
    left = budget
    while left > 0 and wanting:
        share, odd = divmod(left, len(wanting))
        still = []
        for position, index in enumerate(wanting):
            asked = share + (1 if position < odd else 0)
            if asked == 0:
                still.append(index)
                continue
            got = takers[index](asked)
            taken[index] += got
            left -= got
            if got == asked:  # it may have more
                still.append(index)
        # The odd items go first to those that have had the least: totals stay within one of each other. Each
        # round spends some of the budget or lets a taker go, so the loop ends.
        wanting = sorted(still, key=taken.__getitem__)
    return taken


class TickBudget:
    """How many items the next tick may take: ``low`` at first, then as many as full ticks show would last
    ``target_s``, never more than ``high`` (``target_s`` None: always ``high``, for runs that measure no time)."""

    def __init__(self, low: int, high: int, target_s: float | None) -> None:
        self.low, self.high, self.target_s = min(low, high), high, target_s
        # Grown as full ticks prove cheap, so that a burst's first tick is not one of ``high``.
        self.items = high if target_s is None else self.low

    def observe(self, items: int, seconds: float) -> None:
        """A tick took ``items`` and ``seconds``. A tick near its budget says what an item costs (a small one is
        mostly the commit's fixed cost), and so does one of at least half of ``low`` items that outlasted
        ``target_s`` (a kind of work bounded elsewhere, each item costly: W15 (e)'s transfers); the budget moves
        halfway to what would have lasted ``target_s``, so one slow tick (a heavy evaluation) does not collapse it."""
        if self.target_s is None or items == 0 or (
                items < self.items // 2 and (seconds <= self.target_s or items < self.low // 2)):
            return
        wanted = self.high if seconds <= 0 else round(self.target_s * items / seconds)
        self.items = max(self.low, min(self.high, (self.items + wanted + 1) // 2))
