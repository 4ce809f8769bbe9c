"""One tick's batch: the writes staged for one group commit, and what waits on that commit (callers' replies,
fired timers, transfer stages, express starts, execution logs).

The engine core makes a batch afresh each tick and its parts read it; nothing in it outlives the tick. A reply is
answered only once the write its result depends on has landed (``replies``' index), which is invariant 1 of
DESIGN.md seen from the caller's side. Must not import the API, the integrations or the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..decider.execution import ExecutionState
from ..store.base import ExecutionWrite

if TYPE_CHECKING:
    from ..decider.step import Decision
    from .commands import StartExecution
    from .transfers import Transfer

Reply = Any  # whatever the submitter passed with its command; only the engine's replies edge looks inside
HELD = object()  # what applying a command returns when an express run holds its reply until the run closes
# A reply's write index at or below this waits for the tick's express start rows instead: index EXPRESS_ROWS - i
# for the i-th asynchronous express start of the batch.
EXPRESS_ROWS = -2
# (state machine ARN, execution ARN, redrive count, events, trace context or None)
Logged = tuple[str, str, int, list[dict[str, Any]], str | None]


@dataclass(slots=True)
class Batch:
    writes: list[ExecutionWrite] = field(default_factory=list)
    states: list[ExecutionState] = field(default_factory=list)
    staged: dict[str, ExecutionState] = field(default_factory=dict)  # each execution's latest state in the batch
    # (reply, result, index of the write the result depends on, or -1): answered after the commit
    replies: list[tuple[Reply, object, int]] = field(default_factory=list)
    # write index -> the timers its decisions fired (ARN, timer id, due, fired at)
    fired: dict[int, list[tuple[str, str, int, int]]] = field(default_factory=dict)
    fetched: dict[str, ExecutionState | None] = field(default_factory=dict)  # read by the prefetch (None: new)
    unread: dict[str, Exception] = field(default_factory=dict)  # the prefetch failed for these: each fails alike
    # (transfer, its stage's replies, first write index, end write index): goes on only if those writes land
    transfers: list[tuple[Transfer, list[object], int, int]] = field(default_factory=list)
    group: int = 0  # the write group being staged (0: none): a transfer stage's writes land together or not at all
    last_write: dict[str, int] = field(default_factory=dict)  # each execution's last write in the batch, by index
    # Asynchronous express starts: their rows (shard, ARN, the command), and the commands to run once they landed
    express_rows: list[tuple[int, str, bytes]] = field(default_factory=list)
    express_starting: list[StartExecution] = field(default_factory=list)
    logged: list[Logged] = field(default_factory=list)  # committed (or express) history, for the execution logs
    # Writes later decisions on the same execution were folded into (Core._merge), with the last of them: serialized
    # again just before the commit
    unserialized: dict[int, Decision] = field(default_factory=dict)
    # While a transfer's stage applies: the earliest earlier write it was folded into, which it depends on too
    merged_at: int | None = None
