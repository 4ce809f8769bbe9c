"""``statewright serve`` options for the limits a user tunes: parsed into Limits, and in force in the server."""

from __future__ import annotations

import json
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from server import ROLE_ARN, ServerProcess
from statewright import cli
from statewright.engine.limits import Limits
from statewright.node import ServerConfig

pytestmark = pytest.mark.slow  # a real server process: not in the fast tier


def test_serve_options_build_the_limits(monkeypatch):
    served: list[ServerConfig] = []
    monkeypatch.setattr(cli, "serve", lambda config: served.append(config) or 0)
    assert cli.main(["serve", "--inbox-commands-max", "5", "--http-calls-concurrent-max", "3",
                     "--activity-backlog-tasks-max", "7"]) == 0
    assert served[0].limits == Limits(inbox_commands_max=5, http_calls_concurrent_max=3,
                                      activity_backlog_tasks_max=7)
    cli.main(["serve"])
    assert served[1].limits == Limits()


@pytest.mark.parametrize("value", ["0", "-1", "many"])
def test_a_limit_must_be_a_positive_whole_number(value, capsys):
    with pytest.raises(SystemExit):
        cli.main(["serve", "--http-calls-concurrent-max", value])
    assert "--http-calls-concurrent-max" in capsys.readouterr().err


def test_the_activity_backlog_limit_holds_in_a_served_server(tmp_path):
    own = ServerProcess(tmp_path / "data", shards=2, extra_args=("--activity-backlog-tasks-max", "1")).start()
    try:
        sfn = own.client()
        activity = sfn.create_activity(name="unpolled")["activityArn"]
        machine = sfn.create_state_machine(name="task", roleArn=ROLE_ARN, definition=json.dumps(
            {"StartAt": "T", "States": {"T": {"Type": "Task", "Resource": activity, "End": True}}}))
        runs = [sfn.start_execution(stateMachineArn=machine["stateMachineArn"])["executionArn"] for _ in range(3)]
        assert backlog(own.endpoint) == 1  # the other two tasks wait in the outbox only
        for run in runs:
            sfn.stop_execution(executionArn=run)
    finally:
        own.stop()


def backlog(endpoint: str) -> float:
    with urllib.request.urlopen(f"{endpoint}/metrics", timeout=10) as response:
        text = response.read().decode()
    family = next(f for f in text_string_to_metric_families(text) if f.name == "statewright_activity_backlog_tasks")
    return family.samples[0].value
