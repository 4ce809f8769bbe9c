"""The Amazon States Language, pure: parsing, validation, paths, data flow and Choice rules.

Nothing in this package performs I/O, reads a clock or draws random numbers; the engine passes time in.
It must not import from statewright.engine, statewright.store or statewright.api.
"""
