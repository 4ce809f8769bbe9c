"""The fields a Map with ProcessorConfig Mode DISTRIBUTED adds (ItemReader, ItemBatcher, ResultWriter, Label and
the tolerated failures), checked and compiled for ``definition``'s parser.

Executions run a distributed Map through a map run (``decider/map_runs.py``); TestState evaluates one's own
processing with a mock for its children. Both share ``decider/distributed_map.py``.

Where the rules come from: the fields, their values and their order of use are AWS's Developer Guide pages
ItemReader (Map), ItemBatcher (Map), ItemsPath (Map) and "Map state input and output fields", and ItemProcessor's
ProcessorConfig (ExecutionType is required in DISTRIBUTED mode). The wording of each diagnostic follows the phrases
AWS uses for every other schema problem (``diagnostics.py``); AWS's own words for these particular fields were not
found, and neither was whether AWS checks the combinations (CSVHeaders without GIVEN, ItemsPointer outside JSON)
when a definition is validated: those checks are inferred from the documentation's descriptions.

Pure: it must not import from the engine, the store or the API.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any, Protocol

from .diagnostics import UNSUPPORTED_FEATURE, expected, one_of, only_one
from .jsonata import CompiledValue, JsonataSyntaxError, compile_value, is_expression
from .paths import Path
from .states import DistributedMap, ItemBatcher, ItemReader, ResultWriter
from .templates import Template


class Parser(Protocol):
    """What of ``definition``'s parser this module uses (it is handed the parser: it must not import it)."""

    language: str  # the state's query language, JSONPath or JSONata
    labels: set[str]  # the distributed Maps' Labels so far

    def problem(self, code: str, message: str, location: str) -> None: ...

    def schema(self, message: str, location: str) -> None: ...

    def unknown_fields(self, raw: dict, allowed: set[str], where: str, other_language: Collection[str] = ()
                       ) -> bool: ...

    def integer(self, raw: dict, key: str, where: str, minimum: int, maximum: int | None) -> int | None: ...

    def path(self, raw: dict, key: str, where: str, nullable: bool = False) -> Path | None: ...

    def template(self, raw: dict, key: str, where: str) -> Template | None: ...

FIELDS = {"ItemReader", "ItemBatcher", "ResultWriter", "Label", "ToleratedFailureCount",
          "ToleratedFailureCountPath", "ToleratedFailurePercentage", "ToleratedFailurePercentagePath"}
EXECUTION_TYPES = ("STANDARD", "EXPRESS")
_READ = re.compile(r"^arn:aws[a-z-]*:states:::s3:(?P<action>getObject|listObjectsV2)$")
_INPUT_TYPES = ("CSV", "JSON", "JSONL", "PARQUET", "MANIFEST")
TEXT_INPUT_TYPES = ("CSV", "JSON", "JSONL")  # what TestState's mapItemReaderData can hold as text
_MANIFEST_TYPES = ("S3_INVENTORY", "ATHENA_DATA")
_DELIMITERS = {"COMMA": ",", "PIPE": "|", "SEMICOLON": ";", "SPACE": " ", "TAB": "\t"}
_READER_ITEMS_MAX = 100_000_000  # ReaderConfig MaxItems
_BATCHER_BYTES_MAX = 262_144  # ItemBatcher MaxInputBytesPerBatch: 256 KiB
_LABEL_MAX = 40
# What a Label must not hold (AWS refuses these characters in it, as in the names its ARN carries)
_LABEL_REFUSED = re.compile(r"[\s<>{}\[\]?*\"#%\\^|~`$&,;:/\x00-\x1f\x7f-\x9f]")
_WRITE = "arn:aws:states:::s3:putObject"
_OUTPUT_TYPES = ("JSON", "JSONL")
_TRANSFORMATIONS = ("NONE", "COMPACT", "FLATTEN")


