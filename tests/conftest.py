from __future__ import annotations

import json
import os
import random
import shutil
import time
import uuid
from collections.abc import Generator, Iterator
from urllib.parse import urlsplit

import hypothesis
import psycopg
import pytest
from psycopg import sql

from aws import ACCOUNT, LocalFunction, server_env, start_moto
from postgres import POSTGRES, create_schema
from server import ROLE_ARN, ServerProcess

# -- the suite on parallel workers (./dev test runs pytest-xdist with --dist loadgroup)

# Hypothesis draws the same examples every run (CI's and a developer's alike); no deadline, since a busy machine
# is not a failure; no example database, which parallel workers would share. HYPOTHESIS_PROFILE=explore draws new
# examples each run, to look for bugs on purpose.
hypothesis.settings.register_profile("ci", derandomize=True, deadline=None, database=None)
hypothesis.settings.register_profile("explore", deadline=None, database=None)
hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# The tiers: a test is slow (not in the fast tier, ./dev test -m "not slow") when its module says so (pytestmark)
# or when it uses one of these fixtures: a real server process, moto, PostgreSQL.
SERVER_FIXTURES = {"server", "sfn", "make_machine", "aws_server", "moto", "functions", "postgres_database",
                   "postgres_schema", "statewright_server"}
# The modules whose tests take longest, run first in this order (then the other slow tests, then the fast tier), so
# that no worker is left with a long test when the others are done.
LONGEST_FIRST = ("test_simulator.py", "test_cluster_processes.py", "test_crash_safety.py", "test_retention.py",
                 "test_retention_redrive.py", "test_task_crash.py", "test_api_versions.py", "test_heavy_lane.py",
                 "test_retention_postgresql.py", "test_virtual_clock.py", "test_serve_postgresql.py")


@pytest.hookimpl(tryfirst=True)  # before -m selects by the marks, and before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tiers' marks; groups for xdist (one per module for the tests that share a module-scoped fixture, so
    that the fixture is built once, not on every worker); the longest tests first. Each worker has a PostgreSQL
    database of its own (postgres_database), so the PostgreSQL tests, which watch and end sessions of their
    database, run beside each other."""
    for item in items:
        if SERVER_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)
        group = None
        if "aws_server" in item.fixturenames:
            group = "aws-server"  # one worker: one moto, one server on it, not three idle copies
        if group is None and _uses_module_fixture(item):
            group = f"module-fixture:{item.path.name}"
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=_running_order)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under --dist loadgroup a grouped test's id carries its group, or the groups silently split (pytest 9.2 with
    pytest-xdist 3.8 did: module fixtures were built on both workers and waited on answers sent to the other)."""
    grouped = item.config.getoption("dist", None) == "loadgroup" and item.get_closest_marker("xdist_group")
    if grouped and "@" not in item.nodeid:
        pytest.fail("--dist loadgroup did not group this test: check the pytest and pytest-xdist versions against "
                    "pyproject.toml", pytrace=False)


def _running_order(item: pytest.Item) -> tuple[int, int]:
    longest = LONGEST_FIRST.index(item.path.name) if item.path.name in LONGEST_FIRST else len(LONGEST_FIRST)
    return item.get_closest_marker("slow") is None, longest


def _uses_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(definitions[-1].scope == "module"
                                    for definitions in info.name2fixturedefs.values() if definitions)


# -- randomised crash tests: a failure prints its seed and the command that runs it again on that seed

CRASH_SEED_ENV = "STATEWRIGHT_CRASH_SEED"
_crash_seed = pytest.StashKey[int]()


