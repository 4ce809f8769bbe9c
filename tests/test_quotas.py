"""AWS's quotas as a setting (--limits, --limit, an account's own limits): counted quotas answer AWS's error and
write nothing; token buckets answer ThrottlingException before anything is written. Real servers, boto3."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import boto3
import pytest
from botocore.config import Config

from server import ROLE_ARN, ServerProcess
from statewright.api.quotas import (
    AWS_RATES,
    BUCKETS_MAX,
    InvalidLimit,
    Quotas,
    QuotaSet,
    Rate,
    RateLimiter,
    preset,
    with_settings,
)

PASS = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})


def _tags(count: int, prefix: str = "k") -> list[dict]:
    return [{"key": f"{prefix}{i}", "value": "v"} for i in range(count)]


@pytest.fixture(scope="module")
def tight(tmp_path_factory):
    """--limits aws with small counts and buckets, to reach each bound in a few calls."""
    process = ServerProcess(tmp_path_factory.mktemp("quotas") / "data", extra_args=(
        "--limits", "aws", "--limit", "state-machines=3", "--limit", "activities=2",
        "--limit", "rate.ValidateStateMachineDefinition=3/0.01", "--limit", "rate.CreateStateMachine=30/0.01",
        "--limit", "rate.StartExecution=2/0.01", "--limit", "versions-per-state-machine=5",
        "--limit", "aliases-per-state-machine=2")).start()
    yield process
    process.stop()


def test_tags_past_fifty_are_too_many_by_default_and_nothing_is_written(server, sfn):
    machine = sfn.create_state_machine(name=f"tags-{uuid.uuid4().hex[:8]}", definition=PASS, roleArn=ROLE_ARN,
                                       tags=_tags(50))["stateMachineArn"]
    with pytest.raises(sfn.exceptions.TooManyTags) as refused:
        sfn.tag_resource(resourceArn=machine, tags=_tags(1, "more"))
    assert refused.value.response["resourceName"] == machine
    assert len(sfn.list_tags_for_resource(resourceArn=machine)["tags"]) == 50
    sfn.tag_resource(resourceArn=machine, tags=_tags(3))  # keys it has already: still 50
    name = f"tags-{uuid.uuid4().hex[:8]}"
    with pytest.raises(sfn.exceptions.TooManyTags):
        sfn.create_state_machine(name=name, definition=PASS, roleArn=ROLE_ARN, tags=_tags(51))
    with pytest.raises(sfn.exceptions.TooManyTags):
        sfn.create_activity(name=name, tags=_tags(51))
    assert name not in json.dumps([sfn.list_state_machines()["stateMachines"], sfn.list_activities()["activities"]],
                                  default=str)


def test_the_local_default_has_no_buckets(server, sfn):
    for _ in range(120):  # AWS's ListActivities bucket holds 100
        sfn.list_activities(maxResults=1)


def _empty(sfn) -> None:
    """The tight server's account without state machines or activities (the tests share it, in any order)."""
    for machine in sfn.list_state_machines()["stateMachines"]:
        sfn.delete_state_machine(stateMachineArn=machine["stateMachineArn"])
    for activity in sfn.list_activities()["activities"]:
        sfn.delete_activity(activityArn=activity["activityArn"])


def test_counted_quotas_answer_awss_errors_and_an_existing_name_is_still_idempotent(tight):
    sfn = tight.client()
    _empty(sfn)
    names = [f"q-{n}-{uuid.uuid4().hex[:6]}" for n in range(4)]
    made = [sfn.create_state_machine(name=name, definition=PASS, roleArn=ROLE_ARN)["stateMachineArn"]
            for name in names[:3]]
    with pytest.raises(sfn.exceptions.StateMachineLimitExceeded):
        sfn.create_state_machine(name=names[3], definition=PASS, roleArn=ROLE_ARN)
    assert sfn.create_state_machine(name=names[0], definition=PASS, roleArn=ROLE_ARN)["stateMachineArn"] == made[0]
    assert len(sfn.list_state_machines()["stateMachines"]) == 3
    sfn.delete_state_machine(stateMachineArn=made[2])
    sfn.create_state_machine(name=names[3], definition=PASS, roleArn=ROLE_ARN)  # room again after a delete

    sfn.create_activity(name="one")
    sfn.create_activity(name="two")
    with pytest.raises(sfn.exceptions.ActivityLimitExceeded):
        sfn.create_activity(name="three")
    assert sfn.create_activity(name="two")["activityArn"].endswith(":activity:two")


