"""Stream a log file through regexes, line-wise, without reading it whole.

The file is read in 1 MiB blocks cut at the last newline, decoded as UTF-8 with invalid
bytes replaced, and each regex runs over the whole block with ``search`` (C speed; literal
prefixes are skipped fast) rather than once per line. A match is only accepted inside one
line: one that crosses a newline is retried on its own line. A line longer than 1 MiB is
cut into 1 MiB pieces (a match that straddles a cut is missed; the line number stays right).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from aorta_tui.classify.linear import LinearMatch, LinearRegex, line_matches_bytes

BLOCK_BYTES = 1 << 20
MAX_EVIDENCE_CHARS = 300


def iter_blocks(source: str | os.PathLike[str] | BinaryIO, block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[str, int]]:
    """Yield ``(text, number of its first line)``; each text ends at a line end or a cut.

    ``source`` is a path the caller trusts, or a file already opened (a run directory's log
    comes opened by the run's file layer: no link followed, no FIFO waited on); an opened
    file stays the caller's to close."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as fh:
            yield from _blocks_of(fh, block_bytes)
        return
    yield from _blocks_of(source, block_bytes)  # the caller's file: left open


def _blocks_of(fh: BinaryIO, block_bytes: int) -> Iterator[tuple[str, int]]:
    line_no = 1
    carry = b""
    while True:
        chunk = fh.read(block_bytes)
        if not chunk:
            if carry:
                yield carry.decode("utf-8", "replace"), line_no
            return
        buf = carry + chunk if carry else chunk
        cut = buf.rfind(b"\n")
        if cut < 0:
            if len(buf) >= block_bytes:  # an over-long line: cut it, same line number
                yield buf.decode("utf-8", "replace"), line_no
                carry = b""
            else:
                carry = buf
            continue
        body, carry = buf[: cut + 1], buf[cut + 1 :]
        yield body.decode("utf-8", "replace"), line_no
        line_no += body.count(b"\n")


def line_matches(rx: re.Pattern[str], text: str) -> Iterator[tuple[int, int, re.Match[str]]]:
    """``(line start, line end, match)`` for the first match of ``rx`` on each matching line."""
    pos = 0
    n = len(text)
    while pos <= n:
        m = rx.search(text, pos)
        if m is None:
            return
        start = m.start()
        ls = text.rfind("\n", 0, start) + 1
        le = text.find("\n", start)
        if le < 0:
            le = n
        if m.end() > le:  # crossed a line break: the match must fit in one line
            m = rx.search(text, ls, le)
            if m is None:
                pos = le + 1
                continue
        yield ls, le, m
        pos = le + 1


def needle_line_matches(
    rx: re.Pattern[str], text: str, needles: tuple[str, ...]
) -> Iterator[tuple[int, int, re.Match[str]]]:
    """Like :func:`line_matches`, but only lines holding one of ``needles`` are tried.

    ``str.find`` runs at memory speed, while a regex without a literal prefix (``\\b...``,
    alternations, ``^``, IGNORECASE) crawls through a large block; every match of a built-in
    pattern contains one of its needles, so this finds the same lines, much faster.
    """
    starts: set[int] = set()
    for needle in needles:
        pos = text.find(needle)
        while pos >= 0:
            ls = text.rfind("\n", 0, pos) + 1
            starts.add(ls)
            le = text.find("\n", pos)
            if le < 0:
                break
            pos = text.find(needle, le + 1)
    for ls in sorted(starts):
        le = text.find("\n", ls)
        if le < 0:
            le = len(text)
        m = rx.search(text, ls, le)
        if m is not None:
            yield ls, le, m


def evidence(text: str, ls: int, le: int, m: re.Match[str]) -> str:
    """The matching line, trimmed: the ``\\r``-separated piece that holds the match (progress
    bars rewrite one line with ``\\r``), at most ``MAX_EVIDENCE_CHARS`` around the match."""
    start = text.rfind("\r", ls, m.start()) + 1 or ls
    start = max(start, ls)
    end = text.find("\r", m.end(), le)
    end = le if end < 0 else end
    if end - start > MAX_EVIDENCE_CHARS:
        left = max(start, m.start() - MAX_EVIDENCE_CHARS // 3)
        end = min(end, left + MAX_EVIDENCE_CHARS)
        start = left
    return text[start:end].strip()


@dataclass
class Hit:
    line_no: int
    stream: str
    evidence: str
    captures: dict[str, Any]
    offset: int = 0  # the stream's byte offset of the line's start (of its piece: a long line)


@dataclass
class Matcher:
    """One regex being scanned for. ``accept`` turns a match into captures, or ``None`` to
    skip it (a recipe condition that does not hold). Scanning stops after ``cap`` hits.
    ``regex``: a built-in ``re`` pattern, or a recipe pattern compiled for RE2
    (:class:`~aorta_tui.classify.linear.LinearRegex`, matched on the block's bytes).
    ``keep_hits``: also keep the first that many hits in ``hits`` (a streamed recipe pattern
    whose condition can only be judged once the process has ended)."""

    id: str
    regex: re.Pattern[str] | LinearRegex
    accept: Callable[[Any], dict[str, Any] | None]
    needles: tuple[str, ...] = ()  # literal strings one of which every match contains
    cap: int = 1000
    first: Hit | None = None
    count: int = 0
    notes: list[str] = field(default_factory=list)
    keep_hits: int = 0
    hits: list[Hit] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.count >= self.cap


def scan_block(text: str, first_line: int, stream: str, matchers: list[Matcher],
               offset: int = 0) -> None:
    """Run every matcher that is not done over one block of whole lines."""
    data: bytes | None = None  # the block as UTF-8, for RE2 (recipe patterns)
    for mt in matchers:
        if mt.done:
            continue
        buf: str | bytes = text
        if isinstance(mt.regex, LinearRegex):
            data = text.encode("utf-8") if data is None else data
            buf = data
            # a LinearMatch exactly where buf is bytes: the loop tells them apart by buf
            found: Any = line_matches_bytes(mt.regex, data)
        elif mt.needles:
            found = needle_line_matches(mt.regex, text, mt.needles)
        else:
            found = line_matches(mt.regex, text)
        for ls, le, m in found:
            captures = mt.accept(m)
            if captures is None:
                continue
            mt.count += 1
            if mt.first is None or len(mt.hits) < mt.keep_hits:
                if isinstance(buf, bytes):  # m's offsets are within its own line
                    line_no = first_line + buf.count(b"\n", 0, ls)
                    ev = evidence(m.line, 0, len(m.line), m)
                    at = offset + ls
                else:
                    line_no = first_line + buf.count("\n", 0, ls)
                    ev = evidence(buf, ls, le, m)
                    at = offset + len(buf[:ls].encode("utf-8", "replace"))
                hit = Hit(line_no, stream, ev, captures, at)
                if mt.first is None:
                    mt.first = hit
                if len(mt.hits) < mt.keep_hits:
                    mt.hits.append(hit)
            if mt.done:
                break


class StreamScanner:
    """One stream's bytes through the matchers as they pass, in bounded memory.

    The same blocks as :func:`iter_blocks` (1 MiB cut at the last newline, an over-long line
    cut into pieces with its line number kept), built from whatever chunks arrive: the
    supervisor feeds a trial's whole output here as it reads it, so a line far beyond what
    its log file keeps (head + tail) is still seen (issue 27 item 16). Memory: at most about
    two blocks, however long the stream.
    """

    def __init__(self, stream: str, matchers: list[Matcher], block_bytes: int = BLOCK_BYTES) -> None:
        self.stream = stream
        self.matchers = matchers
        self.block_bytes = block_bytes
        self.scanned = 0  # bytes fed
        self._carry = bytearray()
        self._line = 1
        self._offset = 0  # stream offset of the carry's first byte

    def feed(self, data: bytes) -> None:
        self.scanned += len(data)
        self._carry += data
        while len(self._carry) >= self.block_bytes:
            if not self._flush(final=False):
                break

    def close(self) -> None:
        while self._carry:
            self._flush(final=True)

    def _flush(self, *, final: bool) -> bool:
        buf = self._carry
        cut = buf.rfind(b"\n", 0, self.block_bytes) if not final else len(buf) - 1
        if cut < 0:
            if len(buf) < self.block_bytes:
                return False
            cut = self.block_bytes - 1  # an over-long line: a piece of it, same line number
        body = bytes(buf[: cut + 1])
        del buf[: cut + 1]
        if any(not mt.done for mt in self.matchers):
            scan_block(body.decode("utf-8", "replace"), self._line, self.stream, self.matchers,
                       self._offset)
        self._line += body.count(b"\n")
        self._offset += len(body)
        return True


# Opens a trial's log for reading, or ``None`` for a log that is missing or refused. The
# orchestrator hands in its run's file layer (descriptor-relative, no link on the way); the
# default is the one checked open by path, for logs outside a run.
LogOpener = Callable[[Path], "BinaryIO | None"]


def open_log_checked(path: Path) -> BinaryIO | None:
    """The default :data:`LogOpener`: ``core/inputs``' checked open (a regular file, the last
    component never a link, a FIFO never waited on); a refusal is no log."""
    from aorta_tui.core.errors import AortaError
    from aorta_tui.core.inputs import open_input

    try:
        return open_input(path, what="log", follow_symlinks=False, missing_ok=True)
    except AortaError:
        return None


def scan_file(
    path: Path, stream: str, matchers: list[Matcher], *, block_bytes: int = BLOCK_BYTES,
    open_log: LogOpener = open_log_checked,
) -> None:
    """Run every matcher over ``path``; missing or unreadable files are skipped (the file is
    opened by ``open_log``: a FIFO, a device or a link planted by the trial is skipped)."""
    fh = open_log(path)
    if fh is None:
        return
    scanner = StreamScanner(stream, matchers, block_bytes)
    try:
        with fh:
            while chunk := fh.read(block_bytes):
                scanner.feed(chunk)
                if all(mt.done for mt in matchers):
                    return
    except OSError:
        return
    scanner.close()


def numeric_captures(m: re.Match[str] | LinearMatch) -> dict[str, Any]:
    """Named groups; values that parse as numbers become floats, absent groups ``None``."""
    out: dict[str, Any] = {}
    for name, value in m.groupdict().items():
        if value is None:
            out[name] = None
            continue
        try:
            out[name] = float(value.strip())
        except ValueError:
            out[name] = value
    return out


def line_wise(rx: re.Pattern[str]) -> re.Pattern[str]:
    """The same regex with ``^``/``$`` at line boundaries (it runs over blocks of lines)."""
    if rx.flags & re.MULTILINE:
        return rx
    return re.compile(rx.pattern, rx.flags | re.MULTILINE)
