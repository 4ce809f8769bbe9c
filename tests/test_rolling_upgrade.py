"""A rolling upgrade on real processes: a cluster of nodes of the previous release (the code of PREVIOUS_RELEASE, run
from its own source tree) and of this one, under a mixed workload, upgraded one node at a time.

The previous release assigns shards by rule 1 (equal shares) and records no rule; this one speaks rule 2 (shares by
``--shard-weight``). While any node of the previous release is live every node assigns by rule 1, so the two agree;
once the last one is gone rule 2 takes effect and the shards move to their weighted owners through the usual
hand-over. Likewise the new nodes write whole state blobs, as the previous release reads them, until its last node
is gone. Every acknowledged execution completes exactly once with its expected output: the rolling restart of
every node of a cluster under a trickle of work."""

from __future__ import annotations

import io
import subprocess
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster_harness import FINISH_S, Cluster, Workload

pytestmark = pytest.mark.slow  # three real nodes on PostgreSQL: not in the fast tier

# main as the previous session left it: nodes that record no assignment rule (rule 1) and read no weight
PREVIOUS_RELEASE = "ec6a30383d9deeef2a6e322d0224930515ef7c23"
ROOT = Path(__file__).resolve().parent.parent
WEIGHTS = {0: 1, 1: 1, 2: 3}  # this release's weights: node 2 holds about three shares once rule 2 is in use


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory) -> Path:
    """The previous release's source tree, from this repository's history."""
    archived = subprocess.run(["git", "-C", str(ROOT), "archive", PREVIOUS_RELEASE, "src"], capture_output=True)
    assert archived.returncode == 0, (f"the previous release {PREVIOUS_RELEASE} is not in this clone's history "
                                      f"(a shallow clone?): {archived.stderr.decode()}")
    where = tmp_path_factory.mktemp("previous-release")
    with tarfile.open(fileobj=io.BytesIO(archived.stdout)) as tree:
        tree.extractall(where, filter="data")
    return where / "src"


@pytest.fixture
def cluster(tmp_path, postgres_schema, previous_release) -> Iterator[Cluster]:
    nodes = Cluster(tmp_path, postgres_schema)
    for index in (0, 1):
        nodes.nodes[index].env = {"PYTHONPATH": str(previous_release)}
    _upgraded(nodes, 2)
    # The previous release's nodes first: the new one migrates the schema, which the previous release then refuses
    # to open (it would refuse any newer schema), though its running nodes go on with it
    for index in (0, 1, 2):
        nodes.nodes[index].start()
    nodes.up = {0, 1, 2}
    yield nodes
    nodes.close()


def _upgraded(cluster: Cluster, index: int) -> None:
    node = cluster.nodes[index]
    node.env = {}
    node.extra_args = (*node.extra_args, "--shard-weight", str(WEIGHTS[index]))


def test_a_mixed_version_cluster_upgraded_one_node_at_a_time_loses_and_doubles_nothing(cluster):
    equal = cluster.expected_owned({0, 1, 2})  # rule 1: a node of the previous release is live
    assert cluster.wait_for_assignment(expected=equal) == equal
    load = Workload(cluster)
    try:
        enough = threading.Event()
        run = load.trickle(10_000, pause_s=0.1, until=enough)
        # node 1 is the last of the previous release; node 2, of this one, is restarted too: every node once
        for index, rule_after_stop, rule in ((0, 1, 1), (1, 2, 2), (2, 2, 2)):
            load.wait_started(len(load.acknowledged) + 5)
            cluster.up.discard(index)
            cluster.nodes[index].stop()  # SIGTERM: it drains and hands its shards over
            live = set(cluster.up)
            cluster.wait_for_assignment(expected=cluster.expected_owned(live, WEIGHTS, rule_after_stop))
            if index != 2:
                _upgraded(cluster, index)
            cluster.nodes[index].start()
            cluster.up.add(index)
            cluster.wait_for_assignment(expected=cluster.expected_owned({0, 1, 2}, WEIGHTS, rule))
        load.wait_started(len(load.acknowledged) + 5)
        enough.set()
        run.join(FINISH_S)
        load.check()
        assert len(load.acknowledged) >= 20
    finally:
        load.close()
    weighted = cluster.expected_owned({0, 1, 2}, WEIGHTS, 2)
    assert weighted != equal and weighted[2] > max(weighted[0], weighted[1])  # rule 2 did move shards
    log = cluster.nodes[2].log_path.read_text()
    assert "assigning shards by rule 1" in log and "assigning shards by rule 2" in log
    # leaner rows only once no node of the previous release (which reads whole state blobs only) was live
    assert "writing storage format 1" in log and "writing storage format 2" in log
    for index in (0, 1):  # each started as the previous release (which names no rule), then as this one
        starts = [line for line in cluster.nodes[index].log_path.read_text().splitlines() if "cluster node" in line]
        assert ["assignment rule" in line for line in starts] == [False, True]
