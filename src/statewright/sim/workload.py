"""The simulator's workload: random valid state machines, inputs their paths can read, and what simulated workers
do with the attempts they receive.

``generate`` draws a definition and a ``MachineSpec`` that tells the harness what driving it takes (the
activities to poll, the child machines it starts, whether a child's input carries a task token to answer).
``generate_input`` draws an execution input for a spec; ``worker_plan`` draws what one worker does with one
attempt, as timed actions the harness replays on its virtual clock.

Shape of the data: an input has the fields of ``TOP_FIELDS``, and ``items`` holds objects with ``ITEM_FIELDS``
(``opt``, read only by IsPresent, may be missing or null anywhere). Every state keeps that shape for the states
after it: a result goes to a field of its own (``$.r_Task3``) or is discarded, and a state that replaces its data
copies the fields over. So a path reads a field its scope is known to have, and fails (States.Runtime) only
when ``generate_input`` leaves a field out on purpose, which it rarely does.

Termination: each States collection is a chain whose Choice rules and Catchers jump forward only (a DAG), every
Task has a TimeoutSeconds (a nested ``.sync`` child may have none: it ends on its own), Retry has a bounded
MaxAttempts and Map runs over at most ``ITEMS_MAX`` items. So every execution closes once its attempts are
answered or time out.

Pure: every choice is drawn from the ``random.Random`` passed in; no clock, no I/O, no global random, and no set
is iterated where order decides a draw, so a seed gives the same workload in every process. Imports only the
error names of statewright.asl; nothing from the engine, the store or the API.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from statewright.asl.errors import TIMEOUT
from statewright.asl.handling import ALL, TASK_FAILED

STATES_MAX = 12  # states in one definition, nested ones included
DEPTH_MAX = 2  # Parallel branches and Map processors nest at most this deep
ITEMS_MAX = 4  # items of an input's (and so of a Map's) array
WAIT_SECONDS_MAX = 30
TASK_TIMEOUT_SECONDS = (5, 60)  # an activity Task's or a task token's TimeoutSeconds, inclusive
SYNC_TIMEOUT_SECONDS = (60, 900)  # a .sync child's TimeoutSeconds, when it has one
EXECUTION_TIMEOUT_SECONDS = (120, 1800)  # the definition's TimeoutSeconds, when it has one
HEARTBEATS_MAX = 32  # heartbeats in one worker plan
WORDS = ("alpha", "beta", "gamma", "delta")

WORKER_ERRORS = ("Sim.Transient", "Sim.Throttled", "Sim.Fatal")  # what workers fail attempts with
UNNAMED_ERROR = "Sim.Unexpected"  # rarely raised by a worker; no rule names it, so only States.ALL catches it
FAIL_ERRORS = ("Sim.Rejected", "Sim.Invalid")  # the Error of Fail states
HEARTBEAT_TIMEOUT = "States.HeartbeatTimeout"
START_EXECUTION = "arn:aws:states:::states:startExecution"
JOB = "arn:aws:states:::glue:startJobRun.sync"  # an AWS job the harness plays: started, polled, maybe stopped
NESTED_PATTERNS = ("", "sync", "sync:2", "waitForTaskToken")  # request-response, .sync, .sync:2, .waitForTaskToken

TOP_FIELDS = ("n", "s", "flag", "wait_s", "items")
ITEM_FIELDS = ("n", "s", "flag", "wait_s")

_SPINE_MAX = (6, 3, 2)  # states in one chain, by depth
_JSONATA_RATE = 0.25  # of Pass, Choice and Wait states
_DISTRIBUTED_RATE = 0.3  # of Map states
_DROP_RATE = 0.02  # inputs that lack a field the definition reads
_UNNAMED_RATE = 0.1  # worker failures with UNNAMED_ERROR
_ERROR_GROUPS: tuple[tuple[str, ...], ...] = (
    WORKER_ERRORS[:1], WORKER_ERRORS[1:], WORKER_ERRORS, (TIMEOUT,), (HEARTBEAT_TIMEOUT,), (TASK_FAILED,),
    FAIL_ERRORS, (WORKER_ERRORS[0], TIMEOUT),
)
_NUMERIC_OPERATORS = ("NumericEquals", "NumericLessThan", "NumericGreaterThan", "NumericLessThanEquals",
                      "NumericGreaterThanEquals")
_VARIABLE_RULES = {"n": {"NumericGreaterThan": 50}, "s": {"StringEquals": "alpha"}, "flag": {"BooleanEquals": True}}
_FIELD_READ = re.compile(r"\$(?:states\.input)?\.(n|s|flag|wait_s|items)\b")
_BEHAVIOURS = (("succeed", 40), ("fail", 20), ("duplicate", 10), ("overrun", 8), ("late", 8), ("die", 8),
               ("stall", 6))


# -- what the harness gets


@dataclass(frozen=True, slots=True)
class MachineSpec:
    """A generated state machine and what driving it takes."""

    definition: dict[str, Any]  # the ASL definition, JSON-ready
    activity_arns: tuple[str, ...]  # the activities its Task states call, each once
    child_machine_arns: tuple[str, ...]  # the state machines it starts, each once
    nested_patterns: frozenset[str]  # of its startExecution Tasks: "", "sync", "sync:2", "waitForTaskToken"
    input_fields: frozenset[str]  # the TOP_FIELDS its paths and expressions read

    @property
    def uses_task_tokens(self) -> bool:
        """Whether a child's input carries a task token (its ``token`` field) that the harness must answer."""
        return "waitForTaskToken" in self.nested_patterns


