"""Opaque nextToken values: a store cursor wrapped so clients cannot mistake it for data."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from .errors import AwsError


def encode(cursor: str | None) -> str | None:
    return None if cursor is None else base64.urlsafe_b64encode(cursor.encode()).decode()


def decode(token: str | None) -> str | None:
    if not token:
        return None
    try:
        return base64.b64decode(token.encode(), altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise AwsError("InvalidToken", f"Invalid Token: '{token}'") from None


def page_size(value: int | None, default: int = 100) -> int:
    """maxResults: 0 or absent means the default; the model already capped it at 1000."""
    return value or default


def listing(key: str, items: list[dict[str, Any]], next_cursor: str | None) -> dict[str, Any]:
    """A List* response: the items under ``key``, and a nextToken when there are more."""
    result: dict[str, Any] = {key: items}
    if next_cursor:
        result["nextToken"] = encode(next_cursor)
    return result
