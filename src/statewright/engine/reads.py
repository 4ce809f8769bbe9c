"""Reading executions on the engine thread: from the hot cache, from a tick's prefetch, or from the store.

A tick's commands whose executions are not cached are read in one store call before they apply (a networked store
would otherwise take a round trip per new execution on the engine thread); an express execution is read from memory
only, while it runs. Only executions of shards this engine serves are cached: another node's change behind this
one's back. Must not import the API, the integrations or the cluster.
"""

from __future__ import annotations

from ..decider.execution import ExecutionState
from ..store.base import Store
from .batch import Batch
from .caches import Executions
from .express import ExpressRuns, is_express
from .shards import Shards


class ExecutionReads:
    def __init__(self, store: Store, executions: Executions, shards: Shards, express: ExpressRuns) -> None:
        self.store = store
        self.executions = executions
        self.shards = shards
        self.express = express

    def prefetch(self, arns: list[str], batch: Batch) -> None:
        """Read those of ``arns`` this engine does not hold into ``batch.fetched`` (None: not found, a new one); a
        tick may prefetch more than once (the calls that join it late)."""
        wanted = list(dict.fromkeys(  # in the work's order (not a set's): the simulator replays a seed exactly
            arn for arn in arns if not self.executions.holds(arn) and not is_express(arn)
            and self.shards.serves(self.shards.of(arn))))
        if not wanted:
            return
        try:
            found = self.store.load_executions(wanted)
        except Exception as exc:  # as if each had failed to load: their commands fail (and come again, if retried)
            batch.unread.update(dict.fromkeys(wanted, exc))
            return
        for arn in wanted:
            blob = found.get(arn)
            try:
                batch.fetched[arn] = None if blob is None else self.keep(ExecutionState.from_blob(blob))
            except Exception as exc:  # a row this build cannot read fails its own commands, not the tick
                batch.unread[arn] = exc

    def load(self, arn: str, batch: Batch | None = None) -> ExecutionState | None:
        """The execution as this engine last committed it (None: it does not exist)."""
        if is_express(arn):  # in memory only, while it runs
            run = self.express.runs.get(arn)
            return None if run is None else run.state
        state = self.executions.get(arn)
        if state is not None:
            return state
        if batch is not None and arn in batch.fetched:
            return batch.fetched[arn]
        if batch is not None and arn in batch.unread:
            raise batch.unread[arn]
        blob = self.store.load_execution(arn)
        return None if blob is None else self.keep(ExecutionState.from_blob(blob))

    def keep(self, state: ExecutionState) -> ExecutionState:
        if self.shards.serves(state.shard_id):  # another node's executions change behind this one's back
            self.executions.remember(state)
        return state