def test_publishing_stops_at_the_versions_quota_and_an_update_past_it_is_refused_whole(tight):
    """As at AWS's 1,000 (its default in every mode), at 5 here."""
    sfn = tight.client()
    _empty(sfn)
    one = {"StartAt": "A", "States": {"A": {"Type": "Pass", "Result": 0, "End": True}}}
    machine = sfn.create_state_machine(name=f"v-{uuid.uuid4().hex[:6]}", definition=json.dumps(one), roleArn=ROLE_ARN,
                                       publish=True)["stateMachineArn"]
    for n in range(2, 6):
        sfn.update_state_machine(stateMachineArn=machine, definition=json.dumps({**one, "Comment": str(n)}),
                                 publish=True)
    sfn.update_state_machine(stateMachineArn=machine, definition=json.dumps({**one, "Comment": "six"}))
    with pytest.raises(sfn.exceptions.ServiceQuotaExceededException, match="has 5 versions"):
        sfn.publish_state_machine_version(stateMachineArn=machine)
    before = sfn.describe_state_machine(stateMachineArn=machine)["revisionId"]
    with pytest.raises(sfn.exceptions.ServiceQuotaExceededException):  # it would publish a sixth: refused whole
        sfn.update_state_machine(stateMachineArn=machine, definition=json.dumps(one), publish=True)
    assert sfn.describe_state_machine(stateMachineArn=machine)["revisionId"] == before
    sfn.delete_state_machine_version(stateMachineVersionArn=f"{machine}:1")
    assert sfn.publish_state_machine_version(stateMachineArn=machine)["stateMachineVersionArn"] == f"{machine}:6"
    for name in ("live", "beta"):
        sfn.create_state_machine_alias(name=name, routingConfiguration=[
            {"stateMachineVersionArn": f"{machine}:6", "weight": 100}])
    with pytest.raises(sfn.exceptions.ServiceQuotaExceededException, match="has 2 aliases"):
        sfn.create_state_machine_alias(name="third", routingConfiguration=[
            {"stateMachineVersionArn": f"{machine}:6", "weight": 100}])


def test_an_exceeded_bucket_throttles_before_anything_is_written(tight):
    sfn = tight.client()
    _empty(sfn)
    answers = []
    for _ in range(5):
        try:
            sfn.validate_state_machine_definition(definition=PASS)
            answers.append("ok")
        except sfn.exceptions.ClientError as error:
            answers.append(error.response["Error"]["Code"])
    assert answers[:3] == ["ok"] * 3 and set(answers[3:]) == {"ThrottlingException"}

    express = sfn.create_state_machine(name=f"fast-{uuid.uuid4().hex[:6]}", definition=PASS, roleArn=ROLE_ARN,
                                       type="EXPRESS")["stateMachineArn"]
    standard = sfn.create_state_machine(name=f"slow-{uuid.uuid4().hex[:6]}", definition=PASS,
                                        roleArn=ROLE_ARN)["stateMachineArn"]
    started = [sfn.start_execution(stateMachineArn=standard, name=f"run-{n}") for n in range(2)]
    with pytest.raises(sfn.exceptions.ClientError, match="ThrottlingException"):
        sfn.start_execution(stateMachineArn=standard, name="run-2")
    listed = {run["name"] for run in sfn.list_executions(stateMachineArn=standard)["executions"]}
    assert listed == {"run-0", "run-1"} and len(started) == 2  # the throttled start wrote nothing
    for _ in range(5):  # Express starts draw from a bucket of their own (6,000 on AWS)
        sfn.start_execution(stateMachineArn=express)


