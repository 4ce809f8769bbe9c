"""A node's log as an operator reads it: one line per event, as text or as JSON lines with stable keys."""

import json

from server import ServerProcess, free_port
from statewright.testing import StatewrightServer


def test_json_lines_carry_each_event_with_stable_keys(tmp_path):
    server = ServerProcess(tmp_path / "data", extra_args=("--log-format", "json", "--log-level", "info")).start()
    sfn = server.client()
    sfn.list_state_machines()
    server.stop()
    lines = [json.loads(line) for line in server.log_path.read_text().splitlines() if line.strip()]
    events = {line.get("event"): line for line in lines}
    assert {"store", "retention", "limits", "serving", "stopping", "stopped"} <= events.keys(), lines
    for line in lines:
        assert {"time", "level", "logger", "message"} <= line.keys() and line["time"].endswith("Z")
    assert events["serving"]["url"] == server.endpoint and events["serving"]["level"] == "INFO"
    assert events["store"]["message"].startswith("data in ") and events["store"]["shards"] == 8


def test_text_lines_say_the_same_and_a_level_leaves_out_what_is_below_it(tmp_path):
    server = StatewrightServer(tmp_path / "data", 8, ("--log-level", "warning"), free_port()).start()  # no marker
    server.stop()
    assert "serving the Step Functions API" not in server.log_path.read_text()  # INFO, below WARNING
    server = ServerProcess(tmp_path / "again").start()
    server.stop()
    text = server.log_path.read_text()
    assert " INFO statewright: serving the Step Functions API on " in text and "stopped: " in text
