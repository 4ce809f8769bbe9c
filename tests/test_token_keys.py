"""Task token keys: new tokens use the newest key, older keys verify until retired; `statewright keys` drives it."""

import subprocess
import sys

import pytest

from statewright.engine.tokens import InvalidToken, TaskTokens
from statewright.store import open_store
from statewright.store.sqlite import SqliteStore

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