@pytest.fixture
def crash_seed(request: pytest.FixtureRequest) -> int:
    """The seed of a randomised crash test's draws: $STATEWRIGHT_CRASH_SEED, or a new one. (Thread interleavings
    and kill moments still vary, so a replay is a strong hint, not a guarantee.)"""
    seed = int(os.environ.get(CRASH_SEED_ENV) or random.SystemRandom().randrange(1 << 32))
    request.node.stash[_crash_seed] = seed
    return seed


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                               call: pytest.CallInfo) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    seed = item.stash.get(_crash_seed, None)
    if seed is not None and report.failed:
        report.sections.append(("crash seed", f"{CRASH_SEED_ENV}={seed}; to run it again on this seed:\n"
                                              f"{CRASH_SEED_ENV}={seed} ./dev test -n 0 '{item.nodeid}'"))
    return report


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """One real server process shared by the API tests."""
    process = ServerProcess(tmp_path_factory.mktemp("server") / "data").start()
    yield process
    process.stop()


@pytest.fixture
def sfn(server):
    return server.client()


@pytest.fixture
def make_machine(sfn):
    """Create a state machine with a unique name from a definition dict; returns its ARN."""

    def make(definition: dict, name: str | None = None) -> str:
        name = name or f"sm-{uuid.uuid4().hex[:12]}"
        return sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=ROLE_ARN)[
            "stateMachineArn"]

    return make


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """A fresh database on the test PostgreSQL for this run, dropped at the end; its URL. No PostgreSQL is a
    failure, not a skip: the PostgreSQL store is part of what the suite checks."""
    try:
        admin = psycopg.connect(POSTGRES, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise RuntimeError(f"the PostgreSQL tests need a server at {POSTGRES} (set STATEWRIGHT_TEST_POSTGRES): "
                           f"{exc}") from exc
    name = f"statewright_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlsplit(POSTGRES)._replace(path=f"/{name}").geturl()
    finally:
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.close()


@pytest.fixture
def postgres_schema(postgres_database: str) -> str:
    """The URL of an empty schema of its own in the run's database (a fresh store per test, cheaply)."""
    return create_schema(postgres_database)


def _function_answer(path: str, payload, number: int) -> tuple[int, object]:
    if path == "/greet":
        return 200, {"greeting": f"hello {payload.get('name')}"}
    if path == "/flaky" and number == 1:
        return 200, {"errorType": "FlakyError", "errorMessage": "first call fails", "stackTrace": []}
    if path == "/flaky":
        return 200, {"ok": number}
    if path == "/broken":
        return 500, {"message": "the handler crashed"}
    if path == "/slow":
        time.sleep(2)
        return 200, {"slow": True}
    if path == "/unmarshalable":
        return 200, b"{not json"
    return 200, payload  # /legacy echoes


@pytest.fixture(scope="session")
def moto():
    """moto's server, the AWS endpoint of the tests that call AWS; its URL."""
    server, endpoint = start_moto()
    yield endpoint
    server.stop()


@pytest.fixture(scope="session")
def functions():
    local = LocalFunction(_function_answer)
    yield local
    local.close()


@pytest.fixture(scope="session")
def aws_server(tmp_path_factory, moto, functions):
    """A server whose AWS endpoint is moto's, with the functions of _function_answer at local URLs."""
    directory = tmp_path_factory.mktemp("aws")
    mapping = {name: f"{functions.url}/{name}" for name in ("greet", "flaky", "broken", "slow", "unmarshalable")}
    mapping[f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:legacy"] = f"{functions.url}/legacy"
    (directory / "functions.json").write_text(json.dumps(mapping))
    # --wait-scale: a .sync job's polls (and Retry's backoffs) come five times sooner; no test here times them
    process = ServerProcess(directory / "data", extra_args=("--functions", str(directory / "functions.json"),
                                                            "--wait-scale", "0.2"),
                            env=server_env(moto)).start()
    yield process
    process.stop()


CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                  "--disable-background-networking", "--disable-component-update"]


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (Debian's, driven by Playwright), once per module of the console's tests."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "the console's tests need Chromium: `apt-get install chromium` (./dev test installs it)"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    """A fresh page; the test fails if the page raised a JavaScript error."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert errors == [], f"the page raised: {errors}"
