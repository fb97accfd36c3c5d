"""Recipe regexes (``custom_patterns``, ``step_time_regex``) matched by RE2, in linear time.

Python's ``re`` backtracks: ``^(a+)+$`` against ``'a' * 28 + 'b'`` takes seconds and doubles
with every character, inside one C call that holds the GIL, so not even Ctrl-C is handled
until it returns. A recipe is user input, so its patterns run on RE2 (``google-re2``), whose
time is linear in the text whatever the pattern: no timeout or watchdog process is needed,
the verdict does not depend on how loaded the machine was, and each call over a 1 MiB block
returns within milliseconds, so a signal is handled at once. (The alternative - ``re`` in a
separate process under a time limit - keeps Python's syntax, but a pattern that times out
leaves the trial's classification incomplete and a process start per trial.)

The price is RE2's syntax: no lookaround (``(?=``, ``(?!``, ``(?<=``, ``(?<!``), no
backreferences (``\\1``, ``(?P=name)``), no ``(?x)``, ``\\Z`` (write ``\\z``), repetition
counts at most 1000; ``\\d``, ``\\w``, ``\\s``, ``\\b`` are ASCII. Recipe validation checks
each pattern with :func:`recipe_regex_issue` and names the construct. Built-in patterns
(``patterns.py``, ``dmesg.py``) stay on ``re``: they are fixed and tested against long
adversarial lines.

Matching runs over the UTF-8 bytes of a block (RE2's Python binding re-encodes a ``str`` on
every call, which would make a block scan quadratic); positions and captures are turned back
into text per hit.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aorta_tui.core.numerals import ascii_digits


@functools.cache
def _re2() -> tuple[Any, Any]:
    """The RE2 module and its options, imported on first use: importing the classifier does
    not need it (the kernel-log reader runs under the system Python in tests, for one)."""
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern to stderr itself
    return re2, options

# What RE2's messages mean in a recipe writer's words.
_HINTS = (
    ("(?=", "lookahead (?=...) / (?!...)"),
    ("(?!", "lookahead (?=...) / (?!...)"),
    ("(?<", "lookbehind (?<=...) / (?<!...)"),
    ("(?P=", "a backreference (?P=name)"),
    ("(?x", "verbose mode (?x)"),
    ("\\Z", "\\Z (RE2 writes the end of text as \\z)"),
)


def recipe_regex_issue(pattern: str) -> tuple[str, str] | None:
    """``(message, hint)`` when ``pattern`` cannot run on RE2, else None (recipe validation)."""
    re2, options = _re2()
    try:
        re2.compile(pattern, options)
    except re2.error as exc:
        reason = _reason(exc)
        what = next((name for token, name in _HINTS if token in reason), None)
        if what is None and "invalid escape sequence: \\" in reason and ascii_digits(reason[-1:]):
            what = "a backreference \\N"
        message = f"not supported by the linear-time matcher (RE2): {reason}"
        if what:
            message += f" - {what} is not available"
        return message, (
            "recipe patterns run on RE2, which never backtracks (a pattern cannot stall the "
            "run): rewrite without lookaround or backreferences, e.g. match the wider text "
            "and test a named group in `condition`"
        )
    return None


class LinearRegex:
    """A recipe pattern compiled for RE2, ``^``/``$`` at line boundaries, matched on bytes."""

    def __init__(self, pattern: str) -> None:
        re2, options = _re2()
        self.pattern = pattern
        self._rx = re2.compile(("(?m)" + pattern).encode("utf-8"), options)
        # (a bytes pattern has bytes group names; recipes and conditions use text)
        self.groupindex: dict[str, int] = {
            (k.decode("utf-8") if isinstance(k, bytes) else k): v
            for k, v in self._rx.groupindex.items()
        }
        self.groups: int = self._rx.groups

    def search(self, data: bytes, pos: int, endpos: int) -> Any:
        return self._rx.search(data, pos, endpos)


def compile_linear(pattern: str) -> LinearRegex:
    """Raises ``re.error`` (with RE2's reason) for a pattern RE2 refuses."""
    try:
        return LinearRegex(pattern)
    except _re2()[0].error as exc:
        raise re.error(f"{pattern!r}: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    raw = exc.args[0] if exc.args else exc
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


@dataclass
class LinearMatch:
    """The parts of ``re.Match`` the scanner uses, in text: offsets are within ``line``."""

    line: str
    _start: int
    _end: int
    _groups: dict[str, str | None]
    _numbered: tuple[str | None, ...]

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._end

    def groupdict(self) -> dict[str, str | None]:
        return dict(self._groups)

    def group(self, g: int | str = 0) -> str | None:
        if isinstance(g, str):
            return self._groups[g]
        return self.line[self._start : self._end] if g == 0 else self._numbered[g - 1]


def _text(data: bytes, a: int, b: int) -> str:
    return data[a:b].decode("utf-8", "replace")


def line_matches_bytes(rx: LinearRegex, data: bytes) -> Iterator[tuple[int, int, LinearMatch]]:
    """``(line start, line end, LinearMatch)`` (byte offsets) for the first match on each
    line of ``data`` (valid UTF-8); a match crossing a line break is retried on its line."""
    pos = 0
    n = len(data)
    while pos <= n:
        m = rx.search(data, pos, n)
        if m is None:
            return
        start = m.start()
        ls = data.rfind(b"\n", 0, start) + 1
        le = data.find(b"\n", start)
        if le < 0:
            le = n
        if m.end() > le:
            m = rx.search(data, ls, le)
            if m is None:
                pos = le + 1
                continue
        line = _text(data, ls, le)
        cs = len(_text(data, ls, m.start()))
        ce = cs + len(_text(data, m.start(), m.end()))
        numbered = tuple(_decoded(m.group(i)) for i in range(1, rx.groups + 1))
        groups = {name: numbered[i - 1] for name, i in rx.groupindex.items()}
        yield ls, le, LinearMatch(line, cs, ce, groups, numbered)
        pos = le + 1


def _decoded(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "replace")
