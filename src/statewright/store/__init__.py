"""Durable storage behind one interface (``base.Store``): SQLite embedded, PostgreSQL for several nodes.

Must not import statewright.engine or statewright.api.
"""
