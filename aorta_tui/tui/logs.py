"""Reading a trial's logs for the screen: bounded reads, terminal-safe lines, a fair split.

Pure Python (no Textual): the matrix's tail, the trial detail and the full-log view read the
logs through here. A trial log is at most 64 MiB (the worker keeps head + marker + tail), so
nothing here reads a whole file unless it is small: the full view shows the first
``HEAD_BYTES`` and the last ``TAIL_BYTES`` and says what it left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from aorta_tui.core.errors import AortaError
from aorta_tui.core.inputs import open_input

LOG_NAMES = ("stderr.log", "stdout.log")
HEAD_BYTES = 1 << 20  # the full view: the start of a long log (start-up errors live there)
TAIL_BYTES = 7 << 20  # and its end (the failure)
TAIL_READ_BYTES = 16384  # the matrix's tail: a few screen lines at most

# Escape sequences (colours, cursor moves) and other control characters a program may print:
# written to the TUI's screen they would move its cursor or change its colours.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean_line(line: str) -> str:
    """A log line as text that is safe to draw: colour and cursor sequences dropped, tabs as
    spaces, any other control or format character (C1, bidi) shown as an escape
    (core/text.py, the one sanitiser for text from files)."""
    from aorta_tui.core.text import inert

    line = _ANSI.sub("", line)
    return inert(_CONTROL.sub("", line.replace("\t", "    ")))


def tail_lines(path: Path, lines: int, max_bytes: int = TAIL_READ_BYTES) -> list[str]:
    """The last ``lines`` lines of ``path`` (reading at most ``max_bytes``); [] if unreadable."""
    if lines <= 0:
        return []
    try:
        with _open_log(path) as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read(max_bytes)
    except (OSError, AortaError):
        return []
    text = data.decode("utf-8", "replace").splitlines()
    if size > max_bytes and text:
        text = text[1:]  # the first line read is (probably) cut: drop it
    return [clean_line(line) for line in text[-lines:]]


def _open_log(path: Path) -> BinaryIO:
    """A trial's log through the one checked open (a FIFO or a device planted by the trial
    would hang the screen); a missing log is ``FileNotFoundError``, as ``open`` says it."""
    fh = open_input(path, what="log", follow_symlinks=False, missing_ok=True)
    if fh is None:
        raise FileNotFoundError(path)
    return fh


def split_budget(budget: int, sizes: list[int]) -> list[int]:
    """Share ``budget`` screen lines among logs holding ``sizes`` lines, each shown under a
    one-line heading: no empty log gets a line, none gets more than it has, and the rest is
    shared as evenly as the sizes allow (the first log takes an odd line)."""
    shares = [0] * len(sizes)
    present = [i for i, n in enumerate(sizes) if n > 0]
    room = budget - len(present)  # the headings
    while room > 0:
        wanting = [i for i in present if shares[i] < sizes[i]]
        if not wanting:
            break
        each = max(1, room // len(wanting))
        for i in wanting:
            give = min(each, sizes[i] - shares[i], room)
            shares[i] += give
            room -= give
            if room == 0:
                break
    return shares


@dataclass
class LogText:
    """What the full view shows of one log file."""

    path: Path
    lines: list[str]
    size: int  # bytes on disk when read
    note: str  # "" when the whole file is shown; else what was left out, or why nothing
    read_to: int  # the offset up to which the file was read (to follow it as it grows)


def read_log(path: Path, head_bytes: int = HEAD_BYTES, tail_bytes: int = TAIL_BYTES) -> LogText:
    """The file's lines for the full-log view, the middle of a huge file left out (said so)."""
    try:
        with _open_log(path) as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(0)
            if size <= head_bytes + tail_bytes:
                data = fh.read(size)
                return LogText(path, _lines(data), size, "", len(data))
            head = fh.read(head_bytes)
            fh.seek(size - tail_bytes)
            tail = fh.read(tail_bytes)
    except FileNotFoundError:
        return LogText(path, [], 0, "not written (the trial has not started, or it wrote nothing)", 0)
    except OSError as exc:
        return LogText(path, [], 0, f"cannot read it: {exc.strerror or exc}", 0)
    except AortaError as exc:  # a FIFO, a device, a symlink: never opened for reading
        return LogText(path, [], 0, f"cannot read it: {exc.message}", 0)
    skipped = size - head_bytes - tail_bytes
    marker = f"… {skipped / (1 << 20):.1f} MiB not shown here: the whole file is {path} …"
    return LogText(path, [*_lines(head), marker, *_lines(tail)], size,
                   f"{skipped / (1 << 20):.1f} MiB in the middle not shown", size)


def read_more(log: LogText) -> list[str]:
    """Lines appended to the file since it was read (a running trial): [] if none."""
    try:
        with _open_log(log.path) as fh:
            fh.seek(0, 2)
            size = fh.tell()
            if size <= log.read_to:
                return []
            fh.seek(log.read_to)
            data = fh.read(min(size - log.read_to, TAIL_BYTES))
    except OSError:
        return []
    end = data.rfind(b"\n")
    if end < 0:
        return []  # only part of a line so far: wait for its end
    log.read_to += end + 1
    log.size = size
    return _lines(data[: end + 1])


def _lines(data: bytes) -> list[str]:
    return [clean_line(line) for line in data.decode("utf-8", "replace").splitlines()]
