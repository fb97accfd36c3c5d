"""Listing runs: each run directory under an output directory with its state (running,
finished, interrupted) and counts, read cheaply enough for the TUI's home screen."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aorta_tui.core.errors import AortaError
from aorta_tui.core.events import RunFinished, RunStarted
from aorta_tui.store.journal_file import open_journal_file
from aorta_tui.store.journal_reader import parse_journal_line, raw_lines
from aorta_tui.store.lock import lock_holder
from aorta_tui.store.naming import CREATING_SUFFIX, JOURNAL


@dataclass(frozen=True)
class RunInfo:
    path: Path
    ticket: str
    run_id: str
    state: str  # running, finished, interrupted
    total: int
    done: int
    started_at: float | None
    status: str | None  # the run_finished status, when there is one
    failed: int = 0  # finished trials with verdict fail / error (a "finished" run can be all failures)
    errored: int = 0


def run_info(run_dir: str | Path) -> RunInfo:
    run_dir = Path(run_dir)
    total = done = 0
    verdicts = {b"fail": 0, b"error": 0}
    started: float | None = None
    status: str | None = None
    # Listing runs (the TUI's home screen does it every few seconds) must not parse every
    # trial's line: the writer puts "event" first, so a prefix says what a line is.
    try:
        fh = open_journal_file(run_dir / JOURNAL)
    except AortaError:
        fh = None  # listed as a run without events: `attach` and `--resume` say what is wrong
    if fh is not None:
        with fh:
            for _lineno, line, ended in raw_lines(fh):
                if not ended:
                    break  # a torn last line
                if line is None:
                    continue  # a damaged (huge) line
                if line.startswith(b'{"event": "trial_finished"'):
                    # a whole line: not a fragment ended by a later writer, nor glued to one
                    whole = line.rstrip().endswith(b"}") and line.count(b'{"event": ') == 1
                    done += whole
                    # the first "verdict" is the event's own: trial_id and cell come before it
                    # and cannot hold quotes; reason and detectors (free text) come after
                    at = line.find(b'"verdict": "')
                    verdict = line[at + 12:line.find(b'"', at + 12)] if whole and at > 0 else b""
                    if verdict in verdicts:
                        verdicts[verdict] += 1
                elif line.startswith(b'{"event": "run_'):
                    ev, _ = parse_journal_line(line)
                    if ev is None:
                        continue
                    if isinstance(ev, RunStarted):
                        total = max(int(ev.total), 0)
                        started = started or ev.ts
                        status = None
                    elif isinstance(ev, RunFinished):
                        status = ev.status
    if lock_holder(run_dir) is not None:
        state = "running"
    elif status == "completed":
        state = "finished"
    else:
        state = "interrupted"
    return RunInfo(run_dir, run_dir.parent.name, run_dir.name, state, total, min(done, total or done),
                   started, status, verdicts[b"fail"], verdicts[b"error"])


def list_runs(output_dir: str | Path) -> list[RunInfo]:
    """Every run under ``output_dir`` (``<ticket>/<run-id>/journal.jsonl``), newest first."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    runs = [run_info(j.parent) for j in root.glob(f"*/*/{JOURNAL}")
            if not j.parent.name.endswith(CREATING_SUFFIX)]
    runs.sort(key=lambda r: r.started_at or 0.0, reverse=True)
    return runs
