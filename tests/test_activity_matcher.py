"""ActivityMatcher on an event loop: the in-memory backlog is bounded, says when it has room, and keeps a task
that a full engine inbox refused to start."""

from __future__ import annotations

import asyncio

from statewright.engine.commands import EngineUnavailable
from statewright.engine.limits import Limits
from statewright.integrations.activities import ActivityMatcher
from statewright.store.base import Dispatch

A = "arn:aws:states:us-east-1:123456789012:activity:a"
B = "arn:aws:states:us-east-1:123456789012:activity:b"


def dispatch(activity: str, n: int) -> Dispatch:
    return Dispatch(0, f"arn:aws:states:us-east-1:123456789012:execution:m:{n}", str(n),
                    {"kind": "activity", "resource": activity, "scheduled_id": n, "attempt": 1, "input": {}})


class Starts:
    """The engine's answer to StartAttempt: accepted, unless told to raise."""

    def __init__(self) -> None:
        self.failures: list[BaseException] = []
        self.started: list[str] = []

    async def __call__(self, task: Dispatch, worker_name: str | None) -> bool:
        if self.failures:
            raise self.failures.pop(0)
        self.started.append(task.execution_arn)
        return True


def matcher(tasks_max: int) -> tuple[ActivityMatcher, Starts, list[int]]:
    starts = Starts()
    found = ActivityMatcher(starts, Limits(activity_backlog_tasks_max=tasks_max))
    rooms: list[int] = []
    found.on_room = lambda: rooms.append(found.backlog_size())
    return found, starts, rooms


def test_the_backlog_refuses_at_its_limit_over_all_activities():
    found, _, rooms = matcher(2)
    assert [found.offer(dispatch(A, 1)), found.offer(dispatch(B, 2)), found.offer(dispatch(A, 3))] == [
        True, True, False]
    assert found.backlog_size() == 2
    assert rooms == []


def test_a_waiting_poller_takes_a_task_even_when_the_backlog_is_full():
    found, _, _ = matcher(1)

    async def scenario() -> Dispatch | None:
        assert found.offer(dispatch(A, 1))
        poll = asyncio.ensure_future(found.poll(B, "w", 30))
        await asyncio.sleep(0)  # the poll is now waiting for B
        assert found.offer(dispatch(B, 2))  # sync match: the backlog does not grow
        return await poll

    assert asyncio.run(scenario()).payload["scheduled_id"] == 2
    assert found.backlog_size() == 1


def test_on_room_is_called_once_when_a_refused_backlog_drains_to_half_its_limit():
    found, _, rooms = matcher(2)

    async def scenario() -> None:
        for n in range(3):
            found.offer(dispatch(A, n))
        await found.poll(A, "w", 0)
        await found.poll(A, "w", 0)

    asyncio.run(scenario())
    assert rooms == [1]  # once, at half the limit; not again while none was refused


def test_no_on_room_without_a_refusal():
    found, _, rooms = matcher(2)

    async def scenario() -> None:
        found.offer(dispatch(A, 1))
        await found.poll(A, "w", 0)

    asyncio.run(scenario())
    assert rooms == []


def test_a_start_that_did_not_commit_drops_that_copy_and_the_poll_goes_on():
    found, starts, _ = matcher(10)
    starts.failures.append(EngineUnavailable("the commit did not complete"))

    async def scenario() -> Dispatch | None:
        found.offer(dispatch(A, 1))
        found.offer(dispatch(A, 2))
        return await found.poll(A, "w", 0)  # the engine offers task 1 again once it has re-read the shard

    assert asyncio.run(scenario()).payload["scheduled_id"] == 2
    assert found.backlog_size() == 0


def test_a_task_offered_again_is_not_queued_twice():
    found, _, _ = matcher(10)
    assert found.offer(dispatch(A, 1)) and found.offer(dispatch(A, 1))
    assert found.backlog_size() == 1


def test_discarded_tasks_leave_the_backlog_and_make_room():
    found, _, rooms = matcher(2)

    async def scenario() -> Dispatch | None:
        for n in range(3):
            found.offer(dispatch(A, n))
        found.discard([(dispatch(A, 0).execution_arn, "0"), (dispatch(A, 9).execution_arn, "9")])
        return await found.poll(A, "w", 0)

    assert asyncio.run(scenario()).payload["scheduled_id"] == 1  # the started one is not handed out again
    assert rooms == [1] and found.backlog_size() == 0


def test_a_poll_claims_from_the_store_when_nothing_is_here_and_a_notice_wakes_a_waiting_one():
    claimable: list[Dispatch] = [dispatch(A, 1)]
    claims: list[str] = []

    async def claim(activity_arn: str) -> Dispatch | None:
        claims.append(activity_arn)
        return claimable.pop() if claimable else None

    found = ActivityMatcher(Starts(), Limits(), claim)

    async def scenario() -> list[Dispatch | None]:
        first = await found.poll(A, "w", 30)
        waiting = asyncio.ensure_future(found.poll(A, "w", 30))
        await asyncio.sleep(0)
        claimable.append(dispatch(A, 2))
        found.notice(A)
        return [first, await waiting]

    assert [task.payload["scheduled_id"] for task in asyncio.run(scenario())] == [1, 2]
    assert claims == [A, A, A]  # first poll; second poll finds nothing, then looks again when told


def test_after_an_empty_claim_polls_wait_for_word_instead_of_asking_the_store_again():
    claims: list[str] = []

    async def claim(activity_arn: str) -> Dispatch | None:
        claims.append(activity_arn)
        return None

    found = ActivityMatcher(Starts(), Limits(), claim)

    async def scenario() -> list[Dispatch | None]:
        empty = [await found.poll(A, "w", 0.01) for _ in range(3)]
        assert claims == [A]  # the first poll found the store empty; the next two waited
        found.notice(A)
        empty.append(await found.poll(A, "w", 0.01))
        assert claims == [A, A]
        found.look_again()
        empty.append(await found.poll(A, "w", 0.01))
        return empty

    assert asyncio.run(scenario()) == [None] * 5
    assert claims == [A, A, A]


def test_a_poll_claims_while_another_claim_is_in_flight():
    """Only an empty claim has the polls after it wait: one still running says nothing about the store."""
    claims: list[str] = []
    release = asyncio.Event()

    async def claim(activity_arn: str) -> Dispatch | None:
        claims.append(activity_arn)
        number = len(claims)
        await release.wait()
        return dispatch(A, number)

    found = ActivityMatcher(Starts(), Limits(), claim)

    async def scenario() -> list[Dispatch | None]:
        first = asyncio.ensure_future(found.poll(A, "w", 30))
        second = asyncio.ensure_future(found.poll(A, "w", 30))
        await asyncio.sleep(0)
        assert claims == [A, A]
        release.set()
        return [await first, await second]

    assert sorted(task.payload["scheduled_id"] for task in asyncio.run(scenario())) == [1, 2]
