"""An account's rate buckets on a cluster: two real nodes on the test PostgreSQL, each keeping half of every bucket
and of its refill (1/N of N live nodes), so the cluster as a whole lets an account through at its bucket's rate,
whichever nodes its calls reach. Bounds only: what each node and the cluster accepted, against the bucket's size
and refill over the time measured; nothing asserts a duration."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import boto3
import pytest
from botocore.config import Config

from cluster_harness import Cluster
from server import ROLE_ARN

pytestmark = pytest.mark.slow  # real nodes on PostgreSQL: not in the fast tier

ACCOUNT, KEY, SECRET = "444444444444", "AKIABUCKETS00000001", "buckets-secret"
BUCKET, REFILL = 40, 4  # StartExecution: 40 tokens, 4 more a second, for the whole cluster


@pytest.fixture
def cluster(tmp_path, postgres_schema) -> Iterator[Cluster]:
    accounts = tmp_path / "accounts.json"
    accounts.write_text(json.dumps({"accounts": [{
        "accountId": ACCOUNT, "keys": [{"accessKeyId": KEY, "secretAccessKey": SECRET}],
        "limits": {"rate.StartExecution": f"{BUCKET}/{REFILL}"}}]}))
    nodes = Cluster(tmp_path, postgres_schema, size=2)
    for node in nodes.nodes:
        node.extra_args = (*node.extra_args, "--auth", "sigv4", "--accounts", str(accounts), "--limits", "aws")
    nodes.start()
    yield nodes
    nodes.close()


def signed(endpoint: str):
    return boto3.client("stepfunctions", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=KEY,
                        aws_secret_access_key=SECRET, config=Config(retries={"max_attempts": 0}))


def flood(sfn, machine: str) -> tuple[int, float]:
    """StartExecution until the bucket has refused five in a row: (accepted, seconds it took)."""
    accepted = refused_in_a_row = 0
    began = time.monotonic()
    while refused_in_a_row < 5:
        try:
            sfn.start_execution(stateMachineArn=machine)
            accepted, refused_in_a_row = accepted + 1, 0
        except sfn.exceptions.ClientError as error:
            assert error.response["Error"]["Code"] == "ThrottlingException"
            refused_in_a_row += 1
    return accepted, time.monotonic() - began


def test_each_node_keeps_its_share_of_an_accounts_bucket_so_the_cluster_holds_to_the_whole(cluster):
    first, second = (signed(node.endpoint) for node in cluster.nodes)
    machine = first.create_state_machine(name="flooded", roleArn=ROLE_ARN, definition=json.dumps(
        {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}))["stateMachineArn"]
    share, share_refill = BUCKET / 2, REFILL / 2
    accepted_first, seconds_first = flood(first, machine)
    # One node lets through its half of the bucket (and of what refilled meanwhile), not the whole
    assert share <= accepted_first <= share + share_refill * seconds_first + 1
    accepted_second, seconds_second = flood(second, machine)
    # The other node's half was still whole: the two together hold to the cluster's one bucket
    assert share <= accepted_second <= share + share_refill * (seconds_first + seconds_second) + 1
    assert accepted_first + accepted_second <= BUCKET + REFILL * (seconds_first + seconds_second) + 2