def parse(parser: Parser, raw: dict, where: str) -> DistributedMap:
    """The distributed fields of the Map ``raw`` at ``where`` (problems are reported to ``parser``)."""
    distributed = DistributedMap()
    if "ItemReader" in raw:
        distributed.reader = _reader(parser, raw["ItemReader"], f"{where}/ItemReader")
        items_field = "Items" if parser.language == "JSONata" else "ItemsPath"
        if items_field in raw:  # "You can use ItemsPath in the Distributed Map state only if you use a JSON
            # input passed from a previous state" (ItemsPath (Map)); ItemsPointer selects inside a read file
            parser.schema(only_one([items_field, "ItemReader"]), where)
    if "ItemBatcher" in raw:
        distributed.batcher = _batcher(parser, raw["ItemBatcher"], f"{where}/ItemBatcher")
    if "ResultWriter" in raw:
        distributed.writer = _writer(parser, raw["ResultWriter"], f"{where}/ResultWriter")
    if "Label" in raw:
        label = raw["Label"]
        if not isinstance(label, str):
            parser.schema(expected("STRING"), f"{where}/Label")
        elif not label:
            parser.schema("The value for the field 'Label' must not be empty", f"{where}/Label")
        elif len(label) > _LABEL_MAX:
            parser.schema(f"Maximum length is {_LABEL_MAX}", f"{where}/Label")
        elif _LABEL_REFUSED.search(label):
            parser.schema(f"The value for the field 'Label' must not contain "
                          f"'{_LABEL_REFUSED.search(label)[0]}': it names the map run and its children's state "
                          "machine", f"{where}/Label")
        elif label in parser.labels:
            parser.schema(f"The Label '{label}' names another distributed Map of the state machine: each Map's must "
                          "be its own", f"{where}/Label")
        else:
            distributed.label = label
            parser.labels.add(label)
    distributed.tolerated_count, distributed.tolerated_count_path = _number(
        parser, raw, "ToleratedFailureCount", where, None, integer=True)
    distributed.tolerated_percentage, distributed.tolerated_percentage_path = _number(
        parser, raw, "ToleratedFailurePercentage", where, 100, integer=False)
    return distributed


def _reader(parser: Parser, raw: Any, where: str) -> ItemReader | None:
    if not isinstance(raw, dict):
        parser.schema(expected("OBJECT"), where)
        return None
    parameters = _payload_fields(parser, raw, {"Resource", "ReaderConfig"}, where)
    resource = raw.get("Resource")
    if "Resource" not in raw:
        parser.schema("These fields are required: [Resource]", where)
        return None
    read = _READ.match(resource) if isinstance(resource, str) else None
    if read is None:
        parser.schema(one_of(["arn:aws:states:::s3:getObject", "arn:aws:states:::s3:listObjectsV2"]),
                      f"{where}/Resource")
        return None
    config = raw.get("ReaderConfig", {})
    where = f"{where}/ReaderConfig"
    if not isinstance(config, dict):
        parser.schema(expected("OBJECT"), where)
        return None
    allowed = {"InputType", "CSVHeaderLocation", "CSVHeaders", "CSVDelimiter", "MaxItems", "ItemsPointer",
               "ManifestType"}
    parser.unknown_fields(config, allowed | ({"MaxItemsPath"} if parser.language == "JSONPath" else set()), where,
                          {"MaxItemsPath"} if parser.language == "JSONata" else ())
    reader = ItemReader("", action=read["action"], parameters=parameters)
    if read["action"] == "getObject":
        reader.input_type = _input_type(parser, config, where) or ""
    if "ManifestType" in config:
        if reader.input_type != "MANIFEST":
            parser.schema("The field 'ManifestType' is supported only when 'InputType' is 'MANIFEST'",
                          f"{where}/ManifestType")
        elif config["ManifestType"] not in _MANIFEST_TYPES:
            parser.schema(one_of(_MANIFEST_TYPES), f"{where}/ManifestType")
        elif config["ManifestType"] == "ATHENA_DATA":
            parser.problem(UNSUPPORTED_FEATURE, "statewright reads S3 inventory manifests only so far; ManifestType "
                           "'ATHENA_DATA' is not read", f"{where}/ManifestType")
    reader.max_items, reader.max_items_path = _number(parser, config, "MaxItems", where, _READER_ITEMS_MAX,
                                                      integer=True, minimum=1)
    if "CSVDelimiter" in config:
        if config["CSVDelimiter"] in _DELIMITERS:
            reader.csv_delimiter = _DELIMITERS[config["CSVDelimiter"]]
        else:
            parser.schema(one_of(list(_DELIMITERS)), f"{where}/CSVDelimiter")
    reader.csv_headers = _csv_headers(parser, config, where)
    if "ItemsPointer" in config:
        pointer = config["ItemsPointer"]
        if reader.input_type != "JSON":
            parser.schema("The field 'ItemsPointer' is supported only when 'InputType' is 'JSON'",
                          f"{where}/ItemsPointer")
        elif not isinstance(pointer, str) or (pointer and not pointer.startswith("/")):
            parser.schema("The value for the field 'ItemsPointer' must be a valid JSON Pointer",
                          f"{where}/ItemsPointer")
        else:
            reader.items_pointer = pointer
    return reader


