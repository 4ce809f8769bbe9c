"""The catalogue: settings, state machines and revisions, versions and aliases, tags: the contract written at the top
of statewright.store.catalogue, one rule per test. Mixed into ``store_contract.StoreContract``; talks to the Store
interface only."""

from __future__ import annotations

import pytest

from statewright.store.base import (
    ActivityRecord,
    AliasRecord,
    NoSuchStateMachine,
    NoSuchVersions,
    QuotaExceeded,
    RevisionChanged,
    StateMachineRecord,
    Store,
    VersionRecord,
    VersionRouted,
)
from store_contract_blocks import (
    ACCOUNT,
    DEFINITION,
    MACHINE,
    OTHER_MACHINE,
    ROLE,
    US_EAST,
    ContractBase,
    machine_record,
    page_through,
)


class CatalogueContract(ContractBase):
    """The catalogue: settings, state machines and revisions, versions and aliases, tags."""

    def test_settings_keep_the_first_value_written_if_absent(self, store: Store) -> None:
        assert store.get_setting("k") is None
        assert store.put_setting_if_absent("k", "one") == "one"
        assert store.put_setting_if_absent("k", "two") == "one"
        store.put_setting("k", "three")
        assert store.get_setting("k") == "three"

    # -- state machines

    def test_create_then_get_returns_the_same_record(self, store: Store) -> None:
        record = machine_record("orders")
        assert store.create_state_machine(record) == record
        assert store.get_state_machine(record.arn) == record
        assert store.get_revision(record.arn, "rev-1") == (DEFINITION, ROLE)

    def test_get_of_an_unknown_machine_is_none(self, store: Store) -> None:
        assert store.get_state_machine(machine_record("nobody").arn) is None
        assert store.get_revision(machine_record("nobody").arn, "rev-1") is None

    def test_create_of_an_existing_arn_returns_the_existing_record_unchanged(self, store: Store) -> None:
        first = machine_record("orders")
        store.create_state_machine(first)
        second = machine_record("orders", revision="rev-2", definition='{"StartAt": "B"}', created_ms=5_000)
        assert store.create_state_machine(second) == first
        assert store.get_state_machine(first.arn) == first
        assert store.get_revision(first.arn, "rev-2") is None

    def test_update_writes_a_new_revision_and_keeps_the_old_one(self, store: Store) -> None:
        old = machine_record("orders")
        store.create_state_machine(old)
        new = machine_record("orders", revision="rev-2", definition='{"StartAt": "B"}')
        new.role_arn = f"arn:aws:iam::{ACCOUNT}:role/other"
        new.updated_ms = 7_000
        new.description = "changed"
        assert store.update_state_machine(new) is True
        assert store.get_state_machine(old.arn) == new
        assert store.get_revision(old.arn, "rev-1") == (DEFINITION, ROLE)
        assert store.get_revision(old.arn, "rev-2") == ('{"StartAt": "B"}', new.role_arn)

    def test_update_of_an_unknown_machine_returns_false_and_creates_nothing(self, store: Store) -> None:
        record = machine_record("nobody")
        assert store.update_state_machine(record) is False
        assert store.get_state_machine(record.arn) is None
        assert store.list_state_machines(US_EAST, 10, None).items == []

    def test_delete_removes_the_machine_but_its_revisions_stay_readable(self, store: Store) -> None:
        record = machine_record("orders")
        store.create_state_machine(record)
        store.update_state_machine(machine_record("orders", revision="rev-2", definition='{"StartAt": "B"}'))
        store.delete_state_machine(record.arn)
        assert store.get_state_machine(record.arn) is None
        assert store.list_state_machines(US_EAST, 10, None).items == []
        assert store.get_revision(record.arn, "rev-1") == (DEFINITION, ROLE)
        assert store.get_revision(record.arn, "rev-2") == ('{"StartAt": "B"}', ROLE)
        store.delete_state_machine(record.arn)  # deleting again is a no-op
        assert store.update_state_machine(record) is False

    def test_delete_then_create_again_starts_a_fresh_record(self, store: Store) -> None:
        store.create_state_machine(machine_record("orders"))
        store.tag_resource(machine_record("orders").arn, {"team": "payments"})
        store.delete_state_machine(machine_record("orders").arn)
        fresh = machine_record("orders", revision="rev-9", created_ms=9_000)
        assert store.create_state_machine(fresh) == fresh
        assert store.get_state_machine(fresh.arn) == fresh
        assert store.list_tags(fresh.arn) == {}

    def test_a_new_resource_is_tagged_in_its_create_and_an_existing_one_is_not(self, store: Store) -> None:
        machine = machine_record("orders")
        assert store.create_state_machine(machine, {"team": "payments"}) == machine
        assert store.create_state_machine(machine_record("orders", revision="rev-2"), {"team": "other"}) == machine
        assert store.list_tags(machine.arn) == {"team": "payments"}
        activity = ActivityRecord(f"arn:aws:states:us-east-1:{ACCOUNT}:activity:work", "work", 5)
        assert store.create_activity(activity, {"team": "payments"}) == activity
        store.create_activity(ActivityRecord(activity.arn, "work", 9), {"team": "other", "env": "dev"})
        assert store.list_tags(activity.arn) == {"team": "payments"}

    def test_list_state_machines_sorted_by_name(self, store: Store) -> None:
        names = ["delta", "alpha", "charlie", "bravo", "echo"]
        for name in names:
            store.create_state_machine(machine_record(name))
        page = store.list_state_machines(US_EAST, 10, None)
        assert [record.name for record in page.items] == sorted(names)
        assert page.items[0] == machine_record("alpha")
        assert page.next_cursor is None

    @pytest.mark.parametrize("limit", [1, 2, 3, 4, 10])
    def test_list_state_machines_pages_within_one_region_and_account(self, store: Store, limit: int) -> None:
        records = [machine_record(name) for name in ("delta", "alpha", "charlie", "bravo")]
        elsewhere = [machine_record("bravo", region=region) for region in ("eu-west-1", "ap-south-1")]
        for record in records + elsewhere:
            store.create_state_machine(record)
        items = page_through(lambda limit, cursor: store.list_state_machines(US_EAST, limit, cursor), limit)
        assert [record.name for record in items] == ["alpha", "bravo", "charlie", "delta"]
        assert all(record.arn.startswith(US_EAST) for record in items)

    def test_counts_of_one_accounts_resources_stop_at_the_bound_asked(self, store: Store) -> None:
        for name in ("a", "b", "c"):
            store.create_state_machine(machine_record(name))
            store.create_activity(ActivityRecord(US_EAST.replace("stateMachine:", "activity:") + name, name, 1))
        store.create_state_machine(machine_record("d", region="eu-west-1"))
        assert store.count_state_machines(US_EAST, 10) == 3
        assert store.count_state_machines(US_EAST, 2) == 2
        assert store.count_state_machines(US_EAST.replace("us-east-1", "ap-south-1"), 10) == 0
        activities = US_EAST.replace("stateMachine:", "activity:")
        assert (store.count_activities(activities, 10), store.count_activities(activities, 1)) == (3, 1)

    # -- versions and aliases

    def _revise(self, store: Store, name: str, revision: str) -> StateMachineRecord:
        record = machine_record(name, revision=revision, definition=f'{{"StartAt": "{revision}"}}')
        record.initial_revision_id = "rev-1"
        record.updated_ms = 2_000
        assert store.update_state_machine(record) is True
        return record

    def test_publishing_snapshots_the_current_revision_under_the_next_number(self, store: Store) -> None:
        first = store.create_state_machine(machine_record("orders"))
        version = store.publish_version(first.arn, "first cut", 5_000)
        assert version == VersionRecord(first, 1, "first cut", 5_000)
        assert version.arn == f"{first.arn}:1"
        changed = self._revise(store, "orders", "rev-2")
        assert store.publish_version(first.arn, "", 6_000) == VersionRecord(changed, 2, "", 6_000)
        assert store.get_version(first.arn, 1) == version  # immutable: the update did not touch it

    def test_publishing_a_revision_already_published_returns_its_version(self, store: Store) -> None:
        store.create_state_machine(machine_record("orders"))
        version = store.publish_version(MACHINE, "once", 5_000)
        assert store.publish_version(MACHINE, "twice", 6_000) == version
        assert [v.number for v in store.list_versions(MACHINE, 10, None).items] == [1]

    def test_publishing_conditional_on_a_revision_that_moved_is_refused(self, store: Store) -> None:
        store.create_state_machine(machine_record("orders"))
        assert store.publish_version(MACHINE, "", 5_000, revision_id="INITIAL").number == 1  # AWS's name for it
        self._revise(store, "orders", "rev-2")
        with pytest.raises(RevisionChanged) as refused:
            store.publish_version(MACHINE, "", 6_000, revision_id="rev-1")
        assert refused.value.current == "rev-2"
        assert store.publish_version(MACHINE, "", 6_000, revision_id="rev-2").number == 2

    def test_publishing_needs_the_state_machine(self, store: Store) -> None:
        with pytest.raises(NoSuchStateMachine):
            store.publish_version(MACHINE, "", 5_000)

    def test_version_numbers_are_never_reused_after_a_delete(self, store: Store) -> None:
        store.create_state_machine(machine_record("orders"))
        store.publish_version(MACHINE, "", 5_000)
        self._revise(store, "orders", "rev-2")
        store.publish_version(MACHINE, "", 5_000)
        store.delete_version(MACHINE, 2)
        store.delete_version(MACHINE, 2)  # deleting again is a no-op
        assert store.get_version(MACHINE, 2) is None
        assert store.publish_version(MACHINE, "", 6_000).number == 3  # rev-2 again, under a new number

    def test_publishing_stops_at_the_versions_quota(self, store: Store) -> None:
        store.create_state_machine(machine_record("orders"))
        store.publish_version(MACHINE, "", 5_000, versions_max=2)
        self._revise(store, "orders", "rev-2")
        store.publish_version(MACHINE, "", 5_000, versions_max=2)
        self._revise(store, "orders", "rev-3")
        with pytest.raises(QuotaExceeded):
            store.publish_version(MACHINE, "", 5_000, versions_max=2)
        store.delete_version(MACHINE, 1)
        assert store.publish_version(MACHINE, "", 5_000, versions_max=2).number == 3

    @pytest.mark.parametrize("limit", [1, 2, 10])
    def test_list_versions_pages_newest_first(self, store: Store, limit: int) -> None:
        store.create_state_machine(machine_record("orders"))
        store.create_state_machine(machine_record("billing"))
        for revision in ("rev-1", "rev-2", "rev-3"):
            if revision != "rev-1":
                self._revise(store, "orders", revision)
            store.publish_version(MACHINE, "", 5_000)
        store.publish_version(OTHER_MACHINE, "", 5_000)
        items = page_through(lambda size, cursor: store.list_versions(MACHINE, size, cursor), limit)
        assert [version.number for version in items] == [3, 2, 1]

    def _versions(self, store: Store, count: int) -> None:
        store.create_state_machine(machine_record("orders"))
        for number in range(1, count + 1):
            if number > 1:
                self._revise(store, "orders", f"rev-{number}")
            store.publish_version(MACHINE, "", 5_000)

    def test_an_alias_is_created_once_and_read_back(self, store: Store) -> None:
        self._versions(store, 2)
        alias = AliasRecord(MACHINE, "live", "prod", ((1, 80), (2, 20)), 7_000, 7_000)
        assert store.create_alias(alias) == alias
        assert store.get_alias(MACHINE, "live") == alias
        assert alias.arn == f"{MACHINE}:live"
        other = AliasRecord(MACHINE, "live", "", ((2, 100),), 8_000, 8_000)
        assert store.create_alias(other) == alias  # the existing one, unchanged
        assert store.get_alias(MACHINE, "nobody") is None

    def test_an_alias_routes_only_to_versions_that_exist(self, store: Store) -> None:
        self._versions(store, 1)
        with pytest.raises(NoSuchVersions) as refused:
            store.create_alias(AliasRecord(MACHINE, "live", "", ((1, 50), (7, 50)), 7_000, 7_000))
        assert refused.value.numbers == [7]
        with pytest.raises(NoSuchStateMachine):
            store.create_alias(AliasRecord(OTHER_MACHINE, "live", "", ((1, 100),), 7_000, 7_000))
        store.create_alias(AliasRecord(MACHINE, "live", "", ((1, 100),), 7_000, 7_000))
        with pytest.raises(NoSuchVersions):
            store.update_alias(AliasRecord(MACHINE, "live", "", ((2, 100),), 7_000, 8_000))
        assert store.get_alias(MACHINE, "live").routing == ((1, 100),)

    def test_a_version_an_alias_routes_to_cannot_be_deleted(self, store: Store) -> None:
        self._versions(store, 2)
        store.create_alias(AliasRecord(MACHINE, "live", "", ((1, 50), (2, 50)), 7_000, 7_000))
        store.create_alias(AliasRecord(MACHINE, "beta", "", ((2, 100),), 7_000, 7_000))
        with pytest.raises(VersionRouted) as refused:
            store.delete_version(MACHINE, 2)
        assert sorted(refused.value.aliases) == ["beta", "live"]
        assert store.update_alias(AliasRecord(MACHINE, "live", "", ((1, 100),), 7_000, 8_000)) is True
        store.delete_alias(MACHINE, "beta")
        store.delete_alias(MACHINE, "beta")  # deleting again is a no-op
        store.delete_version(MACHINE, 2)
        assert store.get_version(MACHINE, 2) is None

    def test_update_of_an_unknown_alias_returns_false(self, store: Store) -> None:
        self._versions(store, 1)
        assert store.update_alias(AliasRecord(MACHINE, "nobody", "", ((1, 100),), 7_000, 7_000)) is False
        assert store.get_alias(MACHINE, "nobody") is None

    def test_creating_aliases_stops_at_the_aliases_quota(self, store: Store) -> None:
        self._versions(store, 1)
        for name in ("a", "b"):
            store.create_alias(AliasRecord(MACHINE, name, "", ((1, 100),), 7_000, 7_000), aliases_max=2)
        with pytest.raises(QuotaExceeded):
            store.create_alias(AliasRecord(MACHINE, "c", "", ((1, 100),), 7_000, 7_000), aliases_max=2)

    @pytest.mark.parametrize("limit", [1, 2, 10])
    def test_list_aliases_pages_by_name(self, store: Store, limit: int) -> None:
        self._versions(store, 1)
        for name in ("prod", "beta", "canary"):
            store.create_alias(AliasRecord(MACHINE, name, "", ((1, 100),), 7_000, 7_000))
        items = page_through(lambda size, cursor: store.list_aliases(MACHINE, size, cursor), limit)
        assert [alias.name for alias in items] == ["beta", "canary", "prod"]
        assert store.list_aliases(OTHER_MACHINE, 10, None).items == []

    def test_deleting_a_state_machine_deletes_its_versions_and_aliases_but_not_its_revisions(
            self, store: Store) -> None:
        self._versions(store, 2)
        store.create_alias(AliasRecord(MACHINE, "live", "", ((1, 100),), 7_000, 7_000))
        store.delete_state_machine(MACHINE)
        assert store.list_versions(MACHINE, 10, None).items == []
        assert store.list_aliases(MACHINE, 10, None).items == []
        assert store.get_revision(MACHINE, "rev-1") == (DEFINITION, ROLE)
        store.create_state_machine(machine_record("orders"))
        assert store.publish_version(MACHINE, "", 9_000).number == 1  # a new state machine counts afresh

    # -- tags

    def test_tags_are_added_overwritten_and_removed(self, store: Store) -> None:
        arn = machine_record("orders").arn
        assert store.list_tags(arn) == {}
        store.tag_resource(arn, {"team": "payments", "env": "dev"})
        store.tag_resource(arn, {"env": "prod", "cost": "42"})
        assert store.list_tags(arn) == {"team": "payments", "env": "prod", "cost": "42"}
        store.untag_resource(arn, ["env", "not-there"])
        assert store.list_tags(arn) == {"team": "payments", "cost": "42"}
        store.untag_resource(arn, [])
        store.tag_resource(arn, {})
        assert store.list_tags(arn) == {"team": "payments", "cost": "42"}

    def test_tags_are_per_resource(self, store: Store) -> None:
        first, second = machine_record("orders").arn, machine_record("billing").arn
        store.tag_resource(first, {"team": "payments"})
        store.tag_resource(second, {"team": "finance", "env": "prod"})
        store.untag_resource(first, ["env"])
        assert store.list_tags(first) == {"team": "payments"}
        assert store.list_tags(second) == {"team": "finance", "env": "prod"}