@dataclass(frozen=True, slots=True)
class SendTaskHeartbeat:
    at_ms: int  # after the worker received the attempt


@dataclass(frozen=True, slots=True)
class SendTaskSuccess:
    at_ms: int
    output: dict[str, Any]  # always has "value", which ResultSelectors read


@dataclass(frozen=True, slots=True)
class SendTaskFailure:
    at_ms: int
    error: str
    cause: str


WorkerAction = SendTaskHeartbeat | SendTaskSuccess | SendTaskFailure


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    """What one simulated worker does with one attempt (an activity task, or a task token it answers).

    ``behaviour`` names the plan: succeed or fail in time (heartbeating on the way), duplicate (answers twice),
    overrun (heartbeats past the timeout, then answers), late (one answer after the timeout), die (never
    answers) and stall (heartbeats, falls silent past the heartbeat timeout, then answers). ``actions`` are in
    ``at_ms`` order; the engine is expected to reject every answer and heartbeat that comes too late or twice.
    """

    behaviour: str
    actions: tuple[WorkerAction, ...]


# -- generating a definition


@dataclass(frozen=True, slots=True)
class _Scope:
    """What the states of one States collection may read."""

    shape: tuple[str, ...]  # the fields their input is known to have
    depth: int  # 0 at the top level
    variables: tuple[tuple[str, str], ...] = ()  # (variable, the field it copied), assigned before any of them runs


@dataclass(slots=True)
class _Chain:
    """The States collection being built, and the names after the state being generated: its forward targets."""

    states: dict[str, dict[str, Any]]
    later: list[str] = field(default_factory=list)


def generate(rng: random.Random, activity_arns: Sequence[str], child_machine_arns: Sequence[str] = (),
             states_max: int = STATES_MAX) -> MachineSpec:
    """A random valid definition of at most ``states_max`` states calling only the given activities and child
    machines (without any, its Tasks are of the other kind, or there are none)."""
    assert states_max >= 1, states_max
    generator = _Generator(rng, tuple(activity_arns), tuple(child_machine_arns), states_max)
    definition: dict[str, Any] = {"Comment": "statewright simulator workload"}
    if rng.random() < 0.2:
        definition["QueryLanguage"] = "JSONPath"
    definition.update(generator.machine(_Scope(TOP_FIELDS, 0), 1))
    if rng.random() < 0.25:
        definition["TimeoutSeconds"] = rng.randint(*EXECUTION_TIMEOUT_SECONDS)
    return MachineSpec(definition, tuple(generator.activities), tuple(generator.children),
                       frozenset(generator.patterns), _fields_read(definition))


def _fields_read(definition: dict[str, Any]) -> frozenset[str]:
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str):
            found.update(_FIELD_READ.findall(value))

    walk(definition)
    return frozenset(found)


def _weighted(rng: random.Random, options: Sequence[tuple[str, float]]) -> str:
    return rng.choices([name for name, _ in options], [weight for _, weight in options])[0]


def _copy_fields(shape: Sequence[str]) -> dict[str, str]:
    """A template that copies the shape's fields: the input of a branch, an iteration or a child."""
    return {f"{name}.$": f"$.{name}" for name in shape}


