"""Parallel and Map: their children's inputs, the children's records, the join, and a child's failure.

Every Parallel branch and Map iteration runs as a child flow "<entered event id of the state>.<index>"; the parent
flow holds a ``FanOut`` while it gathers. Only running children are stored, so a Map over 1,000 items at
MaxConcurrency 40 holds at most 40 flows. This module keeps the books; running a child is ``flows.gather``'s
(children run inline, so it must not import ``flows``). Functions over a ``step.Step``; pure, like the rest of
the decider.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from ..asl import errors
from ..asl.dataflow import select
from ..asl.errors import StatesError
from ..asl.jsonio import dumps, shown
from ..asl.states import MapState, ParallelState
from . import jsonata_states, retry_catch, tasks
from .execution import FanOut, Flow
from .outcomes import End, Next, Outcome
from .step import Step

_INTEGER_TEXT = re.compile(r"-?[0-9]+")

INLINE_MAP_CONCURRENCY_MAX = 40  # iterations of an inline Map running at once (AWS's documented bound)


def enter(step: Step, flow_id: str, state: ParallelState | MapState, data: Any, context: Any) -> None:
    """Evaluate the children's inputs and record the fan-out; ``flows.gather`` then starts the children. A fan-out a
    redrive re-enters keeps the inputs and the results its children gathered before."""
    flow = step.flows[flow_id]
    halted_id = step.resuming.get(flow_id)
    if halted_id is not None:
        _reenter(step, flow_id, step.resumed[halted_id].fan)
        return
    if isinstance(state, MapState):
        _, inputs, limit = map_inputs(step, flow_id, state, data, context)
        start_map(step, flow_id, inputs, limit, data)
        return
    if state.query_language == "JSONata":
        inputs = jsonata_states.branch_inputs(step, flow_id, state, data)
    else:
        effective = step.note("afterInputPath", select(state.input_path, data, context))
        if state.parameters is not None:
            effective = step.note("afterParameters", state.parameters.render(effective, context, step.seed_of(flow)))
        inputs = [effective] * len(state.branches)
    started = step.emit("ParallelStateStarted", None, None, flow=flow_id)
    flow.fan = FanOut("parallel", inputs, [None] * len(inputs), 0, 0, 0, data, started)


def map_inputs(step: Step, flow_id: str, state: MapState, data: Any, context: Any,
               read: Callable[[Any], list[Any]] | None = None, first: int = 0) -> tuple[Any, list[Any], int]:
    """A Map's effective input (after InputPath; a JSONata state's input), its iterations' inputs and its
    MaxConcurrency. ``read``: a distributed Map's ItemReader, which makes the items of the effective input (they
    are not selected by ItemsPath or Items); ``first``: the index of its first item (a page after the first)."""
    if state.query_language == "JSONata":
        items = None if read is None else read(data)
        inputs, limit = jsonata_states.map_inputs(step, flow_id, state, data, items, first)
        return data, inputs, limit
    effective = step.note("afterInputPath", select(state.input_path, data, context))
    items = _map_items(step, state, effective, context) if read is None else read(effective)
    inputs = _selected(step, flow_id, state, effective, items, first)
    limit = step.note("maxConcurrency", _map_concurrency(state, effective, context))
    return effective, inputs, _allowed(limit)


def map_concurrency(step: Step, flow_id: str, state: MapState, data: Any, context: Any) -> int:
    """A Map's MaxConcurrency alone (a distributed Map's run is created before its ItemReader read the items)."""
    if state.query_language == "JSONata":
        return jsonata_states.max_concurrency(step, flow_id, state, data)
    return _allowed(_map_concurrency(state, select(state.input_path, data, context), context))


def _allowed(limit: int) -> int:
    if limit < 0:  # only TestState gets here: an execution stalls before it enters the Map (stalls)
        raise StatesError(errors.RUNTIME, f"Expected non-negative integer for MaxConcurrency, got '{limit}' "
                          "instead.")
    return limit


def start_map(step: Step, flow_id: str, inputs: list[Any], limit: int, data: Any) -> None:
    """Record a Map's fan-out over its iterations' inputs."""
    started = step.emit("MapStateStarted", "mapStateStartedEventDetails", {"length": len(inputs)}, flow=flow_id)
    step.flows[flow_id].fan = FanOut("map", inputs, [None] * len(inputs), 0, 0, limit, data, started)


def _reenter(step: Step, flow_id: str, before: FanOut) -> None:
    flow = step.flows[flow_id]
    if before.kind == "parallel":
        started = step.emit("ParallelStateStarted", None, None, flow=flow_id)
    else:
        started = step.emit("MapStateStarted", "mapStateStartedEventDetails", {"length": len(before.inputs)},
                            flow=flow_id)
    flow.fan = FanOut(before.kind, before.inputs, list(before.results), before.next_index, 0, before.max_concurrency,
                      flow.data, started, dict(before.texts))


def resumed_children(step: Step, flow_id: str, state: ParallelState | MapState) -> Iterator[tuple[str, str, Any, int]]:
    """Redrive: the branches or iterations of a re-entered fan-out that had not succeeded, each added again (in
    index order) where it stood; yields (its flow id, the state it enters, that state's input, where its entry
    points). They all ran at once before, so MaxConcurrency allows them; those never started come after, in
    ``flows.gather``'s loop. Stops when the fan-out ends (a resumed child failed): until it is added again, each
    child waits in ``step.halted`` under the re-entered fan-out, so the next redrive still finds those the
    fan-out ended before (a Retry or Catch that takes the failure forgets them with the rest)."""
    halted_id = step.resuming.pop(flow_id, None)
    if halted_id is None:
        return
    flow = step.flows[flow_id]
    fan = flow.fan
    children = sorted((child.slot, child_id) for child_id, child in step.resumed.items() if child.parent == halted_id)
    waiting = {halted_child: _keep_waiting(step, halted_child, flow_id) for _, halted_child in children}
    for index, halted_child in children:
        if flow.fan is not fan:
            return
        for kept_id in waiting.pop(halted_child):
            step.halted.pop(kept_id, None)
        child_id, _, previous = add_child(step, flow_id, state, index)
        fan.next_index = max(fan.next_index, index + 1)  # a child failing as it started was not counted yet
        name, data = step.resume(child_id, halted_child)
        yield child_id, name, data, previous


def _keep_waiting(step: Step, halted_child: str, flow_id: str) -> list[str]:
    """Keep a halted child (and the flows under it) in ``step.halted``, its parent now the re-entered fan-out
    ``flow_id``; returns the ids kept."""
    kept = [found_id for found_id in step.resumed if step.under(found_id, halted_child, step.resumed)]
    for found_id in kept:
        copy = step.resumed[found_id].copy()
        if found_id == halted_child:
            copy.parent = flow_id
        step.halted[found_id] = copy
    return kept


def _map_items(step: Step, state: MapState, effective: Any, context: Any) -> list[Any]:
    items = step.note("afterItemsPath", select(state.items_path, effective, context))
    if not isinstance(items, list):
        where = state.items_path.text if state.items_path is not None else "null"
        raise StatesError(errors.RUNTIME, f"Item list under path '{where}' must be an array, but got: {dumps(items)}")
    return items


def _selected(step: Step, flow_id: str, state: MapState, effective: Any, items: list[Any],
              first: int = 0) -> list[Any]:
    """Each iteration's input: the item, or the ItemSelector rendered with $$.Map.Item."""
    if state.item_selector is None:
        return items
    flow = step.flows[flow_id]
    return step.note("afterItemSelector", [
        state.item_selector.render(effective, step.scope(flow_id, state.name, (i, item)),
                                   lambda i=i: step.seed(flow) + i.to_bytes(4, "big"))
        for i, item in enumerate(items, first)])


