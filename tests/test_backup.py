"""statewright backup and restore: a SQLite data directory copied while its server serves it, put back into an
empty one, and served again: every execution started before the backup is there and runs to its end."""

import json
import subprocess
import sys
import threading

from server import ROLE_ARN, ServerProcess, wait_closed

NAP = {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 2, "Next": "P"},
                                  "P": {"Type": "Pass", "Result": "woke", "ResultPath": "$.r", "End": True}}}


def statewright(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "statewright", *args], capture_output=True, text=True, timeout=120)


def test_a_backup_taken_while_serving_restores_every_execution_started_before_it(tmp_path):
    server = ServerProcess(tmp_path / "live").start()
    sfn = server.client()
    machine = sfn.create_state_machine(name="nap", definition=json.dumps(NAP), roleArn=ROLE_ARN)["stateMachineArn"]
    before = [sfn.start_execution(stateMachineArn=machine, input=json.dumps({"n": n}))["executionArn"]
              for n in range(20)]
    stop = threading.Event()

    def trickle() -> None:  # the server keeps committing while the backup is taken
        writer = server.client()
        while not stop.is_set():
            writer.start_execution(stateMachineArn=machine, input="{}")

    writing = threading.Thread(target=trickle)
    writing.start()
    try:
        taken = statewright("backup", "--data-dir", str(tmp_path / "live"), "--to", str(tmp_path / "saved"))
    finally:
        stop.set()
        writing.join()
        server.stop()
    assert taken.returncode == 0, taken.stderr
    assert taken.stdout.startswith(f"statewright: backed up {tmp_path / 'live'} to {tmp_path / 'saved'}")

    put_back = statewright("restore", "--from", str(tmp_path / "saved"), "--data-dir", str(tmp_path / "again"))
    assert put_back.returncode == 0, put_back.stderr
    restored = ServerProcess(tmp_path / "again").start()
    try:
        again = restored.client()
        assert again.describe_state_machine(stateMachineArn=machine)["name"] == "nap"
        for arn in before:  # started before the backup: there, and woken on time after the restore
            described = wait_closed(again, arn, 30)
            assert described["status"] == "SUCCEEDED" and json.loads(described["output"])["r"] == "woke"
        listed = again.list_executions(stateMachineArn=machine, maxResults=1000)["executions"]
        assert {item["executionArn"] for item in listed} >= set(before)
    finally:
        restored.stop()


def test_backup_and_restore_refuse_what_would_lose_data(tmp_path):
    server = ServerProcess(tmp_path / "live").start()
    try:
        (tmp_path / "full").mkdir()
        (tmp_path / "full" / "something").write_text("x")
        refused = statewright("backup", "--data-dir", str(tmp_path / "live"), "--to", str(tmp_path / "full"))
        assert refused.returncode == 1 and "is not empty: back up into a new directory" in refused.stderr
        assert statewright("backup", "--data-dir", str(tmp_path / "live"), "--to",
                           str(tmp_path / "saved")).returncode == 0
        serving = statewright("restore", "--from", str(tmp_path / "saved"), "--data-dir", str(tmp_path / "live"))
        assert serving.returncode == 1 and "another statewright process is serving" in serving.stderr
    finally:
        server.stop()
    holding = statewright("restore", "--from", str(tmp_path / "saved"), "--data-dir", str(tmp_path / "live"))
    assert holding.returncode == 1 and "holds data already: restore into an empty --data-dir" in holding.stderr
    nothing = statewright("backup", "--data-dir", str(tmp_path / "nowhere"), "--to", str(tmp_path / "x"))
    assert nothing.returncode == 1 and "no statewright data in" in nothing.stderr
