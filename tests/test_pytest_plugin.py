"""The pytest plugin as a user gets it: the README's example test (docs/examples: a day's Wait, a mocked Lambda
retried once, an activity) runs in a pytest process of its own, with nothing but the plugin's fixtures and its
pytest.ini, and passes; a failing test in it fails."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # pytest runs in processes of their own: not in the fast tier

EXAMPLES = Path(__file__).parent.parent / "docs" / "examples"


def run_pytest(directory: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(directory)],
                          capture_output=True, text=True, timeout=300, cwd=directory)


def test_the_readme_example_passes_with_the_plugin_fixtures(tmp_path):
    for name in ("test_approval_workflow.py", "MockConfigFile.json", "pytest.ini"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    run = run_pytest(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


def test_a_workflow_that_does_not_do_what_the_test_says_fails(tmp_path):
    (tmp_path / "test_wrong.py").write_text(
        "def test_a_machine_that_cannot_exist(statewright_sfn):\n"
        "    statewright_sfn.describe_state_machine(\n"
        "        stateMachineArn='arn:aws:states:us-east-1:123456789012:stateMachine:nothing-here')\n")
    run = run_pytest(tmp_path)
    assert run.returncode == 1 and "1 failed" in run.stdout and "StateMachineDoesNotExist" in run.stdout


def test_every_fixture_of_the_plugin_says_what_it_gives(tmp_path):
    listed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--fixtures"],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    for fixture in ("statewright_server", "statewright_sfn", "statewright_clock"):
        entry = listed.stdout.split(fixture, 1)[1].split("\n\n", 1)[0]
        assert "no docstring available" not in entry, entry
