"""The layers of DESIGN.md, enforced: imports point down only, and the pure core does no I/O."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "statewright"

# package -> statewright packages it must not import
# (DESIGN.md: node.py > api > integrations > cluster > engine > decider > asl, store; the simulator drives the engine
# from above it)
FORBIDDEN = {
    "asl": {"decider", "engine", "store", "api", "cli", "integrations", "sim", "cluster", "metrics"},
    # the decider imports only asl/ and itself
    "decider": {"engine", "store", "api", "cli", "integrations", "sim", "cluster", "metrics", "worker", "testing"},
    "engine": {"api", "cli", "integrations", "sim", "cluster"},
    "store": {"engine", "api", "asl", "cli", "integrations", "sim", "cluster"},
    # shard leases, membership, forwarding and the node channel: above the engine, below the API
    "cluster": {"api", "asl", "cli", "integrations", "sim"},
    "integrations": {"api", "cli", "sim"},
    # the AWS protocol: node.py wires it, the CLI and the tests run it
    "api": {"cli", "sim", "testing"},
    # the web console: below the API (which routes a browser's GETs to it); its page reads through the public API
    "console": {"api", "cli", "sim", "testing"},
    "sim": {"api", "cli", "integrations"},
    # the worker library runs beside AWS or statewright alike: it needs nothing of the server
    "worker": {"engine", "api", "asl", "store", "integrations", "cli", "metrics", "sim", "cluster"},
}
# node.py wires a node from every layer; only the entry points above it build one through it
NODE_IMPORTERS = {"cli.py", "testing", "sim"}
# modules that must stay pure: no clock, randomness, threads, files or network
PURE = ["asl", "decider", "engine/timers.py", "engine/outbox.py", "engine/limits.py", "engine/routing.py",
        "engine/scheduler.py", "sim/checkers.py"]
IMPURE_MODULES = {"time", "random", "secrets", "threading", "multiprocessing", "subprocess", "socket", "sqlite3",
                  "psycopg", "os", "pathlib", "shutil", "tempfile", "uuid", "asyncio", "concurrent", "urllib", "http",
                  "botocore", "boto3", "logging"}
# reading the clock or the system's randomness through a module that is otherwise pure (datetime.now(), ...)
IMPURE_CALLS = {"now", "utcnow", "today", "urandom", "getrandbits", "time_ns", "perf_counter", "monotonic"}


def impure_calls(path: Path) -> list[str]:
    """Calls such as ``datetime.now()`` or ``date.today()``: the clock, read without importing ``time``."""
    tree = ast.parse(path.read_text())
    return [f"{ast.unparse(node.func)}() at line {node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in IMPURE_CALLS]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import: resolve against the file's package
                package = path.parent.relative_to(SRC).parts
                package = package[: len(package) - (node.level - 1)]
                base = ".".join(("statewright", *package, *([base] if base else [])))
            found.add(base)
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_down_only(package):
    for path in (SRC / package).rglob("*.py"):
        for module in imported_modules(path):
            parts = module.split(".")
            if parts[0] == "statewright" and len(parts) > 1:
                assert parts[1] not in FORBIDDEN[package], f"{path.relative_to(SRC)} imports {module}"


def test_only_the_entry_points_import_node():
    for path in SRC.rglob("*.py"):
        if path.relative_to(SRC).parts[0] not in NODE_IMPORTERS:
            imported = {module for module in imported_modules(path) if module.startswith("statewright.node")}
            assert not imported, f"{path.relative_to(SRC)} imports {imported}"


@pytest.mark.parametrize("target", PURE)
def test_pure_core_does_no_io(target):
    paths = [SRC / target] if target.endswith(".py") else list((SRC / target).rglob("*.py"))
    for path in paths:
        for module in imported_modules(path):
            assert module.split(".")[0] not in IMPURE_MODULES, f"{path.relative_to(SRC)} imports {module}"
        assert not impure_calls(path), f"{path.relative_to(SRC)} reads the clock: {impure_calls(path)}"


def test_the_purity_check_catches_a_clock_read(tmp_path):
    """The check above can fail: an import of time and a datetime.now() call are both caught."""
    module = tmp_path / "clocked.py"
    module.write_text("import time\nfrom datetime import datetime\nstamp = datetime.now()\n")
    assert "time" in imported_modules(module)
    assert impure_calls(module) == ["datetime.now() at line 3"]