def stalls(step: Step, flow_id: str, state: MapState, data: Any) -> bool:
    """Whether the Map's MaxConcurrencyPath resolves to a negative integer. AWS then records nothing of the state,
    not even its entry, and the execution stays open, waiting on nothing, until it is stopped or times out
    (recorded on AWS, 22-04-2024: ExecutionStarted alone, two minutes on, for a Map first in its machine; LocalStack's
    snapshot test_max_concurrency_path_negative). That a flow stalls alone, its siblings going on, is inferred.
    Any other failure of the path is recorded once the state is entered. TestState, which enters no state this
    way, reports a negative one as a failure (map_inputs)."""
    if state.max_concurrency_path is None:
        return False
    context = step.scope(flow_id, state.name)
    try:
        return _map_concurrency(state, select(state.input_path, data, context), context) < 0
    except StatesError:
        return False


def _map_concurrency(state: MapState, effective: Any, context: Any) -> int:
    """MaxConcurrencyPath's value (a negative one stalls the flow: ``stalls``). AWS takes an integer or a string of
    one (execution input often carries numbers as text); any other value is "not a valid integer", quoted raw if a
    string and as JSON otherwise."""
    if state.max_concurrency_path is None:
        return state.max_concurrency
    value = state.max_concurrency_path.resolve(effective, context)
    if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value):
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise StatesError(errors.RUNTIME, f'The MaxConcurrencyPath field refers to value "{shown(value)}" which is '
                          f"not a valid integer: {state.max_concurrency_path.text}")
    return value


