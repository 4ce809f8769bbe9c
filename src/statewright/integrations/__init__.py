"""What a started task attempt calls: activity workers (matching), HTTP endpoints, nested executions.

Integrations receive committed dispatches from the engine, record the attempt as started through the engine
before anything leaves, and report results back as engine commands. They must not import statewright.api.
"""
