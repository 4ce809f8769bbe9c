"""RFC 3339 timestamps as States Language uses them (Wait.Timestamp, Timestamp* comparisons), in milliseconds."""

from __future__ import annotations

import re
from datetime import UTC, datetime

_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|z|[+-]\d{2}:\d{2})$")


def parse_ms(text: object) -> int | None:
    """Epoch milliseconds for an RFC 3339 timestamp, or None when ``text`` is not one."""
    if not isinstance(text, str) or not _RFC3339.match(text):
        return None
    normal = text[:-1] + "+00:00" if text[-1] in "Zz" else text
    if "." in normal:  # datetime takes at most 6 fractional digits
        head, rest = normal.split(".", 1)
        digits = re.match(r"\d+", rest).group(0)
        normal = f"{head}.{digits[:6].ljust(6, '0')}{rest[len(digits):]}"
    try:
        moment = datetime.fromisoformat(normal)
    except ValueError:
        return None
    return int(moment.timestamp() * 1000) if moment.microsecond == 0 else round(moment.timestamp() * 1000)


def format_ms(epoch_ms: int) -> str:
    """The ISO form AWS uses in the context object, e.g. 2024-05-01T12:00:00.123Z."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"
