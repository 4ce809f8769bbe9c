"""The store's exceptions, in the three kinds ``base.Store`` promises: not committed (CommitFailed, the
MetadataConflict family), ownership lost (reported in a CommitResult, not raised), outcome unknown
(CommitOutcomeUnknown); and StoreUnavailable for a store that cannot answer now.

Invariant: raising one of these means what its docstring says about what was written; callers handle each kind in
one place. Imports nothing of statewright: every store module, the payload stores and the layers above may use it.
"""

from __future__ import annotations


class StoreUnavailable(Exception):
    """The store could not serve a call (disk full, database busy or gone); nothing changed. Retry later."""


class CommitFailed(StoreUnavailable):
    """The store refused a commit before writing anything: none of the batch landed."""


class CommitOutcomeUnknown(Exception):
    """The store failed mid-commit; the batch may or may not have landed."""


class ShardCountMismatch(Exception):
    """The data directory was created with another shard count, which cannot change."""


class SchemaTooNew(Exception):
    """The database was written by a newer statewright (a schema version above this code's): upgrade to open it."""


class MetadataConflict(Exception):
    """A version or alias write that what is stored refuses; nothing was written. The API answers each kind with
    AWS's error."""


class NoSuchStateMachine(MetadataConflict):
    pass


class RevisionChanged(MetadataConflict):
    """Publishing was conditional on a revision that is no longer the state machine's current one."""

    def __init__(self, expected: str, current: str) -> None:
        super().__init__(f"revision {expected} is not the current one ({current})")
        self.expected = expected
        self.current = current


class QuotaExceeded(MetadataConflict):
    """The state machine has as many versions (or aliases) as it may."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"at most {limit}")
        self.limit = limit


class VersionRouted(MetadataConflict):
    """The version cannot be deleted: these aliases (names) route to it."""

    def __init__(self, aliases: list[str]) -> None:
        super().__init__(f"routed to by {aliases}")
        self.aliases = aliases


class NoSuchVersions(MetadataConflict):
    """An alias names versions (numbers) the state machine does not have."""

    def __init__(self, numbers: list[int]) -> None:
        super().__init__(f"no versions {numbers}")
        self.numbers = numbers