def test_an_accounts_own_limits_apply_to_it_alone(tmp_path):
    accounts = tmp_path / "accounts.json"
    small, big = ("AKIASMALL0000000001", "small-secret"), ("AKIABIG000000000001", "big-secret")
    accounts.write_text(json.dumps({"accounts": [
        {"accountId": "111111111111", "keys": [{"accessKeyId": small[0], "secretAccessKey": small[1]}],
         "limits": {"state-machines": 1, "rate.ListStateMachines": "none"}},
        {"accountId": "222222222222", "keys": [{"accessKeyId": big[0], "secretAccessKey": big[1]}]}]}))
    process = ServerProcess(tmp_path / "data", extra_args=("--auth", "sigv4", "--accounts", str(accounts))).start()
    try:
        def client(key):
            return boto3.client("stepfunctions", endpoint_url=process.endpoint, region_name="us-east-1",
                                aws_access_key_id=key[0], aws_secret_access_key=key[1],
                                config=Config(retries={"max_attempts": 0}))
        first, second = client(small), client(big)
        first.create_state_machine(name="only", definition=PASS, roleArn=ROLE_ARN)
        with pytest.raises(first.exceptions.StateMachineLimitExceeded):
            first.create_state_machine(name="another", definition=PASS, roleArn=ROLE_ARN)
        for name in ("one", "two"):
            second.create_state_machine(name=name, definition=PASS, roleArn=ROLE_ARN)
        for _ in range(110):  # its own ListStateMachines has no bucket; AWS's holds 100
            first.list_state_machines()
        throttled = 0
        for _ in range(110):
            try:
                second.list_state_machines()
            except second.exceptions.ClientError as error:
                throttled += error.response["Error"]["Code"] == "ThrottlingException"
        assert throttled > 0, "the other account keeps AWS's bucket (--limits aws is sigv4's default)"
    finally:
        process.stop()


def test_a_bucket_refills_at_its_rate_and_a_node_keeps_its_share():
    now = [0.0]
    limiter = RateLimiter(Quotas(with_settings(QuotaSet(), {"rate.DescribeExecution": "10/2"})), clock=lambda: now[0])
    taken = 0
    while True:
        try:
            limiter.admit("1", "us-east-1", "DescribeExecution")
            taken += 1
        except Exception:
            break
    assert taken == 10
    now[0] += 1.0  # two tokens back
    limiter.admit("1", "us-east-1", "DescribeExecution")
    limiter.admit("1", "us-east-1", "DescribeExecution")
    with pytest.raises(Exception, match="Rate exceeded"):
        limiter.admit("1", "us-east-1", "DescribeExecution")
    limiter.admit("2", "us-east-1", "DescribeExecution")  # another account, another bucket
    limiter.admit("1", "us-east-1", "DescribeActivity")  # an action without a bucket is never throttled

    third = RateLimiter(Quotas(with_settings(QuotaSet(), {"rate.DescribeExecution": "9/3"})), clock=lambda: now[0],
                        share=lambda: 1 / 3)
    admitted = sum(1 for _ in range(9) if _admits(third))
    assert admitted == 3  # a third of the bucket on each of three nodes


def _admits(limiter: RateLimiter) -> bool:
    try:
        limiter.admit("1", "eu-central-1", "DescribeExecution")
        return True
    except Exception:
        return False


def test_buckets_are_bounded_and_regions_get_their_group_of_rates():
    limiter = RateLimiter(Quotas(preset("aws")))
    for n in range(BUCKETS_MAX + 10):
        limiter.admit(f"{n:012d}", "us-east-1", "DescribeExecution")
    assert len(limiter._buckets) == BUCKETS_MAX
    aws = preset("aws")
    assert aws.rate("StartExecution", "us-east-1") == Rate(1300, 300)
    assert aws.rate("StartExecution", "ap-south-1") == Rate(800, 150)
    assert preset("local").rate("StartExecution", "us-east-1") is None
    assert (aws.tags_per_resource, preset("local").open_executions, preset("relaxed").tags_per_resource) == (
        50, None, None)
    assert (aws.versions_per_state_machine, aws.aliases_per_state_machine) == (1_000, 100)
    assert preset("local").versions_per_state_machine == 1_000
    assert set(AWS_RATES) >= {"StartExecution", "SendTaskSuccess", "GetActivityTask", "DescribeExecution"}


@pytest.mark.parametrize(("settings", "complaint"), [
    ({"tags": "5"}, "unknown limit 'tags'"),
    ({"state-machines": "-1"}, "expected a whole number or none"),
    ({"rate.StartExecution": "10"}, "expected BUCKET/REFILL"),
    ({"rate.StartExecution": "10/0"}, "expected BUCKET/REFILL"),
    ({"rates": "some"}, "expected aws or none"),
    ({"rate.describeExecution": "1/1"}, "no bucket is named 'describeExecution'"),
])
def test_a_limit_that_is_wrong_is_refused_with_what_to_write(settings, complaint):
    with pytest.raises(InvalidLimit, match=complaint):
        with_settings(QuotaSet(), settings)


