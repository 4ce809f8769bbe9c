"""RFC 3339 timestamps as States Language uses them (Wait.Timestamp, Timestamp* comparisons)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|z|[+-]\d{2}:\d{2})$")


def parse_exact(text: object) -> tuple[int, int] | None:
    """(epoch seconds, nanoseconds) for an RFC 3339 timestamp, or None when ``text`` is not one.

    Exact, so comparisons never round two different instants together.
    """
    if not isinstance(text, str):
        return None
    match = _RFC3339.match(text)
    if match is None:
        return None
    whole, fraction, zone = match.groups()
    try:
        moment = datetime.fromisoformat(whole + ("+00:00" if zone in "Zz" else zone))
    except ValueError:
        return None
    return int(moment.timestamp()), int((fraction or "0")[:9].ljust(9, "0"))


def parse_ms(text: object) -> int | None:
    """Epoch milliseconds (truncated) for an RFC 3339 timestamp, or None when ``text`` is not one."""
    exact = parse_exact(text)
    return None if exact is None else exact[0] * 1000 + exact[1] // 1_000_000


def format_ms(epoch_ms: int) -> str:
    """The ISO form AWS uses in the context object, e.g. 2024-05-01T12:00:00.123Z."""
    moment = datetime.fromtimestamp(epoch_ms // 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def is_iso8601(text: str) -> bool:
    """An ISO 8601 date, or date and time with or without an offset: looser than RFC 3339, as AWS reads the
    timestamps of its API models and of a given context object (a value without an offset included)."""
    try:
        datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text)
    except ValueError:
        return False
    return True
