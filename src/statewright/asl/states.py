"""Compiled states: what ``definition.parse_definition`` produces and the decider runs.

A ``Machine`` is one States collection (the top level, a Parallel branch or a Map item processor). Every machine
of a definition has an index into ``Definition.machines`` so an execution's durable state can name the machine a
branch or iteration runs in with a number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .choice import Rule
from .handling import Catcher, Retrier
from .intrinsics import Intrinsic
from .jsonata import CompiledValue
from .paths import Path, ReferencePath
from .templates import Template

IDENTITY = Path("$")
KEEP_ALL = ReferencePath("$")


@dataclass(slots=True)
class State:
    name: str
    type: str
    next: str | None = None
    end: bool = False
    input_path: Path | None = IDENTITY  # None: the JSON null, which gives the state {} as input
    output_path: Path | None = IDENTITY
    assign: Template | None = None  # variables set when the state exits; `$` is the state's result
    query_language: str = "JSONPath"
    jsonata: dict[str, Any] = field(default_factory=dict)  # JSONata states: field name -> compiled value


@dataclass(slots=True)
class PassState(State):
    parameters: Template | None = None
    result: Any = None
    has_result: bool = False
    result_path: ReferencePath | None = KEEP_ALL  # None: discard the result, pass the input on


@dataclass(slots=True)
class ChoiceState(State):
    # (rule, Next, the rule's Assign, the rule's Output: JSONata only, the state's output when the rule matches)
    choices: list[tuple[Rule, str, Template | None, Any]] = field(default_factory=list)
    default: str | None = None  # the state's own Assign applies only when the Default is taken


@dataclass(slots=True)
class WaitState(State):
    seconds: int | None = None
    timestamp_ms: int | None = None
    seconds_path: Path | None = None
    timestamp_path: Path | None = None


@dataclass(slots=True)
class SucceedState(State):
    pass


@dataclass(slots=True)
class FailState(State):
    error: str | None = None
    cause: str | None = None
    error_path: Path | Intrinsic | None = None
    cause_path: Path | Intrinsic | None = None


@dataclass(slots=True)
class ResultState(State):
    """What Task, Parallel and Map share: a result that is shaped and placed, and Retry and Catch."""

    result_selector: Template | None = None
    result_path: ReferencePath | None = KEEP_ALL
    retry: list[Retrier] = field(default_factory=list)
    catch: list[Catcher] = field(default_factory=list)


@dataclass(slots=True)
class TaskState(ResultState):
    resource: str = ""
    integration: str = ""  # "activity", "lambdaFunction", "aws-sdk:<service>" or an optimized one ("http", "sqs")
    action: str = ""  # for service integrations: "invoke", "startExecution", ...
    pattern: str = ""  # "" (request and response), "sync", "sync:2" or "waitForTaskToken"
    parameters: Template | None = None
    credentials: Template | None = None  # {"RoleArn": ...}: the role the call is made as (JSONata: in jsonata)
    timeout_seconds: int | None = None
    timeout_seconds_path: Path | None = None
    heartbeat_seconds: int | None = None
    heartbeat_seconds_path: Path | None = None


@dataclass(slots=True)
class ParallelState(ResultState):
    parameters: Template | None = None
    branches: list[Machine] = field(default_factory=list)


@dataclass(slots=True)
class ItemReader:
    """A Distributed Map's ItemReader: how the data it reads becomes items (its Parameters or Arguments only say
    where the data is)."""

    input_type: str  # JSON, JSONL, CSV (s3:getObject), or "" for an S3 listing (s3:listObjectsV2)
    action: str = "getObject"  # the S3 call that reads the data: getObject or listObjectsV2
    parameters: Any = None  # where the data is: its Parameters (a Template) or Arguments (JSONata), None: none
    csv_headers: list[str] | None = None  # CSVHeaderLocation GIVEN; None: the first row holds them
    csv_delimiter: str = ","
    max_items: int | CompiledValue | None = None  # CompiledValue: a JSONata expression
    max_items_path: Path | None = None
    items_pointer: str | None = None  # a JSON Pointer to the array inside a JSON file


@dataclass(slots=True)
class ItemBatcher:
    batch_input: Template | CompiledValue | None = None
    max_items: int | CompiledValue | None = None
    max_items_path: Path | None = None
    max_bytes: int | CompiledValue | None = None
    max_bytes_path: Path | None = None


@dataclass(slots=True)
class ResultWriter:
    """A Distributed Map's ResultWriter: where the children's results go (Parameters or Arguments: the S3 Bucket and
    Prefix; None: into the state's output, through WriterConfig only), in what form."""

    parameters: Any = None  # a Template (JSONPath) or a CompiledValue (JSONata); None: WriterConfig only
    output_type: str = "JSON"  # WriterConfig OutputType: JSON or JSONL
    transformation: str = "COMPACT"  # WriterConfig Transformation: NONE, COMPACT or FLATTEN


@dataclass(slots=True)
class DistributedMap:
    """What a Map with ProcessorConfig Mode DISTRIBUTED adds to an inline one."""

    reader: ItemReader | None = None
    batcher: ItemBatcher | None = None
    writer: ResultWriter | None = None
    execution_type: str = "STANDARD"  # ProcessorConfig ExecutionType: the children's type
    label: str | None = None  # Label: names the map run and its children's state machine

    @property
    def exports(self) -> bool:
        """Its ResultWriter writes the results to S3: the Map's result is the writer's summary (an object)."""
        return self.writer is not None and self.writer.parameters is not None
    tolerated_count: int | CompiledValue | None = None
    tolerated_count_path: Path | None = None
    tolerated_percentage: float | CompiledValue | None = None
    tolerated_percentage_path: Path | None = None


@dataclass(slots=True)
class MapState(ResultState):
    items_path: Path | None = IDENTITY
    item_selector: Template | None = None
    max_concurrency: int = 0  # 0: no limit
    max_concurrency_path: Path | None = None
    processor: Machine | None = None
    distributed: DistributedMap | None = None  # None: an inline Map


@dataclass(slots=True)
class Machine:
    start_at: str
    states: dict[str, State]
    index: int = 0


@dataclass(slots=True)
class Definition:
    start_at: str
    states: dict[str, State]
    timeout_seconds: int | None = None
    comment: str | None = None
    machines: list[Machine] = field(default_factory=list)  # [0] is the top level
