"""Task token keys: new tokens use the newest key, older keys verify until retired; `statewright keys` drives it."""

import subprocess
import sys

import orjson
import pytest

from statewright.engine.tokens import InvalidToken, TaskTokens, UnknownKey, _b64
from statewright.store import open_store
from statewright.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow  # the statewright command, PostgreSQL: not in the fast tier

ARN = "arn:aws:states:us-east-1:123456789012:execution:m:e"


@pytest.fixture
def store(tmp_path):
    store = SqliteStore(tmp_path / "statewright.db", 2)
    yield store
    store.close()


def test_a_rotated_key_signs_and_the_old_one_still_verifies(store):
    before = TaskTokens.load(store)
    old_token = before.mint(ARN, 3, 1)
    new_key = TaskTokens.rotate(store)
    after = TaskTokens.load(store)
    assert after.current == new_key != before.current
    assert after.verify(old_token).scheduled_id == 3
    assert after.verify(after.mint(ARN, 5, 2)).attempt == 2


def test_a_retired_key_no_longer_verifies(store):
    old_token = TaskTokens.load(store).mint(ARN, 3, 1)
    old_key = TaskTokens.load(store).current
    TaskTokens.rotate(store)
    TaskTokens.retire(store, old_key)
    with pytest.raises(InvalidToken):
        TaskTokens.load(store).verify(old_token)


def test_the_current_key_cannot_be_retired(store):
    with pytest.raises(ValueError, match="current"):
        TaskTokens.retire(store, TaskTokens.load(store).current)


def test_tampering_with_any_part_is_refused(store):
    tokens = TaskTokens.load(store)
    token = tokens.mint(ARN, 3, 1)
    body, mac = token.split(".")
    for forged in (f"{body}.{mac[:-2]}AA", f"{body[:-2]}AA.{mac}", token + "=", "nonsense", ""):
        with pytest.raises(InvalidToken):
            tokens.verify(forged)


def test_keys_command_rotates_and_lists(tmp_path, store):
    TaskTokens.load(store)
    run = [sys.executable, "-m", "statewright", "keys"]
    rotated = subprocess.run([*run, "rotate", "--data-dir", str(tmp_path)], capture_output=True, text=True)
    assert rotated.returncode == 0, rotated.stderr
    listed = subprocess.run([*run, "list", "--data-dir", str(tmp_path)], capture_output=True, text=True)
    assert listed.stdout.split("\n")[:2] == ["k1", "k2  (signs new tokens)"]
    refused = subprocess.run([*run, "retire", "k2", "--data-dir", str(tmp_path)], capture_output=True, text=True)
    assert refused.returncode != 0 and "current" in refused.stderr


def test_keys_command_on_postgresql(postgres_schema):
    store = open_store(postgres_schema, 2)
    try:
        TaskTokens.load(store)
    finally:
        store.close()
    run = [sys.executable, "-m", "statewright", "keys"]
    rotated = subprocess.run([*run, "rotate", "--store", postgres_schema], capture_output=True, text=True)
    assert rotated.returncode == 0, rotated.stderr
    listed = subprocess.run([*run, "list", "--store", postgres_schema], capture_output=True, text=True)
    assert listed.stdout.split("\n")[:2] == ["k1", "k2  (signs new tokens)"]


def test_a_node_reads_the_key_set_again_for_a_token_signed_with_a_key_it_has_not_seen(store):
    stale = TaskTokens.load(store)  # a node that started before the rotation
    TaskTokens.rotate(store)
    fresh = TaskTokens.load(store)  # a node started after it signs with the new key
    token = fresh.mint(ARN, 7, 1)
    with pytest.raises(UnknownKey):
        stale.verify(token)
    assert stale.reread_for(token).scheduled_id == 7
    assert stale.current == fresh.current


def test_a_forged_key_id_rereads_the_key_set_at_most_once_a_second(store, monkeypatch):
    tokens = TaskTokens.load(store)
    reads = []
    monkeypatch.setattr(tokens, "refresh", lambda: reads.append(1))
    body = _b64(orjson.dumps([ARN, 1, 1, "k999"]))
    for _ in range(50):
        with pytest.raises(InvalidToken):
            tokens.reread_for(f"{body}.{_b64(bytes(20))}")
    assert len(reads) == 1


def test_refresh_picks_up_a_retirement(store):
    node = TaskTokens.load(store)
    old_key = node.current
    old_token = node.mint(ARN, 3, 1)
    TaskTokens.rotate(store)
    TaskTokens.retire(store, old_key)
    assert node.verify(old_token).attempt == 1  # until it reads the key set again
    node.refresh()
    with pytest.raises(InvalidToken):
        node.verify(old_token)
    assert node.verify(node.mint(ARN, 4, 1)).scheduled_id == 4
