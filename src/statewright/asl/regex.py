"""Regular expressions written in JSONata (literals ``/pattern/flags`` given to $match, $contains, $replace,
$split, or called as functions) run on RE2, whose matching time is linear in the text: a definition cannot hold
the process with a pattern such as ``/(a+)+$/``, which Python's backtracking ``re`` takes seconds per extra
character to refuse.

``compile_regex`` is jsonata-python's ``regex_engine`` hook (``Jsonata(text, compile_regex)``), called once per
literal when a definition is compiled. A pattern neither RE2 nor Python's ``re`` can read is a syntax error at
CreateStateMachine, as a broken literal is for jsonata-js. A pattern only a backtracking engine can run
(backreferences, lookaround) is accepted, as AWS accepts it, and fails the evaluation that uses it with
States.QueryEvaluationError: it never falls back to backtracking. JavaScript's ``\\uXXXX`` escape is read as RE2's
``\\x{XXXX}``; ``$`` ends the text only, as in JavaScript (Python's also matches before a final newline).

$toMillis(timestamp, picture) matches the timestamp against a pattern built from the picture, in which the
library leaves the picture's literal text unescaped (``[Y](a+)+`` is a regex bomb) and puts one ``[0-9]+`` per
component (``[f][f][f]...`` against a long run of digits is another). jsonata-python has no hook for it, so
``install_picture_engine`` gives its datetime module a ``re`` of its own whose ``compile`` sends that one pattern
(the only one it compiles case-insensitively) to RE2; everything else there stays on Python's ``re``.

Pure: imports nothing from the engine or the store. Python's ``re`` is used only to compile patterns (to tell a
broken pattern from one RE2 lacks) and for fixed patterns of our own, never to run a user's pattern.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable, Iterator
from typing import Any

import re2
from jsonata import datetimeutils
from jsonata.jexception import JException
from jsonata.regex_engine import RegexFlags

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print each refused pattern to stderr; the caller reports it instead

_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|.)", re.DOTALL)
_RE2_LIMITS = "regular expressions run on RE2: no backreferences, no lookaround, repeats up to 1000"
_GROUP_REFERENCE = re.compile(r"\\g<(\d+)>")  # how jsonata-python writes $N of a $replace replacement


class RegexError(JException):
    """A regular expression that cannot be compiled or run here; ``str()`` is the whole cause. A JException, so the
    library passes it through unchanged."""

    def __init__(self, message: str) -> None:
        super().__init__("D3137", -1)  # the code of errors raised by functions ($error); the message says the rest
        self.message = message

    def __str__(self) -> str:
        return self.message


def compile_regex(pattern: str, flags: RegexFlags) -> LinearPattern | UnsupportedPattern:
    """The compiled form of the JSONata literal ``/pattern/`` with flags ``i`` and ``m``.

    Raises RegexError for a pattern no regular expression engine accepts."""
    inline = ("(?i)" if flags.case_insensitive else "") + ("(?m)" if flags.multiline else "")
    try:
        return LinearPattern(re2.compile(inline + _ESCAPE.sub(_rewrite_escape, pattern), _OPTIONS))
    except re2.error as exc:
        reason = _reason(exc)
    try:
        re.compile(pattern)  # compiling does not match, so it cannot backtrack
    except (re.error, OverflowError, RecursionError) as exc:
        raise RegexError(f"the regular expression /{pattern}/ is not valid: {exc}") from None
    return UnsupportedPattern(f"The regular expression /{pattern}/ cannot be run: {reason} ({_RE2_LIMITS})")


def compile_filter_regex(pattern: str) -> Any:
    """The pattern of a JSONPath filter ``=~`` on RE2 (Python's syntax, as jsonpath-ng reads it), cached by RE2.

    Raises ValueError, saying why, for a pattern RE2 cannot run."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        raise ValueError(f"the regular expression {pattern!r} cannot be run: {_reason(exc)} ({_RE2_LIMITS})") from None


def _reason(exc: Exception) -> str:
    return exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)


def _rewrite_escape(match: re.Match[str]) -> str:
    return f"\\x{{{match.group(1)}}}" if match.group(1) else match.group(0)


class LinearPattern:
    """An RE2 pattern with the methods jsonata-python calls on a compiled regex (its CompiledPattern protocol)."""

    __slots__ = ("_regexp",)

    def __init__(self, regexp: Any) -> None:
        self._regexp = regexp

    @property
    def pattern(self) -> str:
        return self._regexp.pattern

    def search(self, string: str) -> Any:
        return self._regexp.search(string)

    def finditer(self, string: str) -> Iterator[Any]:
        return self._regexp.finditer(string)

    def split(self, string: str, maxsplit: int = 0) -> list[str]:
        return self._regexp.split(string, maxsplit)

    def sub(self, repl: str | Callable[[Any], str], string: str, count: int = 0) -> str:
        """``repl`` is a function of the match, or a replacement in which jsonata-python has written JSONata's
        ``$N`` as ``\\g<N>``. Everything else in it is literal, backslashes included, as in jsonata-js."""
        if callable(repl):
            return self._regexp.sub(repl, string, count)
        pieces = _GROUP_REFERENCE.split(repl)  # literal, group number, literal, ...
        return self._regexp.sub(lambda match: self._expand(pieces, match), string, count)

    def _expand(self, pieces: list[str], match: Any) -> str:
        out = []
        for index, piece in enumerate(pieces):
            if index % 2 == 0:
                out.append(piece)
                continue
            # jsonata-js reads as many digits as name a group (``$12`` with one group is group 1, then "2"); the
            # first digit is always taken, and a group that does not exist, or did not take part, gives "".
            digits, rest = piece, ""
            while len(digits) > 1 and int(digits) > self._regexp.groups:
                digits, rest = digits[:-1], digits[-1] + rest
            group = int(digits)
            out.append((match.group(group) if group <= self._regexp.groups else None) or "")
            out.append(rest)
        return "".join(out)


class UnsupportedPattern:
    """A pattern RE2 cannot run: accepted when the definition is compiled, failing each evaluation that uses it."""

    __slots__ = ("_cause",)

    def __init__(self, cause: str) -> None:
        self._cause = cause

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise RegexError(self._cause)

    search = finditer = split = sub = _refuse


def install_picture_engine() -> None:
    """Run $toMillis's picture patterns on RE2 (see the module docstring); idempotent."""
    if isinstance(datetimeutils.re, _PictureRe):
        return
    datetimeutils.re = _PictureRe()


class _PictureRe(types.SimpleNamespace):
    """Python's ``re`` as jsonata.datetimeutils uses it, with the picture's pattern compiled for RE2."""

    def __init__(self) -> None:
        super().__init__(**{name: getattr(re, name) for name in re.__all__ if name != "compile"})

    @staticmethod
    def compile(pattern: str, flags: int = 0) -> Any:
        if flags == re.IGNORECASE:  # parse_datetime's pattern: the picture's parts, anchored at both ends
            return compile_regex(pattern, RegexFlags(case_insensitive=True))
        return re.compile(pattern, flags)