def _input_type(parser: Parser, config: dict, where: str) -> str | None:
    if "InputType" not in config:
        parser.schema("These fields are required: [InputType]", where)
        return None
    input_type = config["InputType"]
    if input_type not in _INPUT_TYPES:
        parser.schema(one_of(_INPUT_TYPES), f"{where}/InputType")
        return None
    return input_type


def _csv_headers(parser: Parser, config: dict, where: str) -> list[str] | None:
    location = config.get("CSVHeaderLocation", "FIRST_ROW")
    if ("CSVHeaderLocation" in config or "CSVHeaders" in config) and config.get("InputType") != "CSV":
        parser.schema("The fields 'CSVHeaderLocation' and 'CSVHeaders' are supported only when 'InputType' is "
                      "'CSV'", where)
        return None
    if location not in ("FIRST_ROW", "GIVEN"):
        parser.schema(one_of(("FIRST_ROW", "GIVEN")), f"{where}/CSVHeaderLocation")
        return None
    if location == "FIRST_ROW":
        if "CSVHeaders" in config:
            parser.schema("The field 'CSVHeaders' is supported only when 'CSVHeaderLocation' is 'GIVEN'", where)
        return None
    headers = config.get("CSVHeaders")
    if "CSVHeaders" not in config:
        parser.schema("These fields are required: [CSVHeaders]", where)
    elif not isinstance(headers, list) or not headers or not all(isinstance(name, str) for name in headers):
        parser.schema("The value for the field 'CSVHeaders' must be a non-empty array of strings",
                      f"{where}/CSVHeaders")
    else:
        return headers
    return None


def _writer(parser: Parser, raw: Any, where: str) -> ResultWriter | None:
    """ResultWriter: Resource and Parameters (Arguments) to write to S3, WriterConfig to shape the results, or both
    (AWS's ResultWriter (Map) page: it "cannot be empty"). Transformation is NONE by default when the results go to
    S3 without a WriterConfig, COMPACT otherwise."""
    if not isinstance(raw, dict):
        parser.schema(expected("OBJECT"), where)
        return None
    parameters = _payload_fields(parser, raw, {"Resource", "WriterConfig"}, where)
    writer = ResultWriter(parameters)
    if "Resource" in raw:
        if raw["Resource"] != _WRITE:
            parser.schema(one_of([_WRITE]), f"{where}/Resource")
        if parameters is None:
            parser.schema("These fields are required: [Parameters]" if parser.language == "JSONPath"
                          else "These fields are required: [Arguments]", where)
    elif parameters is not None:
        parser.schema("These fields are required: [Resource]", where)
    config = raw.get("WriterConfig")
    if config is None:
        if "Resource" not in raw:
            parser.schema("One of the following fields is required: [Resource, WriterConfig]", where)
        writer.transformation = "NONE"
        return writer
    if not isinstance(config, dict):
        parser.schema(expected("OBJECT"), f"{where}/WriterConfig")
        return writer
    parser.unknown_fields(config, {"OutputType", "Transformation"}, f"{where}/WriterConfig")
    if config.get("OutputType", "JSON") not in _OUTPUT_TYPES:
        parser.schema(one_of(_OUTPUT_TYPES), f"{where}/WriterConfig/OutputType")
    else:
        writer.output_type = config.get("OutputType", "JSON")
    if config.get("Transformation", "COMPACT") not in _TRANSFORMATIONS:
        parser.schema(one_of(_TRANSFORMATIONS), f"{where}/WriterConfig/Transformation")
    else:
        writer.transformation = config.get("Transformation", "COMPACT")
    return writer


