"""The web console, served on the API's port: the page at ``/`` (pages.py) and the feed of committed history that
tells it an execution moved on (feed.py)."""

from .feed import HistoryFeed
from .pages import Console

__all__ = ["Console", "HistoryFeed"]