class _Generator:
    def __init__(self, rng: random.Random, activity_arns: tuple[str, ...], child_arns: tuple[str, ...],
                 states_max: int) -> None:
        self.rng = rng
        self.activity_arns = activity_arns
        self.child_arns = child_arns
        self.budget = states_max - 1  # states not yet paid for; the top level's first one is
        self.serial = 0
        self.activities: dict[str, None] = {}  # used, each once in the order drawn
        self.children: dict[str, None] = {}
        self.patterns: set[str] = set()

    def name(self, kind: str) -> str:
        self.serial += 1
        return f"{kind}{self.serial}"

    # -- States collections

    def machine(self, scope: _Scope, reserved: int) -> dict[str, Any]:
        """A chain of states; ``reserved`` of them are paid for already."""
        extra = self.rng.randint(0, max(0, min(_SPINE_MAX[scope.depth] - reserved, self.budget)))
        self.budget -= extra
        length = reserved + extra
        plan = [self.kind(scope, last=i == length - 1) for i in range(length)]
        names = [self.name("Task" if kind == "Activity" else kind) for kind, _ in plan]
        chain = _Chain({})
        for i, ((kind, children), name) in enumerate(zip(plan, names, strict=True)):
            chain.later = names[i + 1:]
            if i == 0 and kind == "Pass" and self.rng.random() < 0.4:
                body, assigned = self.variables_pass(scope, name)
                scope = _Scope(scope.shape, scope.depth, scope.variables + assigned)
            else:
                body = self.state(kind, children, scope, chain, name)
            chain.states[name] = self.flow(kind, body, names[i + 1] if chain.later else None, scope)
        return {"StartAt": names[0], "States": chain.states}

    def kind(self, scope: _Scope, last: bool) -> tuple[str, int]:
        """The type of the next state in a chain, and how many states it pays for beside itself."""
        options: list[tuple[str, float]] = [("Pass", 3), ("Wait", 2)]
        if self.activity_arns:
            options += [("Activity", 4), ("Job", 1)]
        if self.child_arns:
            options.append(("Child", 2))
        options += [("Succeed", 1), ("Fail", 0.5)] if last else [("Choice", 2.5)]
        if scope.depth < DEPTH_MAX and self.budget >= 2:
            options.append(("Parallel", 1.5))
        if scope.depth < DEPTH_MAX and self.budget >= 1 and "items" in scope.shape:
            options.append(("Map", 1.5))
        kind = _weighted(self.rng, options)
        children = self.rng.randint(2, min(3, self.budget)) if kind == "Parallel" else int(kind == "Map")
        self.budget -= children
        return kind, children

    def flow(self, kind: str, body: dict[str, Any], nxt: str | None, scope: _Scope) -> dict[str, Any]:
        """Next or End; the last state may narrow its output with OutputPath, as no state after it reads it."""
        if kind == "Choice":
            return body  # its transitions are its rules and its Default
        if nxt is not None:
            body["Next"] = nxt
        elif kind not in ("Succeed", "Fail"):
            body["End"] = True
        if nxt is None and kind != "Fail" and body.get("QueryLanguage") != "JSONata" and self.rng.random() < 0.4:
            body["OutputPath"] = self.rng.choice(["$", *(f"$.{name}" for name in scope.shape)])
        return body

    def state(self, kind: str, children: int, scope: _Scope, chain: _Chain, name: str) -> dict[str, Any]:
        if kind == "Pass":
            return self.pass_state(scope, name)
        if kind == "Choice":
            return self.choice_state(scope, chain, name)
        if kind == "Wait":
            return self.wait_state()
        if kind == "Succeed":
            return {"Type": "Succeed"}
        if kind == "Fail":
            return self.fail_state()
        if kind == "Activity":
            return self.activity_task(scope, chain, name)
        if kind == "Child":
            return self.child_task(scope, chain, name)
        if kind == "Job":
            return self.job_task(chain, name)
        if kind == "Parallel":
            return self.parallel_state(scope, chain, name, children)
        return self.map_state(scope, chain, name)

    def target(self, chain: _Chain) -> str | None:
        """Where a Choice rule or a Catcher jumps: a later state of the chain, or a new Succeed or Fail."""
        if not chain.later or self.rng.random() < 0.3:
            return self.exit(chain) or (self.rng.choice(chain.later) if chain.later else None)
        return self.rng.choice(chain.later)

    def exit(self, chain: _Chain) -> str | None:
        """A Succeed or Fail only a jump reaches; None when the budget is spent."""
        if self.budget < 1:
            return None
        self.budget -= 1
        kind = self.rng.choice(("Succeed", "Fail"))
        name = self.name(kind)
        chain.states[name] = {"Type": "Succeed"} if kind == "Succeed" else self.fail_state()
        return name

    # -- Pass

    def pass_state(self, scope: _Scope, name: str) -> dict[str, Any]:
        if self.rng.random() < _JSONATA_RATE:
            return self.jsonata_pass(scope, name)
        variants = ["result", "parameters", "reshape", "plain", *(["input_path"] if "items" in scope.shape else [])]
        variant = self.rng.choice(variants)
        body: dict[str, Any] = {"Type": "Pass"}
        result_fields: Sequence[str] = ()  # what the Assign's `$` (the state's result) is known to hold
        if variant == "result":
            body["Result"] = self.literal()
            body["ResultPath"] = f"$.r_{name}"
        elif variant == "parameters":
            body["Parameters"] = self.intrinsics(scope)
            body["ResultPath"] = f"$.r_{name}"
        elif variant == "input_path":
            body["InputPath"] = "$.items"
            body["Parameters"] = {"count.$": "States.ArrayLength($)", "text.$": "States.JsonToString($)"}
            body["ResultPath"] = f"$.r_{name}"
        elif variant == "reshape":
            body["Parameters"] = self.reshape(scope)
            result_fields = scope.shape
        else:
            if self.rng.random() < 0.5:
                body["ResultPath"] = None
            result_fields = scope.shape
        if self.rng.random() < 0.3:
            body["Assign"] = self.assign(name, result_fields)
        return body

    def literal(self) -> Any:
        return self.rng.choice([
            {"k": self.rng.randint(0, 9)},
            {"tags": self.rng.sample(WORDS, 2), "nested": {"ok": True}},
            [1, "two", None, False],
            self.rng.choice(WORDS),
        ])

    def intrinsics(self, scope: _Scope) -> dict[str, Any]:
        """Parameters computed by intrinsic functions, context fields and variables."""
        candidates: list[tuple[str, Any]] = [
            ("label.$", "States.Format('{}-{}', $.s, $.n)"),
            ("sum.$", "States.MathAdd($.n, 7)"),
            ("id.$", "States.UUID()"),
            ("pair.$", "States.Array($.n, $.flag)"),
            ("digest.$", "States.Hash($.s, 'SHA-256')"),
            ("encoded.$", "States.Base64Encode($.s)"),
            ("roll.$", "States.MathRandom(0, 10)"),
            ("execution.$", "$$.Execution.Name"),
            ("state.$", "$$.State.Name"),
            ("constant", {"k": [1, 2]}),
        ]
        if "items" in scope.shape:
            candidates += [("count.$", "States.ArrayLength($.items)"),
                           ("parts.$", "States.ArrayPartition($.items, 2)"),
                           ("text.$", "States.JsonToString($.items)")]
        candidates += [(f"{variable}.$", f"${variable}") for variable, _ in scope.variables]
        return dict(self.rng.sample(candidates, self.rng.randint(2, 4)))

    def reshape(self, scope: _Scope) -> dict[str, Any]:
        """Parameters that replace the data with a copy of its fields (some computed), and one field more."""
        template: dict[str, Any] = _copy_fields(scope.shape)
        if self.rng.random() < 0.5:
            template["n.$"] = "States.MathAdd($.n, 1)"
        if self.rng.random() < 0.5:
            template["s.$"] = "States.Format('{}', $.s)"
        template["seen.$"] = "$$.State.Name"
        return template

    def assign(self, name: str, result_fields: Sequence[str]) -> dict[str, Any]:
        """Variables nothing reads later (those are ``variables_pass``'s): ``$`` is the state's result."""
        assigned: dict[str, Any] = {f"{name}_k": self.rng.randint(0, 9), f"{name}_at.$": "$$.State.EnteredTime"}
        if "n" in result_fields:
            assigned[f"{name}_n.$"] = "$.n"
        return assigned

    def variables_pass(self, scope: _Scope, name: str) -> tuple[dict[str, Any], tuple[tuple[str, str], ...]]:
        """A chain's first state assigning variables from the input, for the states after it to read."""
        fields = self.rng.sample(("n", "s", "flag"), self.rng.randint(1, 2))
        assigned = tuple((f"{name}_{item}", item) for item in fields)
        if self.rng.random() < _JSONATA_RATE:
            values = {variable: f"{{% $states.input.{item} %}}" for variable, item in assigned}
            return {"Type": "Pass", "QueryLanguage": "JSONata", "Assign": values}, assigned
        return {"Type": "Pass", "Assign": {f"{variable}.$": f"$.{item}" for variable, item in assigned}}, assigned

    def jsonata_pass(self, scope: _Scope, name: str) -> dict[str, Any]:
        """Output merges one computed field into the input, so the shape stays."""
        expressions = ["$states.input.n * 2", "$uppercase($states.input.s)", "$not($states.input.flag)",
                       "$states.context.State.Name", "$string($states.input.wait_s)"]
        if "items" in scope.shape:
            expressions.append("$count($states.input.items)")
        expressions += [f"${variable}" for variable, _ in scope.variables]
        expression = self.rng.choice(expressions)
        body: dict[str, Any] = {"Type": "Pass", "QueryLanguage": "JSONata",
                                "Output": f"{{% $merge([$states.input, {{'j_{name}': {expression}}}]) %}}"}
        if self.rng.random() < 0.3:
            body["Assign"] = {f"{name}_n": "{% $states.input.n %}", f"{name}_k": self.rng.randint(0, 9)}
        return body

    # -- Choice, Wait, Fail

    def choice_state(self, scope: _Scope, chain: _Chain, name: str) -> dict[str, Any]:
        """One to three rules, each jumping forward, and the next state as the Default. Rarely there is no Default
        (no match is then States.NoChoiceMatched) and the first rule goes to the next state instead."""
        jsonata = self.rng.random() < _JSONATA_RATE
        default = self.rng.random() < 0.95
        rules = []
        for i in range(self.rng.randint(1, 3)):
            rule = {"Condition": f"{{% {self.condition(scope)} %}}"} if jsonata else self.rule(scope, top=True)
            rule["Next"] = chain.later[0] if i == 0 and not default else self.target(chain)
            if self.rng.random() < 0.2:
                rule["Assign"] = {f"{name}_branch": self.rng.choice(WORDS)}
            rules.append(rule)
        body: dict[str, Any] = {"Type": "Choice", "Choices": rules}
        if default:
            body["Default"] = chain.later[0]
        if jsonata:
            body["QueryLanguage"] = "JSONata"
        if self.rng.random() < 0.2:
            body["Assign"] = {f"{name}_branch": "default"}
        return body

    def rule(self, scope: _Scope, top: bool) -> dict[str, Any]:
        """A JSONPath Choice rule: a comparison, or And / Or / Not over comparisons (one level)."""
        combinator = self.rng.random() if top else 1.0
        if combinator < 0.15:
            return {"Not": self.rule(scope, top=False)}
        if combinator < 0.35:
            return {self.rng.choice(("And", "Or")): [self.rule(scope, top=False) for _ in range(2)]}
        return self.comparison(scope)

    def comparison(self, scope: _Scope) -> dict[str, Any]:
        rng = self.rng
        if scope.variables and rng.random() < 0.3:
            variable, item = rng.choice(scope.variables)
            return {"Variable": f"${variable}", **_VARIABLE_RULES[item]}
        candidates: list[dict[str, Any]] = [
            {"Variable": "$.n", rng.choice(_NUMERIC_OPERATORS): rng.choice((rng.randint(0, 100), 49.5))},
            {"Variable": "$.n", "NumericLessThanPath": "$.wait_s"},
            {"Variable": "$.s", "StringEquals": rng.choice(WORDS)},
            {"Variable": "$.s", "StringMatches": f"{rng.choice(WORDS)[0]}*"},
            {"Variable": "$.s", "StringLessThan": rng.choice(WORDS)},
            {"Variable": "$.flag", "BooleanEquals": rng.random() < 0.5},
            {"Variable": "$.n", "IsNumeric": True},
            {"Variable": "$.s", rng.choice(("IsString", "IsNull", "IsTimestamp")): rng.random() < 0.5},
            {"Variable": "$.opt", "IsPresent": rng.random() < 0.5},
        ]
        if "items" in scope.shape:
            candidates.append({"Variable": "$.items[0]", "IsPresent": True})
        return rng.choice(candidates)

    def condition(self, scope: _Scope) -> str:
        """A JSONata Choice rule's Condition (the expression between the braces)."""
        candidates = ["$states.input.n > 50", "$states.input.flag", f"$states.input.s = '{self.rng.choice(WORDS)}'",
                      "$exists($states.input.opt)", "$states.input.n < $states.input.wait_s"]
        if "items" in scope.shape:
            candidates.append("$count($states.input.items) > 1")
        if scope.variables and self.rng.random() < 0.3:
            return f"$exists(${self.rng.choice(scope.variables)[0]})"
        return self.rng.choice(candidates)

    def wait_state(self) -> dict[str, Any]:
        if self.rng.random() < _JSONATA_RATE:
            seconds: Any = self.rng.choice(("{% $states.input.wait_s %}", self.rng.randint(1, WAIT_SECONDS_MAX)))
            return {"Type": "Wait", "QueryLanguage": "JSONata", "Seconds": seconds}
        if self.rng.random() < 0.5:
            return {"Type": "Wait", "SecondsPath": "$.wait_s"}
        return {"Type": "Wait", "Seconds": self.rng.randint(1, WAIT_SECONDS_MAX)}

    def fail_state(self) -> dict[str, Any]:
        body = {"Type": "Fail", "Error": self.rng.choice(FAIL_ERRORS)}
        if self.rng.random() < 0.5:
            body["CausePath"] = "States.Format('rejected in {}', $$.State.Name)"  # any data: a caught error's too
        else:
            body["Cause"] = "simulated rejection"
        return body

    # -- Task, Parallel, Map

    def activity_task(self, scope: _Scope, chain: _Chain, name: str) -> dict[str, Any]:
        arn = self.rng.choice(self.activity_arns)
        self.activities[arn] = None
        body: dict[str, Any] = {"Type": "Task", "Resource": arn, **self.task_timeouts()}
        if self.rng.random() < 0.5:
            body["Parameters"] = {"n.$": "$.n", "s.$": "$.s", "retry.$": "$$.State.RetryCount"}
        return self.result_handling(body, chain, name, {"value.$": "$.value"})

    def job_task(self, chain: _Chain, name: str) -> dict[str, Any]:
        """A .sync AWS job: polled until it ends, stopped if the task is abandoned first."""
        body: dict[str, Any] = {"Type": "Task", "Resource": JOB, "Parameters": {"JobName": name}}
        if self.rng.random() < 0.5:
            body["TimeoutSeconds"] = self.rng.randint(*TASK_TIMEOUT_SECONDS)
        return self.result_handling(body, chain, name, {"value.$": "$.JobRunState"})

    def task_timeouts(self) -> dict[str, int]:
        """TimeoutSeconds, and sometimes HeartbeatSeconds, not under a quarter of it (so a worker plan's
        heartbeats can outlast the timeout)."""
        timeout = self.rng.randint(*TASK_TIMEOUT_SECONDS)
        if self.rng.random() < 0.5:
            return {"TimeoutSeconds": timeout}
        return {"TimeoutSeconds": timeout, "HeartbeatSeconds": self.rng.randint(max(1, timeout // 4), timeout - 1)}

    def child_task(self, scope: _Scope, chain: _Chain, name: str) -> dict[str, Any]:
        """A nested execution in one of the four patterns; a waitForTaskToken child gets the token to answer."""
        pattern = self.rng.choice(NESTED_PATTERNS)
        arn = self.rng.choice(self.child_arns)
        self.children[arn] = None
        self.patterns.add(pattern)
        child_input: dict[str, Any] = {**_copy_fields(scope.shape), **({} if "items" in scope.shape else {"items": []})}
        if pattern == "waitForTaskToken":
            child_input["token.$"] = "$$.Task.Token"
        if self.rng.random() < 0.3:
            child_input["AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID.$"] = "$$.Execution.Id"
        body: dict[str, Any] = {"Type": "Task", "Resource": f"{START_EXECUTION}.{pattern}".rstrip("."),
                                "Parameters": {"StateMachineArn": arn, "Input": child_input}}
        if pattern == "waitForTaskToken":
            body.update(self.task_timeouts())
        elif pattern and self.rng.random() < 0.5:
            body["TimeoutSeconds"] = self.rng.randint(*SYNC_TIMEOUT_SECONDS)
        selector = {"value.$": "$.value"} if pattern == "waitForTaskToken" else {"arn.$": "$.ExecutionArn"}
        return self.result_handling(body, chain, name, selector)

    def parallel_state(self, scope: _Scope, chain: _Chain, name: str, branches: int) -> dict[str, Any]:
        inner = _Scope(scope.shape, scope.depth + 1, scope.variables)
        body: dict[str, Any] = {"Type": "Parallel", "Branches": [self.machine(inner, 1) for _ in range(branches)]}
        if self.rng.random() < 0.3:
            body["Parameters"] = {**_copy_fields(scope.shape), "parent.$": "$$.State.Name"}
        return self.result_handling(body, chain, name, {"first.$": "$[0]"})

    def map_state(self, scope: _Scope, chain: _Chain, name: str) -> dict[str, Any]:
        """A Map over ``$.items``: each iteration gets the item, or (ItemSelector) the fields around it. Inline, or
        distributed (each iteration a child execution of a map run, which sees none of the parent's variables),
        which may tolerate some failed children."""
        body: dict[str, Any] = {"Type": "Map", "ItemsPath": "$.items", "MaxConcurrency": self.rng.randint(0, 3)}
        shape: tuple[str, ...] = ITEM_FIELDS
        if self.rng.random() < 0.4:
            body["ItemSelector"] = {**_copy_fields(scope.shape), "index.$": "$$.Map.Item.Index",
                                    "item.$": "$$.Map.Item.Value"}
            shape = scope.shape
        distributed = self.rng.random() < _DISTRIBUTED_RATE
        processor = self.machine(_Scope(shape, scope.depth + 1, () if distributed else scope.variables), 1)
        if distributed:
            processor["ProcessorConfig"] = {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
            if self.rng.random() < 0.5:
                body["ToleratedFailureCount"] = self.rng.randint(0, 2)
        elif self.rng.random() < 0.5:
            processor["ProcessorConfig"] = {"Mode": "INLINE"}
        body["ItemProcessor"] = processor
        return self.result_handling(body, chain, name, {"count.$": "States.ArrayLength($)"})

    # -- results, Retry and Catch

    def result_handling(self, body: dict[str, Any], chain: _Chain, name: str,
                        selector: dict[str, str]) -> dict[str, Any]:
        """ResultPath (the result beside the data, or discarded), ResultSelector, Retry and Catch."""
        body["ResultPath"] = None if self.rng.random() < 0.2 else f"$.r_{name}"
        if self.rng.random() < 0.3:
            body["ResultSelector"] = selector
        if self.rng.random() < 0.5:
            body["Retry"] = self.retriers()
        if self.rng.random() < 0.45:
            catchers = self.catchers(chain, name)
            if catchers:
                body["Catch"] = catchers
        return body

    def error_equals(self, last: bool) -> list[str]:
        """States.ALL only alone, and only in the last rule."""
        if last and self.rng.random() < 0.35:
            return [ALL]
        return list(self.rng.choice(_ERROR_GROUPS))

    def retriers(self) -> list[dict[str, Any]]:
        count = self.rng.randint(1, 3)
        return [self.retrier(last=i == count - 1) for i in range(count)]

    def retrier(self, last: bool) -> dict[str, Any]:
        rng = self.rng
        retrier: dict[str, Any] = {"ErrorEquals": self.error_equals(last)}
        if rng.random() < 0.7:
            retrier["IntervalSeconds"] = rng.randint(1, 5)
        if rng.random() < 0.7:
            retrier["MaxAttempts"] = rng.randint(0, 3)
        if rng.random() < 0.5:
            retrier["BackoffRate"] = rng.choice((1, 1.5, 2.0, 2.5))
        if rng.random() < 0.2:
            retrier["MaxDelaySeconds"] = rng.randint(1, 10)
        if rng.random() < 0.3:
            retrier["JitterStrategy"] = rng.choice(("FULL", "FULL", "NONE"))
        return retrier

    def catchers(self, chain: _Chain, name: str) -> list[dict[str, Any]]:
        count = self.rng.randint(1, 2)
        found = (self.catcher(chain, name, i, last=i == count - 1) for i in range(count))
        return [catcher for catcher in found if catcher is not None]

    def catcher(self, chain: _Chain, name: str, index: int, last: bool) -> dict[str, Any] | None:
        """The error output goes beside the data (or is discarded); when it replaces the data (no ResultPath),
        the catcher jumps to a Succeed or Fail, which read nothing of the shape."""
        errors = self.error_equals(last)
        if self.rng.random() < 0.2:
            end = self.exit(chain)
            if end is not None:
                return {"ErrorEquals": errors, "Next": end}
        target = self.target(chain)
        if target is None:
            return None
        catcher: dict[str, Any] = {"ErrorEquals": errors, "Next": target,
                                   "ResultPath": None if self.rng.random() < 0.2 else f"$.e_{name}"}
        if self.rng.random() < 0.2:
            catcher["Assign"] = {f"{name}_caught{index}.$": "$.Error"}
        return catcher


# -- inputs


def generate_input(rng: random.Random, spec: MachineSpec) -> dict[str, Any]:
    """An input with every field of TOP_FIELDS; rarely (``_DROP_RATE``) without one the definition reads."""
    data = _item(rng)
    data["items"] = [_item(rng) for _ in range(rng.randint(0, ITEMS_MAX))]
    if spec.input_fields and rng.random() < _DROP_RATE:
        del data[rng.choice(sorted(spec.input_fields))]
    return data


def _item(rng: random.Random) -> dict[str, Any]:
    item: dict[str, Any] = {"n": rng.randint(0, 100), "s": rng.choice(WORDS), "flag": rng.random() < 0.5,
                            "wait_s": rng.randint(0, WAIT_SECONDS_MAX)}
    presence = rng.random()
    if presence < 0.3:
        item["opt"] = rng.choice(WORDS)
    elif presence < 0.5:
        item["opt"] = None
    return item


# -- workers


def worker_plan(rng: random.Random, timeout_seconds: int, heartbeat_seconds: int | None = None) -> WorkerPlan:
    """What a worker does with an attempt whose TimeoutSeconds and HeartbeatSeconds are given (as the
    ActivityScheduled or TaskScheduled event records them)."""
    behaviour = _weighted(rng, _BEHAVIOURS)
    if behaviour == "stall" and heartbeat_seconds is None:
        behaviour = "die"  # without a heartbeat timeout, falling silent is dying
    timeout_ms = timeout_seconds * 1000
    gap_ms = heartbeat_seconds * 500 if heartbeat_seconds else max(1, timeout_ms // 4)  # well within a heartbeat
    in_time_ms = rng.randint(0, min(timeout_ms * 3 // 4, HEARTBEATS_MAX * gap_ms // 2))
    late_ms = timeout_ms + rng.randint(1, 10_000)
    if behaviour in ("succeed", "fail"):
        answers: list[WorkerAction] = [_answer(rng, in_time_ms, behaviour == "succeed")]
        return WorkerPlan(behaviour, (*_heartbeats(rng, in_time_ms, gap_ms), *answers))
    if behaviour == "duplicate":
        again_ms = in_time_ms + rng.randint(0, 2000)
        answers = [_answer(rng, in_time_ms, True), _answer(rng, again_ms, rng.random() < 0.5)]
        return WorkerPlan(behaviour, (*_heartbeats(rng, in_time_ms, gap_ms), *answers))
    if behaviour == "overrun":
        return WorkerPlan(behaviour, (*_heartbeats(rng, late_ms, gap_ms), _answer(rng, late_ms, True)))
    if behaviour == "late":
        return WorkerPlan(behaviour, (_answer(rng, late_ms, True),))
    if behaviour == "stall":
        assert heartbeat_seconds is not None
        silent_from_ms = rng.randint(0, timeout_ms // 2)
        answer_ms = silent_from_ms + heartbeat_seconds * 1000 + rng.randint(1, 5000)
        return WorkerPlan(behaviour, (*_heartbeats(rng, silent_from_ms, gap_ms), _answer(rng, answer_ms, True)))
    return WorkerPlan(behaviour, ())


def _heartbeats(rng: random.Random, until_ms: int, gap_ms: int) -> list[SendTaskHeartbeat]:
    """Heartbeats before ``until_ms``, each at most ``gap_ms`` after the one before (at most HEARTBEATS_MAX)."""
    beats: list[SendTaskHeartbeat] = []
    at_ms = rng.randint(gap_ms // 2, gap_ms)
    while at_ms < until_ms and len(beats) < HEARTBEATS_MAX:
        beats.append(SendTaskHeartbeat(at_ms))
        at_ms += rng.randint(gap_ms // 2, gap_ms)
    return beats


def _answer(rng: random.Random, at_ms: int, success: bool) -> SendTaskSuccess | SendTaskFailure:
    if success:
        return SendTaskSuccess(at_ms, {"value": rng.randint(0, 100), "by": "sim-worker"})
    error = UNNAMED_ERROR if rng.random() < _UNNAMED_RATE else rng.choice(WORKER_ERRORS)
    return SendTaskFailure(at_ms, error, f"simulated {error}")
