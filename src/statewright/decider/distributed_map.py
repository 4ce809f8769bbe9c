"""A Distributed Map's own processing: the items its ItemReader read, its ItemBatcher's batches, and whether more
of its iterations failed than it tolerates.

An execution's distributed Map runs its children through a map run (``map_runs``), from the inputs ``prepare``
makes. TestState runs one with a mock for its children: ``enter`` takes the data the ItemReader read
(stateConfiguration.mapItemReaderData) through the steps an inline Map takes (``fan_out.map_inputs``: InputPath,
ItemSelector, MaxConcurrency) in the order AWS documents ("Map state input and output fields": ItemReader,
ItemsPath, ItemSelector, ItemBatcher), and records the fan-out of its iterations; ``Tolerance.exceeded`` then
says whether mapIterationFailureCount fails the Map.

Verified against AWS: the error and cause of an exceeded threshold, and that a Map declaring no tolerated failures
is not failed by any count (AWS's TestState answers recorded in LocalStack's AWS-validated snapshots,
test_state_configuration.snapshot.json); what each ReaderConfig field means (AWS's ItemReader (Map) page).
Inferred: a threshold is exceeded when the failures are more than the count or than the percentage of the
iterations (the Map Run "fails when it exceeds" either, Developer Guide); data that does not read as its
InputType fails the Map with States.ItemReaderFailed, as a file that does not read fails a real Map Run; a CSV
row whose fields do not match the headers, a batch byte limit one item exceeds, and a *Path or expression value of
the wrong type fail it too, with causes of our own.

Pure, like the rest of the decider.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..asl import errors
from ..asl.dataflow import select
from ..asl.errors import StatesError
from ..asl.jsonata import CompiledValue
from ..asl.jsonio import dumps, loads, shown
from ..asl.paths import Path
from ..asl.states import ItemBatcher, ItemReader, MapState
from ..asl.templates import Template
from . import fan_out
from .step import Step, query_error

READER_FAILED = "States.ItemReaderFailed"
THRESHOLD_EXCEEDED = "States.ExceedToleratedFailureThreshold"
THRESHOLD_CAUSE = "The specified tolerated failure threshold was exceeded"  # AWS's words


@dataclass(frozen=True, slots=True)
class Tolerance:
    """A distributed Map's tolerated failures, as evaluated when it was entered (None: not declared)."""

    count: int | None
    percentage: float | None

    def exceeded(self, failures: int, iterations: int) -> bool:
        """``failures`` of the ``iterations`` (child executions: batches, when the Map batches) are more than it
        tolerates."""
        if self.count is not None and failures > self.count:
            return True
        return self.percentage is not None and iterations > 0 and failures * 100 > self.percentage * iterations


def enter(step: Step, flow_id: str, state: MapState, data: Any, read: str | None) -> Tolerance:
    """TestState: evaluate the Map's iterations' inputs and record its fan-out. ``read``: the data its ItemReader
    read, as found in its source (the caller gives it when the Map has an ItemReader)."""
    inputs, limit, tolerance = prepare(step, flow_id, state, data, read)
    fan_out.start_map(step, flow_id, inputs, limit, data)
    return tolerance


def prepare(step: Step, flow_id: str, state: MapState, data: Any, read: str | None,
            progress: dict[str, Any] | None = None) -> tuple[list[Any], int, Tolerance]:
    """The Map's iterations' inputs (each child execution's: an item, or a batch), its MaxConcurrency and its
    tolerated failures, in the order AWS documents them. ``read``: what its ItemReader read, all of it or, with
    ``progress`` (the read so far: its ``page``, the ``items`` before it, a CSV's ``headers``, whether this page
    is the ``last``, the items of a batch the pages before left open: ``carry``), a page of it; ``progress`` is
    brought up to date (``done``: MaxItems reached). A batch goes on over the pages, as if they were one."""
    distributed = state.distributed
    context = step.scope(flow_id, state.name)
    reader = distributed.reader
    items_of = None
    if reader is not None:
        assert read is not None, "a distributed Map's ItemReader needs the data it read"
        items_of = partial(_read, step, flow_id, state, reader, context, read, progress)
    first = 0 if progress is None else progress["items"]
    effective, inputs, limit = fan_out.map_inputs(step, flow_id, state, data, context, items_of, first)
    if distributed.batcher is not None:
        carried = [] if progress is None else progress.get("carry", [])
        batches = _batches(step, flow_id, state, distributed.batcher, effective, context, carried + inputs)
        if progress is not None:  # the last batch may fill up with the next page's items
            final = progress["last"] or progress["done"]
            progress["carry"] = [] if final or not batches else batches.pop()["Items"]
        inputs = step.note("afterItemBatcher", batches)
    return inputs, limit, _tolerance(step, flow_id, state, effective, context)


