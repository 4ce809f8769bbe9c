"""Activities and the claims of their tasks: the contract written at the top of statewright.store.catalogue
(activities) and statewright.store.base (activity tasks), one rule per test. Mixed into
``store_contract.StoreContract``; talks to the Store interface only."""

from __future__ import annotations

from statewright.store.base import ActivityRecord, Store
from store_contract_blocks import (
    ACCOUNT,
    ACTIVITY,
    OTHER_ACTIVITY,
    SHARDS,
    ContractBase,
    committed,
    execution_arn,
    own,
    page_through,
    task,
    write,
)


class ActivitiesContract(ContractBase):
    """Activities and the claims of their tasks."""

    def test_a_claim_takes_a_task_of_that_activity_from_any_shard_once_until_it_ends(self, store: Store) -> None:
        ranges = own(store, 0, 1)
        first, second = write(execution_arn("one")), write(execution_arn("two"), shard=1)
        first.effects.dispatches_added = [("3", task(ACTIVITY, 1)), ("4", {"kind": "http", "resource": ACTIVITY}),
                                  ("5", task(OTHER_ACTIVITY, 2))]
        second.effects.dispatches_added = [("3", task(ACTIVITY, 3))]
        committed(store, [first, second], ranges)
        claimed = [store.claim_activity_task(ACTIVITY, 1_000, 6_000) for _ in range(2)]
        assert sorted(claim.payload["n"] for claim in claimed) == [1, 3]
        assert {(claim.shard_id, claim.dispatch_id) for claim in claimed} == {(0, "3"), (1, "3")}
        assert store.claim_activity_task(ACTIVITY, 5_999, 9_000) is None  # both held; the HTTP row is no task
        assert store.claim_activity_task(ACTIVITY, 6_000, 9_000) is not None  # a claim that ended is free again
        assert store.claim_activity_task(OTHER_ACTIVITY, 1_000, 6_000).payload == task(OTHER_ACTIVITY, 2)

    def test_a_claim_skips_the_shards_asked_and_never_finds_a_removed_task(self, store: Store) -> None:
        ranges = own(store, 0, 1)
        first, second = write(execution_arn("one")), write(execution_arn("two"), shard=1)
        first.effects.dispatches_added = [("3", task(ACTIVITY, 1))]
        second.effects.dispatches_added = [("3", task(ACTIVITY, 2))]
        committed(store, [first, second], ranges)
        assert store.claim_activity_task(ACTIVITY, 1_000, 2_000, [0, 1]) is None
        assert store.claim_activity_task(ACTIVITY, 1_000, 2_000, [1]).execution_arn == execution_arn("one")
        started = write(execution_arn("two"), shard=1, expected=1)
        started.effects.dispatches_removed = ["3"]
        committed(store, [started], ranges)
        assert store.claim_activity_task(ACTIVITY, 9_000, 10_000, [0]) is None

    def test_a_claim_through_one_handle_holds_against_another(self, store: Store) -> None:
        ranges = own(store, 0)
        added = write(execution_arn("one"))
        added.effects.dispatches_added = [("3", task(ACTIVITY, 1)), ("7", task(ACTIVITY, 2))]
        committed(store, [added], ranges)
        other = self.reopen_store(SHARDS)
        try:
            mine, theirs = store.claim_activity_task(ACTIVITY, 1_000, 5_000), other.claim_activity_task(
                ACTIVITY, 1_000, 5_000)
            assert {mine.dispatch_id, theirs.dispatch_id} == {"3", "7"}
            assert other.claim_activity_task(ACTIVITY, 1_000, 5_000) is None
        finally:
            other.close()

    def test_activities_create_get_list_delete(self, store: Store) -> None:
        prefix = f"arn:aws:states:us-east-1:{ACCOUNT}:activity:"
        for name in ("beta", "alpha", "gamma"):
            record = ActivityRecord(prefix + name, name, 5)
            assert store.create_activity(record) == record
        assert store.create_activity(ActivityRecord(prefix + "alpha", "alpha", 99)).created_ms == 5
        elsewhere = f"arn:aws:states:eu-west-1:{ACCOUNT}:activity:"
        store.create_activity(ActivityRecord(elsewhere + "alpha", "alpha", 7))
        items = page_through(lambda limit, cursor: store.list_activities(prefix, limit, cursor), 2)
        assert [item.name for item in items] == ["alpha", "beta", "gamma"]
        store.delete_activity(prefix + "beta")
        assert store.get_activity(prefix + "beta") is None
        assert store.get_activity(prefix + "gamma") == ActivityRecord(prefix + "gamma", "gamma", 5)

    def test_an_activity_keeps_its_encryption_configuration(self, store: Store) -> None:
        key = {"type": "CUSTOMER_MANAGED_KMS_KEY", "kmsKeyId": "alias/mine", "kmsDataKeyReusePeriodSeconds": 60}
        store.create_activity(ActivityRecord(ACTIVITY, "charge", 1_000, key))
        store.create_activity(ActivityRecord(OTHER_ACTIVITY, "ship", 1_000))
        assert store.get_activity(ACTIVITY).encryption_configuration == key
        assert store.get_activity(OTHER_ACTIVITY).encryption_configuration is None
