"""How a node logs: one line per event an operator cares about (its settings as it starts, serving, shards gained
and lost summarised per cause and peer, a fenced write, the store out of reach and back, a stop and what it
drained), as text or as JSON lines for log shippers (``serve --log-format json``).

An event is logged with ``event(logger, name, message, **fields)``: the text line is the message; the JSON line
has stable keys, ``time`` (ISO 8601, UTC, milliseconds), ``level``, ``logger``, ``event`` (its name; absent for
lines that are not events, such as a library's), ``message``, and the event's fields.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import Any

TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FORMATS = ("text", "json")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class JsonLines(logging.Formatter):
    """A record as one JSON object on one line."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        line: dict[str, Any] = {"time": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                                "level": record.levelname, "logger": record.name}
        name = getattr(record, "event", None)
        if name is not None:
            line["event"] = name
        line["message"] = record.getMessage()
        line.update(getattr(record, "fields", {}))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure(level: str = "INFO", form: str = "text") -> None:
    """Every record at ``level`` or above to stderr, as ``form`` says (text or json)."""
    global configured
    configured = (level, form)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines() if form == "json" else logging.Formatter(TEXT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("httpx").setLevel(max(logging.WARNING, root.level))  # a line per membership poke otherwise


configured = ("INFO", "text")  # the last ``configure``'s settings (a helper process logs as its server does)


def event(logger: logging.Logger, name: str, message: str, *args: Any, level: int = logging.INFO,
          **fields: Any) -> None:
    """Log the event ``name``: ``message`` (%-formatted with ``args``) with its ``fields``."""
    logger.log(level, message, *args, extra={"event": name, "fields": fields})


def shards(numbers: list[int] | set[int]) -> str:
    """Shard numbers as an operator reads them: ``4 shards (0-2, 6)``, ``shard 3``."""
    if len(numbers) == 1:
        return f"shard {next(iter(numbers))}"
    return f"{len(numbers)} shards ({listed(numbers)})"


def listed(numbers: list[int] | set[int]) -> str:
    """Numbers as an operator reads them: ``0-3, 6``."""
    spans: list[list[int]] = []
    for number in sorted(numbers):
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
