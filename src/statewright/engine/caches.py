"""The engine's caches: hot executions (a bounded LRU of open ones) and parsed definitions (one per revision).

Both are caches of the store: an execution leaves memory whenever it must (closed, evicted, its shard re-read or
lost) and is read again on its next command, so memory stays flat however many executions are open (invariant 5
of DESIGN.md). Used on the engine thread only. Must not import the API, the integrations or the cluster.
"""

from __future__ import annotations

from collections import OrderedDict

from ..asl.definition import Definition, parse_definition, processor_definition
from ..decider.execution import ExecutionState
from ..store.base import Store


class Executions:
    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._states: OrderedDict[str, ExecutionState] = OrderedDict()

    def __len__(self) -> int:
        return len(self._states)

    def get(self, arn: str) -> ExecutionState | None:
        state = self._states.get(arn)
        if state is not None:
            self._states.move_to_end(arn)
        return state

    def holds(self, arn: str) -> bool:
        return arn in self._states

    def remember(self, state: ExecutionState) -> None:
        """Keep an open execution hot; a closed one leaves memory at once."""
        if not state.is_open:
            self._states.pop(state.arn, None)
            return
        self._states[state.arn] = state
        self._states.move_to_end(state.arn)
        while len(self._states) > self._capacity:
            self._states.popitem(last=False)

    def forget(self, arn: str) -> None:
        self._states.pop(arn, None)

    def forget_shard(self, shard_id: int) -> None:
        for arn in [arn for arn, state in self._states.items() if state.shard_id == shard_id]:
            del self._states[arn]

    def all(self) -> list[ExecutionState]:
        return list(self._states.values())


class Definitions:
    """Each definition revision parsed once (never per transition), the first parsed leaving first."""

    def __init__(self, store: Store, capacity: int) -> None:
        self._store = store
        self._capacity = capacity
        self._parsed: OrderedDict[tuple[str, str], Definition] = OrderedDict()
        self._processors: OrderedDict[tuple[tuple[str, str], str], Definition] = OrderedDict()

    def of(self, state: ExecutionState) -> Definition:
        """The definition the execution runs: its revision's, or for a map run's child its distributed Map's
        ItemProcessor."""
        if state.processor is None:
            return self._parsed_as((state.state_machine_arn, state.revision_id))
        key = (state.state_machine_arn.split("/", 1)[0], state.revision_id)
        found = self._processors.get((key, state.processor))
        if found is None:
            found = self._processors[(key, state.processor)] = processor_definition(self._parsed_as(key),
                                                                                    state.processor)
            while len(self._processors) > self._capacity:
                self._processors.popitem(last=False)
        return found

    def _parsed_as(self, key: tuple[str, str]) -> Definition:
        definition = self._parsed.get(key)
        if definition is None:
            definition = parse_definition(self.text(key))
            self._parsed[key] = definition
            while len(self._parsed) > self._capacity:
                self._parsed.popitem(last=False)
        return definition

    def text(self, key: tuple[str, str]) -> str:
        """The text of the revision ``key`` (state machine ARN, revision id); LookupError if it is missing."""
        revision = self._store.get_revision(*key)
        if revision is None:
            raise LookupError(f"definition revision {key} is missing")
        return revision[0]
