"""The data directory as ``statewright serve`` finds it (issue 14, finding 7): one that cannot be written is a
one-line error saying what to do; a second server on it (its lock file deleted) fences the first for metadata
writes too, not only for the engine's commits."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
from botocore.exceptions import ClientError

from server import ROLE_ARN, ServerProcess, free_port

pytestmark = pytest.mark.slow  # real server processes: not in the fast tier

PASS = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})


def serve(data_dir: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "statewright", "serve", "--port", str(free_port()), "--data-dir",
                           data_dir], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("where", ["under-a-file", "proc"])
def test_a_data_dir_that_cannot_be_created_is_one_line_saying_what_to_do(tmp_path, where):
    # Paths no process can create a directory at, root included (chmod does not stop root).
    (tmp_path / "a-file").write_text("")
    data_dir = str(tmp_path / "a-file" / "data") if where == "under-a-file" else "/proc/statewright-data"
    ran = serve(data_dir)
    assert ran.returncode == 1
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    assert lines[0].startswith(f"statewright: cannot keep data in {data_dir} (")
    assert "pass --data-dir a directory this process can write" in lines[0]


@pytest.fixture
def first_and_second(tmp_path):
    """A server, then a second one on its data directory once the lock file is deleted."""
    first = ServerProcess(tmp_path / "data").start()
    second = ServerProcess(tmp_path / "data")
    try:
        machine = first.client().create_state_machine(name="kept", definition=PASS, roleArn=ROLE_ARN)
        (tmp_path / "data" / "lock").unlink()
        second.start()
        # Its socket listens before its engine has taken the shards; it answers once it has (the fencing is done).
        second.client().list_state_machines()
        yield first, second, machine["stateMachineArn"]
    finally:
        second.stop()
        first.stop()


def refused_as_unavailable(call, **params) -> bool:
    with pytest.raises(ClientError) as raised:
        call(**params)
    return (raised.value.response["ResponseMetadata"]["HTTPStatusCode"], raised.value.response["Error"]["Code"]) == (
        503, "ServiceUnavailable")


def test_the_fenced_server_writes_no_metadata(first_and_second):
    first, second, machine = first_and_second
    fenced = first.client()
    name = f"late-{uuid.uuid4().hex[:8]}"
    assert refused_as_unavailable(fenced.create_state_machine, name=name, definition=PASS, roleArn=ROLE_ARN)
    assert refused_as_unavailable(fenced.tag_resource, resourceArn=machine, tags=[{"key": "team", "value": "a"}])
    assert refused_as_unavailable(fenced.update_state_machine, stateMachineArn=machine, definition=PASS.replace(
        '"P"', '"Q"'))
    assert refused_as_unavailable(fenced.create_activity, name=name)
    assert refused_as_unavailable(fenced.delete_state_machine, stateMachineArn=machine)
    serving = second.client()
    assert [m["name"] for m in serving.list_state_machines()["stateMachines"]] == ["kept"]
    assert serving.describe_state_machine(stateMachineArn=machine)["definition"] == PASS
    assert serving.list_tags_for_resource(resourceArn=machine)["tags"] == []
    assert serving.list_activities()["activities"] == []
    serving.tag_resource(resourceArn=machine, tags=[{"key": "team", "value": "b"}])  # the new server writes
    assert serving.list_tags_for_resource(resourceArn=machine)["tags"] == [{"key": "team", "value": "b"}]