def settings(step: Step, flow_id: str, state: MapState, data: Any) -> tuple[int, Tolerance]:
    """The Map's MaxConcurrency and tolerated failures alone, as ``prepare`` evaluates them: a map run reading its
    items has them from the start."""
    context = step.scope(flow_id, state.name)
    effective = data if state.query_language == "JSONata" else select(state.input_path, data, context)
    return fan_out.map_concurrency(step, flow_id, state, data, context), _tolerance(step, flow_id, state,
                                                                                    effective, context)


def _tolerance(step: Step, flow_id: str, state: MapState, effective: Any, context: Any) -> Tolerance:
    distributed = state.distributed
    return Tolerance(
        _noted(step, "toleratedFailureCount", _given(
            step, flow_id, state, "ToleratedFailureCount", distributed.tolerated_count,
            distributed.tolerated_count_path, effective, context, _count)),
        _noted(step, "toleratedFailurePercentage", _given(
            step, flow_id, state, "ToleratedFailurePercentage", distributed.tolerated_percentage,
            distributed.tolerated_percentage_path, effective, context, _percentage)))


def _noted(step: Step, name: str, value: int | float | None) -> Any:
    """A tolerated failure value, shown in TestState's inspection data when the Map declares it (as AWS does)."""
    if value is None:
        return None
    return step.note(name, float(value) if name == "toleratedFailurePercentage" else value)


# -- reading


def _read(step: Step, flow_id: str, state: MapState, reader: ItemReader, context: Any, text: str,
          progress: dict[str, Any] | None, effective: Any) -> list[Any]:
    """The items of the data an ItemReader read (or of a page of it: ``progress``), at most MaxItems of them in
    all."""
    first = 0 if progress is None else progress["items"]
    if reader.input_type == "CSV":
        given = None if progress is None or progress["page"] == 0 else progress["headers"]
        items, headers = _csv(reader, text, given)
        if progress is not None:
            progress["headers"] = headers
    else:
        items = _json(reader, text)
    limit = _given(step, flow_id, state, "MaxItems", reader.max_items, reader.max_items_path, effective, context,
                   _positive)
    if limit is not None:
        items = items[:max(limit - first, 0)]
    if progress is not None:
        progress["items"] = first + len(items)
        progress["done"] = limit is not None and first + len(items) >= limit
    if reader.items_pointer is not None:
        return step.note("afterItemsPointer", items)
    return items if state.query_language == "JSONata" else step.note("afterItemsPath", items)


def _json(reader: ItemReader, text: str) -> list[Any]:
    """JSON (an array, or one an ItemsPointer points at), JSON Lines (a value a line), or an S3 listing (taken
    as the array of the objects it lists)."""
    try:
        if reader.input_type == "JSONL":
            return [loads(line) for line in text.splitlines() if line.strip()]
        value = loads(text)
    except ValueError as exc:
        raise StatesError(READER_FAILED, f"The data read is not valid {reader.input_type or 'JSON'}: {exc}") from None
    if reader.items_pointer:
        value = _pointed(value, reader.items_pointer)
    if not isinstance(value, list):
        where = f" at the ItemsPointer '{reader.items_pointer}'" if reader.items_pointer else ""
        raise StatesError(READER_FAILED, f"The data read must hold a JSON array{where}, but got: {dumps(value)}")
    return value