def may_start_child(fan: FanOut) -> bool:
    """Another child is left and MaxConcurrency allows it. An inline Map runs at most INLINE_MAP_CONCURRENCY_MAX
    iterations at once, whatever its MaxConcurrency, as AWS documents ("up to 40 concurrent iterations"): so an
    execution's state holds at most that many flows per Map, which each of its steps copies and writes."""
    if fan.next_index >= len(fan.inputs):
        return False
    limit = fan.max_concurrency
    if fan.kind == "map":
        limit = min(limit or INLINE_MAP_CONCURRENCY_MAX, INLINE_MAP_CONCURRENCY_MAX)
    return limit == 0 or fan.running < limit


def add_child(step: Step, flow_id: str, state: ParallelState | MapState, index: int) -> tuple[str, str, int]:
    """Record child ``index`` as running; returns its flow id, its first state and where its entry points."""
    fan = step.flows[flow_id].fan
    child_id = f"{step.flows[flow_id].entered_id}.{index}"
    if isinstance(state, ParallelState):
        machine = state.branches[index]
        previous = fan.started_id
    else:
        machine = state.processor
        previous = step.emit("MapIterationStarted", "mapIterationStartedEventDetails",
                             {"name": state.name, "index": index}, flow=child_id)
    step.flows[child_id] = Flow(machine.index, flow_id, index)
    fan.running += 1
    return child_id, machine.start_at, previous


def all_done(fan: FanOut) -> bool:
    return fan.running == 0 and fan.next_index == len(fan.inputs)


def join(step: Step, flow_id: str, state: ParallelState | MapState) -> Outcome:
    """Every child succeeded: the results, through ResultSelector, ResultPath and OutputPath, are the output."""
    flow = step.flows[flow_id]
    fan, flow.fan = flow.fan, None
    step.emit(f"{state.type}StateSucceeded", None, None, flow=flow_id)
    # AWS points the Exited event where Succeeded points: at the last event of the branches.
    exited_previous = step.decision.effects.events[-1]["previousEventId"]
    _join_texts(step, flow_id, fan)
    try:
        output, assigned = step.shape_result(flow_id, state, fan.state_input, fan.results)
    except StatesError as failure:
        gathered = flow.copy()
        gathered.fan = fan  # a redrive joins these results again, without rerunning the children
        step.halted.setdefault(flow_id, gathered)
        return retry_catch.failed_in_state(step, flow_id, state, failure)
    step.emit_exited(state, output, flow_id, assigned, exited_previous)
    return End(output) if state.end else Next(state.next, output)


