"""Choice's ``StringMatches`` patterns: ``*`` matches any run of characters (none included), ``\\*`` a literal
star and ``\\\\`` a literal backslash; no other character is special (the States Language specification). A
backslash before any other character stands for that character, and a trailing one for itself.

Invariant: matching is linear in the length of the value, whatever the pattern: the pattern is split at its stars
into literal segments, the first must start the value, the last must end it, and each one between is placed at
its leftmost occurrence after the one before (placing it further right can only leave less room for the rest),
so there is no backtracking. A regular expression built from the pattern would backtrack: ``*a*a*a*a*a*a*b``
against a run of ``a`` costs length^stars.

Pure: imports nothing from the engine or the store.
"""

from __future__ import annotations


class Wildcard:
    """A compiled ``StringMatches`` pattern."""

    __slots__ = ("pattern", "segments")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        # The literal text between the stars: one segment more than there are stars.
        self.segments = _segments(pattern)

    def matches(self, value: str) -> bool:
        """True when ``value`` as a whole matches the pattern."""
        segments = self.segments
        if len(segments) == 1:
            return value == segments[0]
        first, last = segments[0], segments[-1]
        end = len(value) - len(last)
        if end < len(first) or not value.startswith(first) or not value.endswith(last):
            return False
        position = len(first)
        for segment in segments[1:-1]:
            found = value.find(segment, position, end)
            if found < 0:
                return False
            position = found + len(segment)
        return True

    def __repr__(self) -> str:
        return f"Wildcard({self.pattern!r})"


def _segments(pattern: str) -> list[str]:
    segments, current, index = [], [], 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            current.append(pattern[index + 1])
            index += 2
            continue
        if char == "*":
            segments.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    segments.append("".join(current))
    return segments