def test_serve_refuses_a_limit_it_does_not_know(tmp_path):
    answer = subprocess.run([sys.executable, "-m", "statewright", "serve", "--data-dir", str(tmp_path), "--limit",
                             "tags=5"], capture_output=True, text=True, timeout=60)
    assert answer.returncode == 2 and "unknown limit 'tags'" in answer.stderr


def test_open_executions_past_the_cap_are_refused_and_room_comes_back_as_they_close(tmp_path):
    process = ServerProcess(tmp_path / "data", extra_args=("--limit", "open-executions=2")).start()
    try:
        sfn = process.client()
        sleeper = sfn.create_state_machine(name="sleeper", roleArn=ROLE_ARN, definition=json.dumps(
            {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 3600, "End": True}}}))["stateMachineArn"]
        express = sfn.create_state_machine(name="quick", roleArn=ROLE_ARN, definition=PASS,
                                           type="EXPRESS")["stateMachineArn"]
        deadline = time.monotonic() + 30
        while b"\nstatewright_open_executions " not in urllib.request.urlopen(f"{process.endpoint}/metrics").read():
            assert time.monotonic() < deadline, "the start-up count never landed"  # until then nothing is refused
            time.sleep(0.05)
        first = sfn.start_execution(stateMachineArn=sleeper, name="one")["executionArn"]
        sfn.start_execution(stateMachineArn=sleeper, name="two")
        with pytest.raises(sfn.exceptions.ExecutionLimitExceeded):
            sfn.start_execution(stateMachineArn=sleeper, name="refused")
        names = {run["name"] for run in sfn.list_executions(stateMachineArn=sleeper)["executions"]}
        assert names == {"one", "two"}
        sfn.start_execution(stateMachineArn=express)  # Express executions do not count
        sfn.stop_execution(executionArn=first)
        sfn.start_execution(stateMachineArn=sleeper, name="room-again")
    finally:
        process.stop()


def test_a_flooding_account_is_throttled_alone_past_the_inbox_bound(tmp_path):
    """The engine's inbox holds --inbox-commands-max commands per account: one account's flood overflows its own."""
    accounts = tmp_path / "accounts.json"
    flood, calm = ("AKIAFLOOD0000000001", "flood-secret"), ("AKIACALM00000000001", "calm-secret")
    accounts.write_text(json.dumps({"accounts": [
        {"accountId": "111111111111", "keys": [{"accessKeyId": flood[0], "secretAccessKey": flood[1]}]},
        {"accountId": "222222222222", "keys": [{"accessKeyId": calm[0], "secretAccessKey": calm[1]}]}]}))
    process = ServerProcess(tmp_path / "data", extra_args=(
        "--auth", "sigv4", "--accounts", str(accounts), "--limits", "local", "--inbox-commands-max", "1")).start()
    try:
        def client(key):
            return boto3.client("stepfunctions", endpoint_url=process.endpoint, region_name="us-east-1",
                                aws_access_key_id=key[0], aws_secret_access_key=key[1],
                                config=Config(retries={"max_attempts": 0}, max_pool_connections=64))
        flooding, steady = client(flood), client(calm)
        machines = [sfn.create_state_machine(name="m", definition=PASS, roleArn=ROLE_ARN)["stateMachineArn"]
                    for sfn in (flooding, steady)]
        throttled = {"flood": 0, "calm": 0}

        def start(sfn, machine: str, side: str, count: int) -> None:
            for _ in range(count):
                try:
                    sfn.start_execution(stateMachineArn=machine)
                except sfn.exceptions.ClientError as error:
                    assert error.response["Error"]["Code"] == "ThrottlingException"
                    throttled[side] += 1

        threads = [threading.Thread(target=start, args=(flooding, machines[0], "flood", 20)) for _ in range(48)]
        threads.append(threading.Thread(target=start, args=(steady, machines[1], "calm", 100)))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert throttled["calm"] == 0  # one call at a time never overflows its own account's queue
        assert throttled["flood"] > 0, "48 callers at once overflow a queue of one"
    finally:
        process.stop()
