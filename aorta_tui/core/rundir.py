"""The run directory: the source of truth of a run.

Layout of ``<output>/<ticket>/<run-id>/``::

    run.json              what was run (recipe hash, command, aorta-tui version), atomic
    recipe.resolved.yaml  the recipe with every default filled; re-running it gives the same plan
    plan.json             cells and trials in run order
    journal.jsonl         every event, one JSON object per line, appended and flushed
    .lock                 held (flock) by the orchestrator while it runs; holds its pid
    trials/<cell>/trial-<NNN>/{stdout.log, stderr.log, result.json}
    env/host_env.json, env/<environment>.json
    matrix.json, matrix.md

Killing the orchestrator at any point loses no completed trial: a trial counts as done only
when its ``trial_finished`` line is in the journal and its ``result.json`` is on disk, and both
are written before the next trial starts.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from aorta_tui import __version__
from aorta_tui.core.atomic import atomic_write_json
from aorta_tui.core.errors import RunDirError, UsageError
from aorta_tui.core.events import Event, event_from_dict

JOURNAL = "journal.jsonl"
LOCK = ".lock"
RUN_META = "run.json"


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def safe_component(text: str) -> str:
    """Turn a ticket into a directory name (tickets are free text in recipes)."""
    out = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in text.strip())
    return out.strip(".") or "untitled"


class RunLock:
    """An exclusive ``flock`` on ``<run>/.lock``. The kernel drops it when the holder dies."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK
        self._fh: IO[str] | None = None

    def acquire(self) -> None:
        fh = open(self.path, "a+")  # noqa: SIM115 - held for the run's lifetime
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                fh.close()
                raise
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            fh.close()
            raise RunDirError(
                f"{self.path.parent} is in use by {holder}",
                hint="wait for that run to finish, follow it with `aorta-tui attach "
                f"{self.path.parent}`, or cancel it first",
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                             "started_at": time.time()}) + "\n")
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


def lock_holder(run_dir: Path) -> dict[str, Any] | None:
    """The orchestrator holding the run's lock, or ``None`` when nobody runs it."""
    path = Path(run_dir) / LOCK
    try:
        fh = open(path)  # noqa: SIM115
    except OSError:
        return None
    with fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            try:
                return json.loads(fh.readline() or "{}")
            except json.JSONDecodeError:
                return {}
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return None


class Journal:
    """Append-only ``journal.jsonl``. Each line is flushed to the OS before ``append`` returns.

    A line that says a trial finished is also fsynced: a resume trusts those lines.
    """

    DURABLE = frozenset({"trial_finished", "run_finished", "run_started"})

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115
        if self._ends_torn():
            # A writer killed mid-line left a fragment: end it, or the next event would be
            # glued onto it and lost to every reader.
            self._fh.write("\n")
            self._fh.flush()

    def _ends_torn(self) -> bool:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                if fh.tell() == 0:
                    return False
                fh.seek(-1, os.SEEK_END)
                return fh.read(1) != b"\n"
        except OSError:
            return False

    def append(self, event: Event) -> None:
        line = json.dumps(event.to_dict(), ensure_ascii=False, default=str)
        self._fh.write(line + "\n")
        self._fh.flush()
        if event.kind in self.DURABLE:
            os.fsync(self._fh.fileno())

    # An EventSink, so the bus can feed it first.
    emit = append

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


def iter_journal(path: Path) -> Iterator[Event]:
    """Events of a journal. A torn last line (the writer was killed mid-write) is skipped."""
    try:
        fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
    except FileNotFoundError:
        return
    with fh:
        for line in fh:
            if not line.endswith("\n"):
                break
            line = line.strip()
            if not line:
                continue
            try:
                yield event_from_dict(json.loads(line))
            except (ValueError, TypeError):
                continue


def read_journal(run_dir: str | Path) -> list[Event]:
    return list(iter_journal(Path(run_dir) / JOURNAL))


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


def run_info(run_dir: str | Path) -> RunInfo:
    run_dir = Path(run_dir)
    total = done = 0
    started: float | None = None
    status: str | None = None
    # Listing runs (the TUI's home screen does it every few seconds) must not parse every
    # trial's line: the writer puts "event" first, so a prefix says what a line is.
    try:
        fh = open(run_dir / JOURNAL, "rb")  # noqa: SIM115
    except OSError:
        fh = None
    if fh is not None:
        with fh:
            for line in fh:
                if not line.endswith(b"\n"):
                    break  # a torn last line
                if line.startswith(b'{"event": "trial_finished"'):
                    # a whole line: not a fragment ended by a later writer, nor glued to one
                    done += line.rstrip().endswith(b"}") and line.count(b'{"event": ') == 1
                elif line.startswith(b'{"event": "run_'):
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        continue
                    if ev.get("event") == "run_started":
                        total = int(ev.get("total") or 0)
                        started = started or ev.get("ts")
                        status = None
                    elif ev.get("event") == "run_finished":
                        status = ev.get("status")
    if lock_holder(run_dir) is not None:
        state = "running"
    elif status == "completed":
        state = "finished"
    else:
        state = "interrupted"
    return RunInfo(run_dir, run_dir.parent.name, run_dir.name, state, total, min(done, total or done),
                   started, status)


def list_runs(output_dir: str | Path) -> list[RunInfo]:
    """Every run under ``output_dir`` (``<ticket>/<run-id>/journal.jsonl``), newest first."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    runs = [run_info(j.parent) for j in root.glob(f"*/*/{JOURNAL}")]
    runs.sort(key=lambda r: r.started_at or 0.0, reverse=True)
    return runs


@dataclass
class ResumeState:
    completed: dict[str, dict[str, Any]]  # trial_id -> its trial_finished event dict
    interrupted: set[str]  # started, never finished: re-run


def resume_state(run_dir: Path) -> ResumeState:
    completed: dict[str, dict[str, Any]] = {}
    started: set[str] = set()
    for ev in iter_journal(run_dir / JOURNAL):
        if ev.kind == "trial_started":
            started.add(ev.trial_id)  # type: ignore[attr-defined]
        elif ev.kind == "trial_finished":
            tid = ev.trial_id  # type: ignore[attr-defined]
            # A finished line without its result file is not trusted (the result is written first).
            if (run_dir / "trials" / tid / "result.json").is_file():
                completed[tid] = ev.to_dict()
    return ResumeState(completed=completed, interrupted=started - set(completed))


def prepare_output(output: Path, ticket: str) -> Path:
    """Create ``<output>/<ticket>/<run-id>`` or explain why it cannot be created."""
    parent = output / safe_component(ticket)
    try:
        parent.mkdir(parents=True, exist_ok=True)
        run_dir = parent / new_run_id()
        run_dir.mkdir()
    except OSError as exc:
        raise UsageError(
            f"cannot create the run directory under {output}: {exc.strerror or exc}",
            hint="pass a writable --output DIR",
        ) from None
    if not os.access(run_dir, os.W_OK):
        raise UsageError(f"{run_dir} is not writable", hint="pass a writable --output DIR")
    return run_dir


def write_run_meta(run_dir: Path, meta: dict[str, Any]) -> None:
    atomic_write_json(run_dir / RUN_META, {"aorta_tui_version": __version__, **meta})


def read_run_meta(run_dir: Path) -> dict[str, Any]:
    path = run_dir / RUN_META
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise RunDirError(
            f"{run_dir} is not an aorta-tui run directory (no {RUN_META})",
            hint="pass the directory that holds journal.jsonl, e.g. aorta-out/TICKET/20261129-101500-ab12",
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise RunDirError(f"{path} is unreadable: {exc}") from None
