"""The wire format between nodes: every command, attempt result and reply survives encoding, and bad bytes are
refused with MalformedMessage."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from statewright.decider.outcomes import AttemptFailed, AttemptSubmitted, AttemptSucceeded
from statewright.engine.commands import (
    AckDispatch,
    CompleteAttempt,
    EngineUnavailable,
    ExecutionAlreadyExists,
    ExecutionDoesNotExist,
    ExecutionNotRedrivable,
    FireTimer,
    Heartbeat,
    InboxFull,
    MalformedMessage,
    RedriveExecution,
    ShardNotOwned,
    StartAttempt,
    StartExecution,
    StopExecution,
    TaskNotPending,
    decode_commands,
    decode_replies,
    encode_commands,
    encode_replies,
)

texts = st.text(max_size=40)
optional_texts = st.none() | texts
ids = st.integers(min_value=0, max_value=2**53)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4), max_leaves=12)
results = st.one_of(st.builds(AttemptSucceeded, texts), st.builds(AttemptFailed, optional_texts, optional_texts),
                    st.builds(AttemptSubmitted, json_values))
parents = st.none() | st.fixed_dictionaries({"token": texts, "pattern": st.sampled_from(["sync", "sync:2"])})
commands = st.one_of(
    st.builds(StartExecution, texts, texts, texts, texts, texts, texts, parents),
    st.builds(StopExecution, texts, optional_texts, optional_texts),
    st.builds(RedriveExecution, texts, optional_texts),
    st.builds(FireTimer, texts, texts),
    st.builds(StartAttempt, texts, ids, optional_texts),
    st.builds(CompleteAttempt, texts, ids, results),
    st.builds(Heartbeat, texts, ids),
    st.builds(AckDispatch, texts, texts))
errors = st.one_of(
    st.builds(ExecutionAlreadyExists, texts), st.builds(ExecutionDoesNotExist, texts),
    st.builds(ExecutionNotRedrivable, texts, texts),
    st.builds(TaskNotPending, texts), st.builds(EngineUnavailable, texts), st.builds(InboxFull, texts),
    st.builds(ShardNotOwned, st.integers(0, 4095)))
replies = st.one_of(st.none(), st.booleans(), st.integers(0, 2**63 - 1), errors)


def same_reply(sent: object, received: object) -> bool:
    if isinstance(sent, BaseException):
        return type(received) is type(sent) and received.args == sent.args and vars(received) == vars(sent)
    return type(received) is type(sent) and received == sent


@given(st.lists(commands, max_size=5), st.booleans())
def test_commands_round_trip(sent, throttle):
    assert decode_commands(encode_commands(sent, throttle=throttle)) == (sent, throttle)


@given(st.lists(replies, max_size=6))
def test_replies_round_trip(sent):
    received = decode_replies(encode_replies(sent))
    assert len(received) == len(sent)
    assert all(same_reply(a, b) for a, b in zip(sent, received, strict=True))


def test_true_and_one_stay_apart():
    assert [type(reply) for reply in decode_replies(encode_replies([True, 1, 0, False, None]))] == [
        bool, int, int, bool, type(None)]


def test_an_error_of_no_known_kind_travels_as_engine_unavailable_with_its_message():
    (received,) = decode_replies(encode_replies([LookupError("definition revision ('m', 'r') is missing")]))
    assert type(received) is EngineUnavailable
    assert str(received) == "LookupError: definition revision ('m', 'r') is missing"


def test_a_refusal_keeps_its_arn_and_a_shard_not_owned_its_shard():
    refused, moved = decode_replies(encode_replies([TaskNotPending("arn:x"), ShardNotOwned(7)]))
    assert refused.arn == "arn:x"
    assert (moved.shard_id, str(moved)) == (7, "this node does not own shard 7")
    assert isinstance(moved, EngineUnavailable)  # a caller that does not follow moves treats it as retryable


@pytest.mark.parametrize("data", [
    b"", b"not json", b"[]", b'{"v": 1}', b'{"v": 2, "throttle": true, "commands": []}',
    b'{"v": 1, "throttle": "yes", "commands": []}',
    b'{"v": 1, "throttle": true, "commands": [{"type": "DropTables", "arn": "a"}]}',
    b'{"v": 1, "throttle": true, "commands": [{"type": "FireTimer", "arn": "a"}]}',
    b'{"v": 1, "throttle": true, "commands": [{"type": "FireTimer", "arn": "a", "timer_id": "t", "x": 1}]}',
    b'{"v": 1, "throttle": true, "commands": [7]}', b'{"v": 1, "throttle": true, "commands": ["ab"]}',
    b'{"v": 1, "throttle": true, "commands": [{"type": "CompleteAttempt", "arn": "a", "scheduled_id": 1, '
    b'"result": {"type": "AttemptExploded"}}]}',
])
def test_bad_commands_are_refused(data):
    with pytest.raises(MalformedMessage):
        decode_commands(data)


@pytest.mark.parametrize("data", [
    b"{}", b'{"v": 1, "replies": [{}]}', b'{"v": 1, "replies": [{"error": "TaskNotPending"}]}',
    b'{"v": 1, "replies": ["ab", ["ok"]]}',
    orjson.dumps({"v": 0, "replies": []}),
])
def test_bad_replies_are_refused(data):
    with pytest.raises(MalformedMessage):
        decode_replies(data)
