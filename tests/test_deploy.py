"""deploy/: the Grafana dashboard and the Prometheus alerting rules name only metrics a node serves."""

import json
import re
import urllib.request
from pathlib import Path

import yaml

from server import ServerProcess

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
SUFFIXES = ("_total", "_bucket", "_sum", "_count")


def named(text: str) -> set[str]:
    """The metric families an expression names (a counter's samples end in _total, a histogram's in _bucket ...)."""
    names = set()
    for name in re.findall(r"statewright_[a-z_]+", text):
        for suffix in SUFFIXES:
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        names.add(name)
    return names


def test_every_metric_the_dashboard_and_the_alerts_name_is_served(tmp_path):
    dashboard = json.loads((DEPLOY / "grafana" / "statewright.json").read_text())
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    alerts = [rule for group in rules["groups"] for rule in group["rules"]]
    assert all({"alert", "expr", "annotations"} <= rule.keys() for rule in alerts)
    wanted = named(" ".join(expressions)) | named(" ".join(rule["expr"] for rule in alerts))
    server = ServerProcess(tmp_path / "data").start()
    try:
        with urllib.request.urlopen(f"{server.endpoint}/metrics", timeout=10) as response:
            served = named(" ".join(re.findall(r"^# TYPE (statewright_[a-z_]+) ", response.read().decode(),
                                               re.MULTILINE)))
    finally:
        server.stop()
    assert wanted and wanted <= served, sorted(wanted - served)
