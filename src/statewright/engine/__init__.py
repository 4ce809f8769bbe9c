"""The execution engine: the pure decider, and the shard owners that apply commands and commit their results.

``decider`` (with the modules it is built from: ``step``, ``flows``, ``fan_out``, ``retry_catch``, ``tasks``,
``jsonpath_states``, ``jsonata_states``, ``outcomes``) and ``execution`` are pure (no clock, no I/O). ``core``
drives them: it applies the commands of one execution one at a time, commits through the store and only then acts
(replies, timers). It must not import statewright.api.
"""
