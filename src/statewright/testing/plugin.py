"""The pytest plugin (registered as ``statewright`` by ``pip install statewright[testing]``): one real statewright
server per test session on the virtual clock, and fixtures to reach it.

- ``statewright_server``: the session's StatewrightServer (``--clock virtual``, a temporary data directory; a mock
  configuration from the ``statewright_mock_config`` ini setting, a path from the rootdir; more ``statewright
  serve`` options from ``statewright_serve_args``).
- ``statewright_sfn``: a boto3 Step Functions client pointed at it.
- ``statewright_clock``: its clock: ``advance("1d")`` fires every timer the day passes; ``now()``.

The clock is the session's: advancing it in one test moves it for the tests after (it never goes back), which a
test that measures time from its own start does not notice.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from typing import Any

import pytest

from .server import StatewrightServer


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("statewright_serve_args", "more `statewright serve` options for the statewright_server fixture",
                  default="")
    parser.addini("statewright_mock_config", "a MockConfigFile.json for the statewright_server fixture (a path from "
                                             "the rootdir): executions started on ARN#TestCase run on its mocks",
                  default="")


@pytest.fixture(scope="session")
def statewright_server(request: pytest.FixtureRequest,
                       tmp_path_factory: pytest.TempPathFactory) -> Iterator[StatewrightServer]:
    """The session's statewright server on the virtual clock, in a temporary data directory (ini settings:
    statewright_serve_args, statewright_mock_config); .endpoint, .client(), .kill(), .start()."""
    extra = tuple(shlex.split(request.config.getini("statewright_serve_args")))
    mock_config = request.config.getini("statewright_mock_config")
    if mock_config:
        extra += ("--mock-config", str(request.config.rootpath / mock_config))
    server = StatewrightServer(tmp_path_factory.mktemp("statewright") / "data",
                               extra_args=("--clock", "virtual", *extra)).start()
    yield server
    server.stop()


@pytest.fixture
def statewright_sfn(statewright_server: StatewrightServer) -> Any:
    """A boto3 Step Functions client pointed at the session's server (no retries, no host prefix)."""
    return statewright_server.client()


@pytest.fixture
def statewright_clock(statewright_server: StatewrightServer) -> StatewrightServer:
    """The session server's virtual clock: advance("1d") fires every timer the span passes; now() in epoch
    seconds. It only goes forward, for the whole session."""
    return statewright_server  # advance() and now() are the server's