def _join_texts(step: Step, flow_id: str, fan: FanOut) -> None:
    """The result as AWS writes it: each child's output as that child wrote it, joined with commas into an array.
    Recorded on AWS: branches passing on a Pass Result join as ``[[1,2,3,4],[1,2,3,4]]`` (2023); a Parallel in a
    Parallel whose branch passes on the execution input ``[[1, 2, 3], [4, 5, 6]]`` untouched writes
    ``[[[[1, 2, 3], [4, 5, 6]]]]`` (2024); branches passing on Parameters' objects join them compactly (2024). A
    child that finished in an earlier step left its own text in ``fan.texts`` (inferred: AWS keeps an untouched
    payload's text from state to state, whatever the steps in between). A distributed Map's ResultWriter summary
    (an object, in TestState a mock's) is written as it is."""
    if isinstance(fan.results, dict):
        step.known(fan.results, dumps(fan.results))
        return
    texts = [step.child_texts.pop((flow_id, slot), None) or fan.texts.get(str(slot)) or dumps(result)
             for slot, result in enumerate(fan.results)]
    joined = "[" + ",".join(texts) + "]"
    if fan.texts:
        step.keep(fan.results, joined)
    else:
        step.known(fan.results, joined)


def child_succeeded(step: Step, flow_id: str, output: Any) -> str:
    """Record a child's result and forget the child; returns the parent's flow id."""
    flow = step.flows.pop(flow_id)
    parent = step.flows[flow.parent]
    parent.fan.results[flow.slot] = output
    text = step.json_of(output, flow.state)
    if step.verbatim(output) is None:
        step.child_texts[(flow.parent, flow.slot)] = text
    else:  # kept with the fan-out: the join may come in a later step
        parent.fan.texts[str(flow.slot)] = text
    parent.fan.running -= 1
    if parent.fan.kind == "map":
        step.emit("MapIterationSucceeded", "mapIterationSucceededEventDetails",
                  {"name": parent.state, "index": flow.slot}, flow=flow_id)
    return flow.parent


def child_failed(step: Step, flow_id: str) -> str:
    """A child failed: it and its siblings stop, and the fan-out is over; returns the parent's flow id."""
    parent_id = step.flows[flow_id].parent
    step.halt(parent_id)
    parent = step.flows[parent_id]
    is_map = parent.fan.kind == "map"
    if is_map:
        step.emit("MapIterationFailed", "mapIterationFailedEventDetails",
                  {"name": parent.state, "index": step.flows[flow_id].slot}, flow=flow_id)
    _drop_children(step, parent_id, aborted_event=is_map, skip=flow_id)
    _drop_flow(step, flow_id)
    parent.fan = None
    step.cancel_timer(parent)  # its continuation to start more children, if it had one
    return parent_id


def failed(step: Step, flow_id: str, error: str | None, cause: str | None) -> Outcome:
    """A branch or iteration failed: retry the whole state, or record the failure."""
    return retry_catch.state_failed(step, flow_id, step.state_of(step.flows[flow_id]), error, cause)


def _drop_flow(step: Step, flow_id: str) -> None:
    flow = step.flows[flow_id]
    if flow.task is not None:
        tasks.end(step, flow_id, abandoned=True)
    if flow.fan is not None:  # a Parallel or Map inside: its children go first, while they can find it
        _drop_children(step, flow_id, aborted_event=False)
    del step.flows[flow_id]
    if flow.timer is not None:
        step.remove_timer(flow.timer)


def _drop_children(step: Step, parent_id: str, aborted_event: bool, skip: str | None = None) -> None:
    parent = step.flows[parent_id]
    for child_id in [fid for fid, flow in step.flows.items() if flow.parent == parent_id and fid != skip]:
        if aborted_event:
            step.emit("MapIterationAborted", "mapIterationAbortedEventDetails",
                      {"name": parent.state, "index": step.flows[child_id].slot}, flow=child_id)
        _drop_flow(step, child_id)
