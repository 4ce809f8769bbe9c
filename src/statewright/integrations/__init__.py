"""The asynchronous edges a started attempt calls for outside I/O: activity workers (matching) and HTTP endpoints.

Above the engine in the layers: integrations receive committed dispatches from it, record the attempt as started
through it before anything leaves, and hand results back as engine commands. Engine-to-engine work (nested
executions, a child telling its parent, cascading stops) is not here: the engine applies it inside its tick
(``engine/transfers.py``). Must not import statewright.api.
"""
