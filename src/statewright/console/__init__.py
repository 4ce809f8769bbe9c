"""The web console, served on the API's port: the page at ``/`` and the console's own views (pages.py), the feed of
committed history that tells a page an execution moved on (feed.py), and the last Express executions (express.py)."""

from .express import ExpressRing
from .feed import HistoryFeed
from .pages import Console, ConsoleSources

__all__ = ["Console", "ConsoleSources", "ExpressRing", "HistoryFeed"]