def _pointed(value: Any, pointer: str) -> Any:
    """RFC 6901: each /-separated token (~1 is /, ~0 is ~) names an object key or an array index."""
    for token in pointer[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            raise StatesError(READER_FAILED, f"The ItemsPointer '{pointer}' points at nothing in the data read")
    return value


def _csv(reader: ItemReader, text: str, given: list[str] | None) -> tuple[list[dict[str, str]], list[str]]:
    """Each row an object of its fields, as strings, by the headers (CSVHeaders, or the first row: ``given``, read
    from a page before); and the headers."""
    try:
        rows = [row for row in csv.reader(io.StringIO(text), delimiter=reader.csv_delimiter) if row]
    except csv.Error as exc:
        raise StatesError(READER_FAILED, f"The data read is not valid CSV: {exc}") from None
    headers = reader.csv_headers or given
    if headers is None:
        if not rows:
            raise StatesError(READER_FAILED, "The data read has no header row")
        headers, rows = rows[0], rows[1:]
        blank = next((index for index, header in enumerate(headers) if not header.strip()), None)
        if blank is not None:
            raise StatesError(READER_FAILED, f"The header row names no column {blank + 1}")
        repeated = next((header for index, header in enumerate(headers) if header in headers[:index]), None)
        if repeated is not None:
            raise StatesError(READER_FAILED, f"The header row names the column '{repeated}' twice")
    for number, row in enumerate(rows, 1):
        if len(row) != len(headers):
            raise StatesError(READER_FAILED, f"Row {number} of the data read has {len(row)} fields; the headers "
                              f"name {len(headers)}")
    return [dict(zip(headers, row, strict=True)) for row in rows], headers


# -- batching


def _batches(step: Step, flow_id: str, state: MapState, batcher: ItemBatcher, effective: Any, context: Any,
             inputs: list[Any]) -> list[dict[str, Any]]:
    """The iterations' inputs gathered into batches: {"BatchInput": ..., "Items": [...]}, each within
    MaxItemsPerBatch items and MaxInputBytesPerBatch bytes (of the batch as JSON)."""
    max_items = _given(step, flow_id, state, "MaxItemsPerBatch", batcher.max_items, batcher.max_items_path,
                       effective, context, _positive)
    max_bytes = _given(step, flow_id, state, "MaxInputBytesPerBatch", batcher.max_bytes, batcher.max_bytes_path,
                       effective, context, _positive)
    shell: dict[str, Any] = {}
    if isinstance(batcher.batch_input, Template):
        shell["BatchInput"] = batcher.batch_input.render(effective, context, step.seed_of(step.flows[flow_id]))
    elif batcher.batch_input is not None:
        shell["BatchInput"] = step.evaluate_expression(flow_id, state, batcher.batch_input, effective, "BatchInput")
    empty_bytes = len(dumps({**shell, "Items": []}).encode())
    batches: list[list[Any]] = []
    size = 0
    for item in inputs:
        item_bytes = len(dumps(item).encode())
        if max_bytes is not None and empty_bytes + item_bytes > max_bytes:
            raise StatesError(errors.RUNTIME, f"An item of {item_bytes} bytes does not fit in a batch of "
                              f"MaxInputBytesPerBatch {max_bytes} bytes")
        full = batches and ((max_items is not None and len(batches[-1]) >= max_items)
                            or (max_bytes is not None and size + 1 + item_bytes > max_bytes))
        if not batches or full:
            batches.append([])
            size = empty_bytes - 1  # the first item adds no comma
        batches[-1].append(item)
        size += 1 + item_bytes
    return [{**shell, "Items": items} for items in batches]


# -- values given as numbers, paths or expressions


def _given(step: Step, flow_id: str, state: MapState, field: str, value: int | float | CompiledValue | None,
           path: Path | None, effective: Any, context: Any, problem: Callable[[Any], str | None]) -> Any:
    """A field's value as written, from its Path (JSONPath) or from its expression (JSONata); ``problem`` says
    what the field takes when a value is not one of them."""
    if isinstance(value, CompiledValue):
        found = step.evaluate_expression(flow_id, state, value, effective, field)
        wanted = problem(found)
        if wanted is not None:
            raise query_error(f"The {field} field must evaluate to {wanted}, not {dumps(found)}", field)
        return found
    if path is not None:
        found = path.resolve(effective, context)
        wanted = problem(found)
        if wanted is not None:
            raise StatesError(errors.RUNTIME, f'The {field}Path field refers to value "{shown(found)}" which is '
                              f"not {wanted}: {path.text}")
        return found
    return value


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(value: Any) -> str | None:
    return None if _integer(value) and value >= 0 else "a non-negative integer"


def _positive(value: Any) -> str | None:
    return None if _integer(value) and value >= 1 else "a positive integer"


def _percentage(value: Any) -> str | None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return None if number and 0 <= value <= 100 else "a number from 0 to 100"
