"""Read a run's ``journal.jsonl`` from the start, then follow it as the engine appends.

No Textual here: ``aorta-tui attach --plain`` uses the same follower as the matrix screen, and
must not import the TUI toolkit. The journal is the run's source of truth (see
docs/architecture.md); re-attaching after a lost terminal is just reading it again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from aorta_tui.core.errors import AortaError
from aorta_tui.core.events import (
    CellAggregated,
    Event,
    HistogramSnapshot,
    Measurement,
    Progress,
    ResultWritten,
    RunFinished,
    RunStarted,
    RunWarning,
    TrialFinished,
    TrialLaunch,
    TrialStarted,
)
from aorta_tui.store.journal_file import open_journal_file
from aorta_tui.store.journal_reader import MAX_JOURNAL_LINE, Damage, parse_journal_line
from aorta_tui.store.naming import RUN_META

JOURNAL_NAME = "journal.jsonl"


class JournalLines:
    """Event lines out of arbitrary chunks of bytes, in bounded memory.

    One splitter for a journal file and an engine's stdout: a line is kept back until its
    newline arrives; a line longer than the engine ever writes is dropped up to its newline; a
    line that is not an event is located in ``damaged`` (the engine's own parser decides),
    never fatal.
    """

    def __init__(self, *, sweep_ids: bool = True) -> None:
        self.damaged: list[Damage] = []
        self._sweep_ids = sweep_ids
        self._lineno = 0
        self._partial = b""
        self._skipping = False  # inside a line longer than the limit: drop until its newline

    def feed(self, data: bytes) -> list[tuple[bytes, Event | None]]:
        """The complete lines ``data`` ends (with their events; None: counted as damaged)."""
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()  # b"" when data ended with a newline
        out: list[tuple[bytes, Event | None]] = []
        for raw in lines:
            self._lineno += 1
            if self._skipping:
                self._skipping = False
                self.damaged.append(Damage(self._lineno, f"longer than {MAX_JOURNAL_LINE >> 20} MiB"))
                continue
            if not raw.strip():
                continue
            event, why = parse_journal_line(raw, sweep_ids=self._sweep_ids)
            if event is None:
                self.damaged.append(Damage(self._lineno, why or "damaged"))
            out.append((raw, event))
        if len(self._partial) > MAX_JOURNAL_LINE:
            self._partial, self._skipping = b"", True
        return out

    def end(self) -> None:
        """The stream is over: a last line without its newline was cut off."""
        if self._partial and not self._skipping:
            self._lineno += 1
            self.damaged.append(Damage(self._lineno, "cut off (no newline at the end)"))
        self._partial, self._skipping = b"", False


class JournalReader:
    """Incremental reader: each call returns the events appended since the previous call.

    A line without its newline yet (the writer is mid-append, or was killed mid-line) is kept
    back until it is complete; a line that is not an event (damaged, truncated, not an object,
    a field of the wrong type, longer than the engine ever writes) is counted and located in
    ``damaged``, never fatal: the engine's own parser (``journal_reader.parse_journal_line``) decides.
    """

    CHUNK = 1 << 20

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / JOURNAL_NAME
        self.offset = 0
        # A recipe sweep's run has run.json and trial ids ``<cell>/trial-NNN``; a policy or a
        # queue sweep's has neither (ids of one path component: ``001-baseline-t1``, ``s0008``),
        # and its trial lines are events all the same, not damage.
        self._lines = JournalLines(sweep_ids=(Path(run_dir) / RUN_META).exists())

    @property
    def malformed(self) -> int:
        return len(self.damaged)

    @property
    def damaged(self) -> list[Damage]:
        return self._lines.damaged

    def read_new(self) -> list[Event]:
        events: list[Event] = []
        try:
            fh = open_journal_file(self.path)  # the one checked open: no FIFO, device or link
            if fh is None:
                return events
            with fh:
                fh.seek(self.offset)
                while chunk := fh.read(self.CHUNK):  # bounded memory, however much was appended
                    self.offset += len(chunk)
                    self._take(chunk, events)
        except (OSError, AortaError):  # unreadable now: nothing new (attach said why at start)
            return events
        return events

    def _take(self, data: bytes, events: list[Event]) -> None:
        events.extend(event for _raw, event in self._lines.feed(data) if event is not None)

def follow_journal(
    run_dir: Path,
    on_events: Callable[[list[Event]], None],
    stop: threading.Event,
    *,
    poll_s: float = 0.5,
    reader: JournalReader | None = None,
) -> None:
    """Deliver a journal's events in batches until ``stop`` is set (blocks: run it in a worker).

    It reads everything already written first (so opening a finished run, or re-attaching to a
    running one, shows the whole history), then waits on filesystem notifications (watchfiles)
    with a timeout, so a missed notification costs at most ``poll_s``.
    """
    from watchfiles import watch

    reader = reader if reader is not None else JournalReader(run_dir)

    def deliver() -> None:
        events = reader.read_new()
        if events:
            on_events(events)

    deliver()
    for _changes in watch(
        run_dir,
        watch_filter=lambda _change, path: path.endswith(JOURNAL_NAME),
        stop_event=stop,
        debounce=100,
        step=30,
        rust_timeout=max(50, int(poll_s * 1000)),
        yield_on_timeout=True,
        recursive=False,
        raise_interrupt=False,
    ):
        if stop.is_set():
            break
        deliver()


class JournalFollower:
    """:func:`follow_journal` on a thread of its own, for ``attach --plain`` (no Textual there:
    the TUI's screens follow a journal in a Textual worker, ``tui.bridge``)."""

    def __init__(
        self,
        run_dir: Path,
        on_events: Callable[[list[Event]], None],
        *,
        poll_s: float = 0.5,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.reader = JournalReader(self.run_dir)
        self._on_events = on_events
        self._on_error = on_error
        self._poll_s = poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"journal:{self.run_dir.name}", daemon=True)

    def start(self) -> JournalFollower:
        self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def _run(self) -> None:
        try:
            follow_journal(self.run_dir, self._on_events, self._stop, poll_s=self._poll_s, reader=self.reader)
        except BaseException as exc:  # a follower failure is shown, never a crash
            if self._on_error is not None and not self._stop.is_set():
                self._on_error(exc)


def format_event_line(event: Event) -> str:
    """One plain line per event, for ``attach --plain`` and logs (no colour, no toolkit)."""
    match event:
        case RunStarted():
            resumed = f", resumed with {event.already_done} done" if event.resumed else ""
            return (f"run {event.run_id} started: {event.total} trials over "
                    f"{len(event.cells or [])} cells{resumed}")
        case TrialStarted():
            return f"  start  {event.trial_id}"
        case TrialLaunch():
            return f"  launch {event.trial_id}"
        case TrialFinished():
            return _finished_line(event)
        case CellAggregated():
            rate = event.stats.failure_rate
            rate_s = f"{rate:.0%}" if isinstance(rate, (int, float)) else "n/a"
            return f"cell {event.cell}: failure rate {rate_s}"
        case Progress():
            total = f"/{event.total}" if event.total is not None else ""
            return f"progress {event.done}{total} {event.message}".rstrip()
        case RunWarning():
            return f"warning: {event.message}"
        case ResultWritten():
            return f"wrote {event.what}: {event.path}"
        case RunFinished():
            return f"run {event.run_id} {event.status} (exit code {event.exit_code})"
        case Measurement():
            return f"measurement {event.source}/{event.name}"
        case HistogramSnapshot():
            return f"histogram {event.probe_set}: {event.count} events"
    return event.kind


def _finished_line(event: TrialFinished) -> str:
    extra = []
    if event.exit_code is not None:
        extra.append(f"exit {event.exit_code}")
    if event.signal is not None:
        extra.append(f"signal {event.signal}")
    if event.detectors:
        extra.append("detectors " + ",".join(event.detectors))
    tail = f" ({'; '.join(extra)})" if extra else ""
    wall = event.wall_s
    wall_s = f"{wall:.2f}s" if isinstance(wall, (int, float)) else "wall n/a"
    return f"  {event.verdict:<5}  {event.trial_id}  {wall_s}{tail}"
