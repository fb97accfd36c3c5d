"""Reading ``journal.jsonl`` back: each line parsed into its typed event (field types checked
against the event's annotations) or located as damage, a torn last line told apart, and a
huge line never read whole."""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import IO, Any

from aorta_tui.core.events import EVENT_TYPES, Event
from aorta_tui.core.inputs import conforms, hint_text, json_type_name
from aorta_tui.store.journal_file import open_journal_file
from aorta_tui.store.naming import JOURNAL, is_trial_id

# No line the engine writes comes near this; a longer one is damage, and reading it whole
# would cost its size in memory.
MAX_JOURNAL_LINE = 16 << 20


@dataclass(frozen=True)
class Damage:
    """A journal line that is not an event: where it is and what is wrong with it."""

    line: int
    reason: str

    def describe(self, path: Path | str = JOURNAL) -> str:
        return f"{path}:{self.line}: {self.reason}; skipped"


@dataclass
class JournalScan:
    events: list[Event] = field(default_factory=list)
    damaged: list[Damage] = field(default_factory=list)
    torn_tail: bool = False  # the last line has no newline: a writer was killed mid-line


_HINTS: dict[type[Event], dict[str, Any]] = {}


def _hints(cls: type[Event]) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def parse_journal_line(raw: bytes, *, sweep_ids: bool = True) -> tuple[Event | None, str | None]:
    """One journal line -> ``(event, None)``, or ``(None, why it is not an event)``. Never raises.

    ``sweep_ids=False`` accepts any trial id (an event stream of another engine: a policy
    sweep names its trials ``001-baseline-t1``)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, f"not JSON ({exc})"[:200]
    except RecursionError:
        return None, "JSON nested too deeply"
    if not isinstance(data, dict):
        return None, f"not an event (a JSON line holding {json_type_name(data)}, not an object)"
    kind = data.get("event")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        shown = kind if isinstance(kind, str) and len(kind) <= 40 else json_type_name(kind)
        return None, f"unknown event type {shown!r}" if isinstance(kind, str) else "no \"event\" name"
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        hint = hints.get(f.name, Any)
        # finite=False: the writer (json.dumps) puts a NaN figure down as NaN, and such a line
        # is still the event it was, not damage
        if not conforms(value, hint, finite=False):
            return None, f"{kind} field {f.name!r} is {json_type_name(value)}, not {hint_text(hint, finite=False)}"
        kwargs[f.name] = value
    missing = [f.name for f in fields(cls) if f.name not in kwargs
               and f.default is MISSING and f.default_factory is MISSING]
    if missing:
        return None, f"{kind} lacks {', '.join(repr(m) for m in missing)}"
    if sweep_ids and kind in ("trial_launch", "trial_started", "trial_finished") and not is_trial_id(kwargs.get("trial_id")):
        return None, f"{kind} with an invalid trial_id {str(kwargs.get('trial_id'))[:60]!r}"
    try:
        return cls(**kwargs), None
    except TypeError as exc:  # a required field is missing
        return None, f"{kind} is incomplete ({exc})"[:200]


def raw_lines(fh: IO[bytes], limit: int = MAX_JOURNAL_LINE) -> Iterator[tuple[int, bytes | None, bool]]:
    """``(line number, bytes or None when longer than limit, ended by a newline)``, reading in
    chunks so that a huge line costs no more memory than ``limit``."""
    lineno = 0
    buf = b""
    over = False
    while True:
        chunk = fh.read(1 << 20)
        if not chunk:
            break
        buf += chunk
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                break
            lineno += 1
            yield lineno, None if over or nl > limit else buf[:nl], True
            buf = buf[nl + 1:]
            over = False
        if len(buf) > limit:
            over, buf = True, b""
    if buf or over:
        yield lineno + 1, None if over else buf, False


def scan_journal(path: Path, *, sweep_ids: bool = True) -> JournalScan:
    """Every event of a journal, and every line that is not one (counted and located).

    ``sweep_ids=False``: trial ids of another engine's run (see ``parse_journal_line``)."""
    scan = JournalScan()
    fh = open_journal_file(path)
    if fh is None:
        return scan
    with fh:
        for lineno, raw, ended in raw_lines(fh):
            if not ended:
                scan.torn_tail = True  # the writer was killed mid-line: not damage
                break
            if raw is None:
                scan.damaged.append(Damage(lineno, f"longer than {MAX_JOURNAL_LINE >> 20} MiB"))
                continue
            if not raw.strip():
                continue
            event, why = parse_journal_line(raw, sweep_ids=sweep_ids)
            if event is not None:
                scan.events.append(event)
            else:
                scan.damaged.append(Damage(lineno, why or "damaged"))
    return scan


def iter_journal(path: Path) -> Iterator[Event]:
    """Events of a journal. A torn last line and damaged lines are skipped (see ``scan_journal``)."""
    yield from scan_journal(path).events


def read_journal(run_dir: str | Path) -> list[Event]:
    return list(iter_journal(Path(run_dir) / JOURNAL))
