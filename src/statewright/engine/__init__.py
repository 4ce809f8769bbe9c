"""The execution engine: the pure decider, and the shard owners that apply commands and commit their results.

``decider`` (with the modules it is built from: ``step``, ``flows``, ``fan_out``, ``retry_catch``, ``tasks``,
``jsonpath_states``, ``jsonata_states``, ``outcomes``) and ``execution`` are pure (no clock, no I/O). ``core``
drives them: it applies the commands of one execution one at a time, commits through the store and only then acts
(replies, timers, dispatches); ``timers`` and ``outbox`` are its bounded caches of the timer and outbox rows,
``transfers`` the engine-to-engine work it applies itself, ``limits`` every bound. It must not import
statewright.api, statewright.integrations (the layer above, which sends it commands) or statewright.sim.
"""
