"""The execution engine: the shard owners that apply commands through the decider and commit their results.

``core`` applies the commands of one execution one at a time through the pure decider (``statewright.decider``),
commits through the store and only then acts (replies, timers, dispatches); ``timers`` and ``outbox`` are its
bounded caches of the timer and outbox rows, ``transfers`` the engine-to-engine work it applies itself, ``express``
the executions it runs in memory, ``heavy_lane`` where heavy continuations are decided, ``limits`` every bound. It
must not import statewright.api, statewright.integrations (the layer above, which sends it commands) or
statewright.sim.
"""
