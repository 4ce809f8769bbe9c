"""The store contract: one suite that every Store implementation runs unchanged, one module per table or concern,
each testing one rule per test of the contract written at the top of that table's interface:

- store_contract_shards.py: shards, leases and nodes (statewright.store.shards);
- store_contract_executions.py: commit, executions and history (statewright.store.base);
- store_contract_timers.py: timers (statewright.store.base);
- store_contract_outbox.py: dispatches and express starts (statewright.store.base);
- store_contract_activities.py: activities and claims of their tasks (statewright.store.catalogue and base);
- store_contract_catalogue.py: settings, state machines, versions, aliases, tags (statewright.store.catalogue);
- store_contract_retention.py: compaction and expiry (statewright.store.retention).

An implementation's test module subclasses ``StoreContract`` under a ``Test*`` name and provides two hooks:

- ``make_store(shard_count)``: a new, EMPTY store (a fresh SQLite file, a fresh PostgreSQL schema);
- ``reopen_store(shard_count)``: another handle on the data of the last ``make_store`` (what a restarted
  process, or a second node, would open).

The suite talks to the ``Store`` interface only; it imports no implementation and no engine code. Its building
blocks are in store_contract_blocks.py (the backends' own tests use them too).
"""

from __future__ import annotations

from store_contract_activities import ActivitiesContract
from store_contract_catalogue import CatalogueContract
from store_contract_executions import ExecutionsContract
from store_contract_outbox import OutboxContract
from store_contract_retention import RetentionContract
from store_contract_shards import ShardsContract
from store_contract_timers import TimersContract


class StoreContract(ShardsContract, ExecutionsContract, TimersContract, OutboxContract, ActivitiesContract,
                    CatalogueContract, RetentionContract):
    """The contract suite; subclass it as ``Test<Backend>Store`` and implement the two hooks."""
