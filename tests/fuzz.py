"""Fuzzed requests for every operation of botocore's Step Functions model, and what their answers must show: no
5xx, every error in AWS's shape (``__type`` and ``message``), and no refused request leaving a write behind.

Requests start from a valid one (members drawn from the model's shapes, names and ARNs of a few real resources)
and are then broken one way each: a member missing, null, of the wrong type, nested thousands deep, huge, full of
control characters and unicode, the JSON body mutated byte by byte, or the X-Amz-Target header mangled. A
``grammar`` request carries a definition generated from the language's grammar (the simulator's generator: every
state type, JSONPath and JSONata, intrinsics, variables, Retry and Catch, Parallel and Map), valid or broken
subtly in one place (a field missing, of the wrong type or unknown, a path, expression or intrinsic cut short, a
Next to nowhere), to ValidateStateMachineDefinition, CreateStateMachine or TestState (with a generated input).

Every answer is timed: ``./dev fuzz`` fails on one slower than a second (the suite reports nothing of time). A
request that once broke a rule is kept in ``fuzz_regressions.jsonl`` (``./dev fuzz --keep`` adds them), which the
suite replays.

``tests/test_fuzz.py`` runs a fixed seed in the suite; ``./dev fuzz`` (this file as a script) runs a long one
against a fresh server and prints the counts. The machines the fuzz starts are Pass and Choice machines: deep
input into a machine that waits is the engine's stored-state limit (issue 14, finding 3), not the API's.
GetActivityTask never names a real activity, which would hold the request for its 60-second long poll.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statewright.api.model import service_model

REGION, ACCOUNT = "us-east-1", "123456789012"
ARN = f"arn:aws:states:{REGION}:{ACCOUNT}"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/fuzz"
MACHINE, ACTIVITY = "fuzz-machine", "fuzz-activity"
MACHINE_ARN, ACTIVITY_ARN = f"{ARN}:stateMachine:{MACHINE}", f"{ARN}:activity:{ACTIVITY}"
EXECUTION_ARN = f"{ARN}:execution:{MACHINE}:first"
DEFINITIONS = [
    {"StartAt": "P", "States": {"P": {"Type": "Pass", "Result": {"a": 1}, "ResultPath": "$.r", "End": True}}},
    {"StartAt": "C", "States": {"C": {"Type": "Choice", "Choices": [
        {"Variable": "$.n", "NumericGreaterThan": 1, "Next": "Y"}], "Default": "N"},
        "Y": {"Type": "Succeed"}, "N": {"Type": "Fail", "Error": "E", "Cause": "c"}}},
    {"QueryLanguage": "JSONata", "StartAt": "J", "States": {"J": {"Type": "Pass", "Output": "{% $states.input %}",
                                                                  "End": True}}},
    {"StartAt": "M", "States": {"M": {"Type": "Map", "ItemsPath": "$.items", "ItemProcessor": {
        "StartAt": "I", "States": {"I": {"Type": "Pass", "End": True}}}, "End": True}}},
]
STATE = {"Type": "Pass", "Parameters": {"x.$": "$.x"}, "End": True}
STRANGE = ["\x00", "\x01\x02", "\u202e", "\ufeff", "😀" * 3, "\ud800", "\udfff", "\u0000\u001f", "a\r\nb", "%00",
           "'\"", "<>{}[]", "\\", "$.x", "{% 1 %}", "名前", "\uffff"]
HUGE_LENGTHS = [1_000, 40_000, 300_000]
KINDS = ["valid", "missing", "null", "wrong_type", "deep", "huge", "strange", "mutated_body", "target", "grammar",
         "grammar"]
GRAMMAR_OPERATIONS = ["ValidateStateMachineDefinition", "CreateStateMachine", "TestState"]
SLOW_S = 1.0  # an answer slower than this breaks ./dev fuzz's rule
REGRESSIONS = Path(__file__).resolve().parent / "fuzz_regressions.jsonl"


@dataclass(frozen=True, slots=True)
class Request:
    operation: str  # the operation meant (the target header may say something else)
    kind: str
    target: str
    body: bytes
    params: dict | None  # None when the body is not the JSON of a dict any more


@dataclass(slots=True)
class Report:
    counts: Counter = field(default_factory=Counter)  # (operation, status)
    failures: list[str] = field(default_factory=list)  # what broke a rule, with the request
    broken: list[Request] = field(default_factory=list)  # the requests that broke one (to keep)
    slowest: dict = field(default_factory=dict)  # operation -> its slowest answer, s
    slow: list[str] = field(default_factory=list)  # answers slower than SLOW_S

    def by_status(self) -> Counter:
        totals: Counter = Counter()
        for (_, status), count in self.counts.items():
            totals[status] += count
        return totals

    def render(self) -> str:
        statuses = sorted(self.by_status(), key=str)
        lines = [f"{'operation':34}" + "".join(f"{status!s:>8}" for status in statuses)]
        for operation in sorted({operation for operation, _ in self.counts}):
            lines.append(f"{operation:34}" + "".join(f"{self.counts[operation, status]:8}" for status in statuses))
        lines.append(f"{'all':34}" + "".join(f"{self.by_status()[status]:8}" for status in statuses))
        lines.append("slowest answer by operation, ms: " + ", ".join(
            f"{operation} {seconds * 1000:.0f}" for operation, seconds in sorted(self.slowest.items())))
        return "\n".join(lines)


class Fuzzer:
    """Requests from one seed: the same seed gives the same requests."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.grammar = Grammar(self.random)
        model = service_model()
        self.shapes = model["shapes"]
        self.operations = sorted(model["operations"])
        self.inputs = {name: op.get("input", {}).get("shape") for name, op in model["operations"].items()}

    def request(self) -> Request:
        rnd = self.random
        operation = rnd.choice(self.operations)
        kind = rnd.choice(KINDS)
        if kind == "grammar":
            operation = rnd.choice(GRAMMAR_OPERATIONS)
            params = self.grammar.params(operation)
            return Request(operation, kind, f"AWSStepFunctions.{operation}", json.dumps(params).encode(), params)
        params = self.valid(operation)
        target = f"AWSStepFunctions.{operation}"
        if kind in ("missing", "null", "wrong_type", "deep", "huge", "strange") and params:
            self.break_member(params, kind)
        elif kind == "target":
            target = rnd.choice([f"AWSStepFunctions.{operation}\x00", f"AWSStepFunctions.{operation.lower()}",
                                 "AWSStepFunctions.", f"StepFunctions.{operation}", "AWSStepFunctions.Nope",
                                 # as bytes on the wire; a line break would end the header, not test it
                                 f"AWSStepFunctions.{operation}{rnd.choice(STRANGE)}".replace("\r\n", "").encode(
                                     "utf-8", "surrogatepass").decode("latin-1"),
                                 ""])
        body = json.dumps(params, ensure_ascii=rnd.random() < 0.5).encode("utf-8", "surrogatepass")
        if kind == "mutated_body":
            body = self.mutate(body)
            params = _as_params(body)  # a mutation can leave a valid request, whose writes count as accepted
        return Request(operation, kind, target, body, params)

    # -- valid requests

    def valid(self, operation: str) -> dict:
        shape = self.inputs[operation]
        if shape is None:
            return {}
        params = self.structure(self.shapes[shape], optional_p=0.4)
        params.pop("nextToken", None)  # a made-up token is refused before anything else is looked at
        if "roleArn" in params:
            params["roleArn"] = ROLE
        if "tags" in params:
            params["tags"] = [{"key": f"k{self.random.randint(0, 5)}", "value": "v"}
                              for _ in range(self.random.randint(1, 3))]
        if operation == "GetActivityTask":
            # Another region than every activity the fuzz creates: no mutation of it names a real one.
            params["activityArn"] = f"arn:aws:states:eu-west-1:{ACCOUNT}:activity:{ACTIVITY}"
        elif operation == "TestState" and "stateName" in params:
            machine = self.random.choice(DEFINITIONS)
            params.update(definition=json.dumps(machine), stateName=machine["StartAt"])
        elif operation == "TestState":
            params["definition"] = json.dumps(STATE)
        return params

    def structure(self, shape: dict, optional_p: float) -> dict:
        required = set(shape.get("required", []))
        return {name: self.value(name, self.shapes[spec["shape"]], spec["shape"])
                for name, spec in shape["members"].items() if name in required or self.random.random() < optional_p}

    def value(self, member: str, shape: dict, shape_name: str, depth: int = 0) -> Any:
        rnd, kind = self.random, shape["type"]
        if kind == "structure":
            return self.structure(shape, 0.5) if depth < 4 else {}
        if kind == "list":
            item = self.shapes[shape["member"]["shape"]]
            return [self.value(member, item, shape["member"]["shape"], depth + 1) for _ in range(rnd.randint(0, 3))]
        if kind == "map":
            return {}
        if kind in ("integer", "long"):
            return rnd.randint(shape.get("min", 0), min(shape.get("max", 1000), 1000))
        if kind == "float":
            return rnd.uniform(0, 100)
        if kind == "boolean":
            return rnd.random() < 0.5
        if kind == "timestamp":
            return rnd.randint(1_600_000_000, 1_900_000_000)
        return self.string(member, shape, shape_name)

    def string(self, member: str, shape: dict, shape_name: str) -> str:
        rnd = self.random
        if "enum" in shape:
            return rnd.choice(shape["enum"])
        lowered = member.lower()
        if lowered in ("statemachinearn", "resourcearn", "sourcearn"):
            return rnd.choice([MACHINE_ARN, ACTIVITY_ARN, f"{ARN}:stateMachine:fuzz-{rnd.randint(0, 9)}"])
        if lowered == "activityarn":
            return rnd.choice([ACTIVITY_ARN, f"{ARN}:activity:fuzz-{rnd.randint(0, 9)}"])
        if lowered in ("executionarn", "maprunarn"):
            return rnd.choice([EXECUTION_ARN, f"{ARN}:execution:{MACHINE}:fuzz-{rnd.randint(0, 9)}"])
        if lowered.endswith("arn"):
            return rnd.choice([ROLE, MACHINE_ARN, "arn:aws:states:::http:invoke", "not-an-arn"])
        if lowered == "definition":
            return json.dumps(STATE if rnd.random() < 0.2 else rnd.choice(DEFINITIONS))
        if lowered == "variables":
            return json.dumps({"v": rnd.randint(0, 3)})
        if lowered in ("input", "output"):
            return json.dumps(rnd.choice([{}, {"n": rnd.randint(0, 3), "items": [1, 2], "x": "y"}, [1, "a"], 7]))
        if lowered == "name":
            return f"fuzz-{rnd.randint(0, 50)}"
        if lowered == "tasktoken":
            return "".join(rnd.choice("abcdefghijklmnop0123456789") for _ in range(rnd.randint(1, 80)))
        low, high = shape.get("min", 0), min(shape.get("max", 64), 64)
        return "".join(rnd.choice("abcdefxyz-_0123456789") for _ in range(rnd.randint(low, max(low, high))))

    # -- breaking them

    def break_member(self, params: dict, kind: str) -> None:
        rnd = self.random
        member = rnd.choice(sorted(params))
        if kind == "missing":
            del params[member]
        elif kind == "null":
            params[member] = None
        elif kind == "wrong_type":
            params[member] = rnd.choice([5, -1, 1.5, True, "text", [], {}, [None], {"a": None}, 10**400])
        elif kind == "deep":
            depth = rnd.choice([50, 300, 1_100, 10_000])
            nested = "[" * depth + "]" * depth
            params[member] = nested if isinstance(params[member], str) else json.loads("[" * 500 + "]" * 500)
        elif kind == "huge":
            value = params[member]
            if isinstance(value, str):
                params[member] = value + "x" * rnd.choice(HUGE_LENGTHS)
            elif isinstance(value, list):
                params[member] = value * 2_000 if value else [{}] * 2_000
            else:
                params[member] = rnd.choice([2**63, -(2**63) - 1, 10**30, 1e308])
        elif kind == "strange":
            value = params[member]
            strange = "".join(rnd.choice(STRANGE) for _ in range(rnd.randint(1, 4)))
            params[member] = (value[: len(value) // 2] + strange + value[len(value) // 2:]) if isinstance(
                value, str) else strange

    def mutate(self, body: bytes) -> bytes:
        rnd, data = self.random, bytearray(body)
        for _ in range(rnd.randint(1, 6)):
            position = rnd.randrange(len(data) + 1)
            action = rnd.random()
            if action < 0.4 and position < len(data):
                data[position] = rnd.randrange(256)
            elif action < 0.7:
                data[position:position] = rnd.choice([b"{", b"}", b"[", b'"', b",", b":", b"\\", b"\x00", b"null"])
            else:
                del data[position:position + rnd.randint(1, 8)]
        return bytes(data)


class Grammar:
    """Definitions from the language's grammar (the simulator's generator), valid or broken in one place."""

    BROKEN_TEXT = [("$.", "$.["), ("$.", "$..a["), ("{%", "{% ("), ("%}", ""), ("(", "(("), (")", ""),
                   ("States.", "States.Nope"), ("$states", "$stats"), (".$", ".$$")]

    def __init__(self, rnd: random.Random) -> None:
        self.random = rnd

    def params(self, operation: str) -> dict:
        from statewright.sim import workload  # the generator (statewright's own, importable wherever it runs)

        rnd = self.random
        spec = workload.generate(rnd, [ACTIVITY_ARN], [MACHINE_ARN])
        definition = spec.definition
        if rnd.random() < 0.6:
            definition = self.broken(definition)
        text = json.dumps(definition)
        if operation == "ValidateStateMachineDefinition":
            return {"definition": text, **({"severity": rnd.choice(["ERROR", "WARNING"])} if rnd.random() < 0.3
                                           else {})}
        if operation == "CreateStateMachine":
            return {"name": f"grammar-{rnd.randint(0, 2000)}", "definition": text, "roleArn": ROLE}
        states = sorted(definition.get("States", {})) if isinstance(definition.get("States"), dict) else []
        return {"definition": text, "roleArn": ROLE, "stateName": rnd.choice(states) if states else "Nope",
                "input": json.dumps(workload.generate_input(rnd, spec)),
                "inspectionLevel": rnd.choice(["INFO", "DEBUG", "TRACE"])}

    def broken(self, definition: dict) -> dict:
        """``definition`` with one subtle fault."""
        rnd = self.random
        copy = json.loads(json.dumps(definition))
        places = list(_places(copy))
        container, key = rnd.choice(places)
        value = container[key]
        action = rnd.random()
        if action < 0.25 and isinstance(container, dict):
            del container[key]
        elif action < 0.45:
            container[key] = rnd.choice([None, 7, -1, 2.5, True, "text", [], {}, [1, "a"], 10**20])
        elif action < 0.8 and isinstance(value, str):
            old, new = rnd.choice([pair for pair in self.BROKEN_TEXT if pair[0] in value] or [("", "x")])
            container[key] = value.replace(old, new, 1) if old else value + new
        elif isinstance(container, dict) and key in ("Next", "Default", "StartAt"):
            container[key] = "Nowhere"
        elif isinstance(container, dict):
            container[rnd.choice(["Foo", "Output", "Parameters", "Arguments", "ResultPath", "Assign"])] = rnd.choice(
                ["$.x", "{% 1 %}", {"a.$": "$"}, 3])
        else:
            container[key] = {"Type": rnd.choice(["Pass", "Passs", "Task", "Map"])}
        return copy


def _places(value: Any) -> Any:
    """Every (container, key) in ``value``, depth first."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield value, key
            yield from _places(item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield value, index
            yield from _places(item)


class Target:
    """A server at 127.0.0.1:``port``: sends requests on a kept-alive connection and checks the answers."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connection: http.client.HTTPConnection | None = None
        self.created: set[str] = {MACHINE, ACTIVITY}  # names some create answered 200 for
        self.tagged: dict[str, set[str]] = {}  # tag keys some 200 wrote, by resource ARN
        self.published: set[str] = set()  # state machine ARNs some publishing request answered 200 for
        self.aliased: set[str] = set()  # alias ARNs some CreateStateMachineAlias answered 200 for

    def call(self, target: str, body: bytes) -> tuple[int | str, bytes]:
        for attempt in range(2):  # a connection the server closed (after a malformed request) is opened again
            if self.connection is None:
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            try:
                self.connection.putrequest("POST", "/", skip_accept_encoding=True)
                self.connection.putheader("Content-Type", "application/x-amz-json-1.0")
                if target:
                    self.connection.putheader("X-Amz-Target", target.encode("latin-1", "replace"))
                self.connection.putheader("Content-Length", str(len(body)))
                self.connection.endheaders(body)
                response = self.connection.getresponse()
                data = response.read()
                if response.getheader("connection", "").lower() == "close":
                    self.close()
                return response.status, data
            except (ConnectionError, http.client.HTTPException, OSError):
                self.close()
                if attempt:
                    return "closed", b""
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def setup(self) -> None:
        """The resources valid requests name; called again now and then, since the fuzz deletes them too."""
        self.call("AWSStepFunctions.CreateStateMachine", json.dumps(
            {"name": MACHINE, "definition": json.dumps(DEFINITIONS[0]), "roleArn": ROLE}).encode())
        self.call("AWSStepFunctions.CreateActivity", json.dumps({"name": ACTIVITY}).encode())
        self.call("AWSStepFunctions.StartExecution", json.dumps(
            {"stateMachineArn": MACHINE_ARN, "name": "first"}).encode())

    def send(self, request: Request, report: Report) -> None:
        began = time.perf_counter()
        status, data = self.call(request.target, request.body)
        took = time.perf_counter() - began
        report.slowest[request.operation] = max(took, report.slowest.get(request.operation, 0.0))
        if took > SLOW_S:
            report.slow.append(f"{took * 1000:.0f} ms for {describe(request)}")
        report.counts[request.operation, status] += 1
        if status == "closed" or status >= 500:
            report.failures.append(f"{status} for {describe(request)}: {data[:300]!r}")
            report.broken.append(request)
            return
        if status != 200:
            try:
                error = json.loads(data)
                shaped = isinstance(error.get("__type"), str) and isinstance(error.get("message"), str)
            except (ValueError, AttributeError):
                shaped = False
            if not shaped:
                report.failures.append(f"{status} not in AWS's shape for {describe(request)}: {data[:300]!r}")
                report.broken.append(request)
            return
        self.note_write(request)

    def note_write(self, request: Request) -> None:
        """What a 200 may have written (the request's own target named the operation that ran)."""
        params, target = request.params or {}, request.target
        if target in ("AWSStepFunctions.CreateStateMachine", "AWSStepFunctions.CreateActivity"):
            self.created.add(params.get("name"))
            kind = "stateMachine" if target.endswith("StateMachine") else "activity"
            self.tagged.setdefault(f"{ARN}:{kind}:{params.get('name')}", set()).update(
                tag.get("key") for tag in params.get("tags") or [] if isinstance(tag, dict))
        if target in ("AWSStepFunctions.CreateStateMachine", "AWSStepFunctions.UpdateStateMachine",
                      "AWSStepFunctions.PublishStateMachineVersion"):
            self.published.add(str(params.get("stateMachineArn") or f"{ARN}:stateMachine:{params.get('name')}"))
        elif target == "AWSStepFunctions.CreateStateMachineAlias":
            routing = params.get("routingConfiguration") or [{}]
            version = str(routing[0].get("stateMachineVersionArn", "")) if isinstance(routing[0], dict) else ""
            self.aliased.add(f"{version.rsplit(':', 1)[0]}:{params.get('name')}")
        if target == "AWSStepFunctions.TagResource":
            self.tagged.setdefault(params.get("resourceArn"), set()).update(
                tag.get("key") for tag in params.get("tags") or [] if isinstance(tag, dict))

    def partial_writes(self) -> list[str]:
        """Resources and tags that no 200 wrote: what refused requests left behind."""
        found = []
        for operation, key in (("ListStateMachines", "stateMachines"), ("ListActivities", "activities")):
            for item in self.list_all(operation, key):
                arn = item.get("stateMachineArn") or item.get("activityArn")
                if item["name"] not in self.created:
                    found.append(f"{item['name']} exists, but every create of it was refused")
                status, data = self.call("AWSStepFunctions.ListTagsForResource",
                                         json.dumps({"resourceArn": arn}).encode())
                keys = {tag["key"] for tag in json.loads(data)["tags"]} if status == 200 else set()
                unwritten = keys - self.tagged.get(arn, set())
                if unwritten:
                    found.append(f"{arn} has tags no accepted request wrote: {sorted(unwritten)}")
                if operation == "ListStateMachines":
                    found += self.unwritten_versions_and_aliases(arn)
        return found

    def unwritten_versions_and_aliases(self, machine: str) -> list[str]:
        found = []
        status, data = self.call("AWSStepFunctions.ListStateMachineVersions",
                                 json.dumps({"stateMachineArn": machine}).encode())
        if status == 200 and json.loads(data)["stateMachineVersions"] and machine not in self.published:
            found.append(f"{machine} has versions, but no accepted request published one")
        status, data = self.call("AWSStepFunctions.ListStateMachineAliases",
                                 json.dumps({"stateMachineArn": machine}).encode())
        for alias in json.loads(data)["stateMachineAliases"] if status == 200 else []:
            if alias["stateMachineAliasArn"] not in self.aliased:
                found.append(f"{alias['stateMachineAliasArn']} exists, but every create of it was refused")
        return found

    def list_all(self, operation: str, key: str) -> list[dict]:
        items, token = [], None
        while True:
            status, data = self.call(f"AWSStepFunctions.{operation}", json.dumps(
                {"maxResults": 1000, **({"nextToken": token} if token else {})}).encode())
            page = json.loads(data)
            assert status == 200, page
            items += page[key]
            token = page.get("nextToken")
            if not token:
                return items


def _as_params(body: bytes) -> dict | None:
    try:
        params = json.loads(body)
    except ValueError:
        return None
    return params if isinstance(params, dict) else None


def describe(request: Request) -> str:
    return f"{request.operation} ({request.kind}, target {request.target!r}) body {request.body[:200]!r}"


def run(port: int, requests: int, seed: int, replay: list[Request] | None = None) -> Report:
    """Send ``requests`` fuzzed requests from ``seed`` (or the ``replay`` given); the report counts them and lists
    every broken rule."""
    fuzzer, target, report = Fuzzer(seed), Target(port), Report()
    try:
        for index in range(len(replay) if replay is not None else requests):
            if index % 200 == 0:
                target.setup()
            target.send(replay[index] if replay is not None else fuzzer.request(), report)
        report.failures += target.partial_writes()
    finally:
        target.close()
    return report


def regressions() -> list[Request]:
    """The requests that once broke a rule (fuzz_regressions.jsonl: target and body, as sent)."""
    kept = []
    for line in REGRESSIONS.read_text().splitlines() if REGRESSIONS.exists() else []:
        case = json.loads(line)
        body = case["body"].encode("utf-8", "surrogatepass")
        kept.append(Request(case["operation"], "regression", case["target"], body, _as_params(body)))
    return kept


def keep(requests: list[Request]) -> int:
    """Add ``requests`` to the regressions; how many were new."""
    known = {(request.target, request.body) for request in regressions()}
    new = [request for request in requests if (request.target, request.body) not in known]
    with REGRESSIONS.open("a") as file:
        for request in new:
            file.write(json.dumps({"operation": request.operation, "target": request.target,
                                   "body": request.body.decode("utf-8", "surrogatepass")}) + "\n")
    return len(new)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./dev fuzz", description="Fuzz a freshly started statewright server "
                                     "with requests generated from botocore's service model; print the answers' "
                                     "counts by status and operation, and every 5xx or partial write.")
    parser.add_argument("--requests", type=int, default=100_000, help="how many requests (default 100000)")
    parser.add_argument("--seed", type=int, default=0, help="the seed the requests come from (default 0)")
    parser.add_argument("--keep", action="store_true", help="add the requests that broke a rule to "
                                                            "tests/fuzz_regressions.jsonl, which the suite replays")
    args = parser.parse_args(argv)
    from server import ServerProcess  # tests/server.py: this file runs as a script from tests/

    with tempfile.TemporaryDirectory(prefix="statewright-fuzz-") as scratch:
        server = ServerProcess(Path(scratch) / "data").start()
        try:
            report = run(server.port, args.requests, args.seed)
        finally:
            server.stop()
    print(report.render())
    print(f"{args.requests} requests from seed {args.seed}: {len(report.failures)} broke a rule, "
          f"{len(report.slow)} answered in more than {SLOW_S:g} s")
    for failure in (report.failures + report.slow)[:50]:
        print("  " + failure)
    if args.keep and report.broken:
        print(f"kept {keep(report.broken)} new cases in {REGRESSIONS}")
    return 1 if report.failures or report.slow else 0


if __name__ == "__main__":
    sys.exit(main())
