"""The layers of DESIGN.md, enforced: imports point down only, and the pure core does no I/O."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "statewright"

# package -> statewright packages it must not import
# (DESIGN.md: api > integrations > engine > asl, store; the simulator drives the engine from above it)
FORBIDDEN = {
    "asl": {"engine", "store", "api", "cli", "integrations", "sim"},
    "engine": {"api", "cli", "integrations", "sim"},
    "store": {"engine", "api", "asl", "cli", "integrations", "sim"},
    "integrations": {"api", "cli", "sim"},
    # shard leases and membership, below the engine: the API wires them to it
    "cluster": {"engine", "api", "asl", "cli", "integrations", "sim"},
    "sim": {"api", "cli", "integrations"},
    # the worker library runs beside AWS or statewright alike: it needs nothing of the server
    "worker": {"engine", "api", "asl", "store", "integrations", "cli", "metrics", "sim"},
}
# modules that must stay pure: no clock, randomness, threads, files or network
PURE = ["asl", "engine/decider.py", "engine/execution.py", "engine/step.py", "engine/flows.py", "engine/fan_out.py",
        "engine/retry_catch.py", "engine/tasks.py", "engine/jsonpath_states.py", "engine/jsonata_states.py",
        "engine/outcomes.py", "engine/timers.py", "engine/outbox.py", "engine/limits.py", "sim/checkers.py"]
IMPURE_MODULES = {"time", "random", "threading", "socket", "sqlite3", "os", "uuid", "asyncio", "datetime.now"}


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


@pytest.mark.parametrize("target", PURE)
def test_pure_core_does_no_io(target):
    paths = [SRC / target] if target.endswith(".py") else list((SRC / target).rglob("*.py"))
    for path in paths:
        for module in imported_modules(path):
            assert module.split(".")[0] not in IMPURE_MODULES, f"{path.relative_to(SRC)} imports {module}"