def _batcher(parser: Parser, raw: Any, where: str) -> ItemBatcher | None:
    if not isinstance(raw, dict):
        parser.schema(expected("OBJECT"), where)
        return None
    paths = {"MaxItemsPerBatchPath", "MaxInputBytesPerBatchPath"}
    jsonpath = parser.language == "JSONPath"
    parser.unknown_fields(raw, {"BatchInput", "MaxItemsPerBatch", "MaxInputBytesPerBatch"} | (paths if jsonpath
                                                                                              else set()),
                          where, () if jsonpath else paths)
    if not {"MaxItemsPerBatch", "MaxInputBytesPerBatch"} & set(raw) and not (jsonpath and paths & set(raw)):
        fields = ["MaxItemsPerBatch", "MaxInputBytesPerBatch"] + (sorted(paths) if jsonpath else [])
        parser.schema(f"One of the following fields is required: [{', '.join(fields)}]", where)
    batcher = ItemBatcher()
    if "BatchInput" in raw:
        if jsonpath:
            batcher.batch_input = parser.template(raw, "BatchInput", where)
        else:
            batcher.batch_input = _expression(parser, raw["BatchInput"], "BatchInput", f"{where}/BatchInput")
    batcher.max_items, batcher.max_items_path = _number(parser, raw, "MaxItemsPerBatch", where, _READER_ITEMS_MAX,
                                                        integer=True, minimum=1)
    batcher.max_bytes, batcher.max_bytes_path = _number(parser, raw, "MaxInputBytesPerBatch", where,
                                                        _BATCHER_BYTES_MAX, integer=True, minimum=1)
    return batcher


def _number(parser: Parser, raw: dict, key: str, where: str, maximum: int | None, *, integer: bool,
            minimum: int = 0) -> tuple[int | float | CompiledValue | None, Path | None]:
    """A count or percentage given as a number, its ``Path`` form (JSONPath) or an expression (JSONata)."""
    path_key = f"{key}Path"
    if key in raw and path_key in raw:
        parser.schema(only_one([key, path_key]), where)
        return None, None
    if path_key in raw and parser.language == "JSONPath":
        return None, parser.path(raw, path_key, where)
    if key not in raw:
        return None, None
    value = raw[key]
    if parser.language == "JSONata" and is_expression(value):
        return _expression(parser, value, key, f"{where}/{key}"), None
    if integer:
        return parser.integer(raw, key, where, minimum, maximum), None
    if not isinstance(value, int | float) or isinstance(value, bool):
        parser.schema(expected("NUMBER"), f"{where}/{key}")
    elif not minimum <= value <= maximum:
        parser.schema(f"Value should be between {minimum} and {maximum}", f"{where}/{key}")
    else:
        return float(value), None
    return None, None


def _expression(parser: Parser, raw: Any, field: str, where: str) -> CompiledValue | None:
    try:
        return compile_value(raw, field)
    except JsonataSyntaxError as exc:
        parser.problem(exc.code, str(exc), where)
        return None


def _payload_fields(parser: Parser, raw: dict, allowed: set[str], where: str) -> Template | CompiledValue | None:
    """An ItemReader's own fields, and its Parameters (JSONPath) or Arguments (JSONata), which say where the data
    is (TestState is given the data instead)."""
    own, other = ("Parameters", "Arguments") if parser.language == "JSONPath" else ("Arguments", "Parameters")
    parser.unknown_fields(raw, allowed | {own}, where, {other})
    if own not in raw:
        return None
    if own == "Parameters":
        return parser.template(raw, "Parameters", where)
    return _expression(parser, raw["Arguments"], "Arguments", f"{where}/Arguments")
