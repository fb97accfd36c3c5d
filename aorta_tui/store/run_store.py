"""A run directory while an engine runs it, held by one object: its lock, journal, resume set
and trial results.

Every engine that runs trials in a run directory (the sweep, ``sweep/orchestrator.py``; the
policy sweep, ``policy/evaluator.py``; the queue sweep, ``hwqueue/sweep.py``) opens it through a
:class:`RunStore`, so the rules of ``docs/run-directory.md`` hold for all of them the same way.
What a RunStore owns, from ``acquire`` to ``release``:

* the lock, ``lock.RunLock`` (a kernel ``flock``: a SIGKILLed holder never blocks a resume),
  taken after the layout check and before any resume bookkeeping;
* the journal writer, ``journal_writer.Journal``: one ``write`` per line, the lines a resume
  trusts fsynced;
* the resume set: a trial counts as done only when its whole result file is on disk **and** its
  ``trial_finished`` line is in the journal (``resume.resume_state``), the result written first;
* the trials' directories and result files, written atomically (temp file, rename) through the
  run's file layer.

What it does not own: making the directory and its ``run.json`` (``run_create.py``,
``run_meta.py``, before any store opens it), a command's one-off journal line under the lock
(``journal_writer.record_warning``), and the readers that never take the lock (``run_list.py``,
``journal_follow.py``, ``lock.lock_holder``).

What differs between the engines is only where a trial's result lives, what makes it whole and
how trial ids look: a :class:`StoreLayout`. The sweep's is :data:`SWEEP_LAYOUT`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aorta_tui.core.errors import AortaError, RunDirError
from aorta_tui.core.events import Event, RunStarted
from aorta_tui.core.inputs import permission_problem
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.core.trial_contract import TrialResult
from aorta_tui.store import naming, resume
from aorta_tui.store.journal_file import check_journal_file
from aorta_tui.store.journal_reader import JournalScan, scan_journal
from aorta_tui.store.journal_writer import Journal
from aorta_tui.store.lock import RunLock
from aorta_tui.store.naming import JOURNAL
from aorta_tui.store.resume import ResumeState, read_trial_result
from aorta_tui.store.run_create import check_outputs
from aorta_tui.store.write_errors import write_failure

Accept = Callable[[dict[str, Any], str], "dict[str, Any] | None"]


@dataclass(frozen=True)
class StoreLayout:
    """What one engine's run directory does its own way."""

    result_file: str = "result.json"  # trials/<trial id>/<result_file>
    # Trial ids are a sweep's ``<cell>/trial-<NNN>``, whose result.json ``read_trial_result``
    # checks; False: one path component of the engine's own (a policy sweep's ``001-baseline-t1``)
    # and its result checked by ``accept``.
    sweep_ids: bool = True
    # A decoded result file (an object) -> the whole result of that trial, or None (damaged,
    # not final). Used when ``sweep_ids`` is False.
    accept: Accept | None = None
    # The error when another process holds the lock (None: the sweep's, naming `attach`).
    refusal: Callable[[Path, str], AortaError] | None = None
    # What the engine writes at the top of the run directory: files it replaces atomically (a
    # directory in their place made that rename fail, exit 70, after the trials had re-run) and
    # directories it writes into (a file in their place: the same).
    files: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()


SWEEP_LAYOUT = StoreLayout(files=("matrix.json", "matrix.md"), dirs=("env",))


# a trial's directory and the attempts retired beside it (a symlink or file of either name
# misled the retiring rename: issue 37 item 7)
_TRIAL_DIR = re.compile(r"^trial-\d+(?:\.interrupted-\d+)?$")


def _is_flat_id(trial_id: object) -> bool:
    """One path component that stays under trials/ (no separator, no ``..``, no NUL)."""
    return (isinstance(trial_id, str) and trial_id not in ("", ".", "..")
            and "/" not in trial_id and "\x00" not in trial_id)


class RunStore:
    """A run directory (which must exist) and the one way to read and write it.

    Use as ``with RunStore(path) as store:`` (lock held, journal closed and lock released on the
    way out), or ``acquire`` / ``release`` around the run.
    """

    def __init__(self, path: str | Path, layout: StoreLayout = SWEEP_LAYOUT) -> None:
        self.path = Path(path)
        self.layout = layout
        self.journal_path = self.path / JOURNAL
        self._lock = RunLock(self.path, refusal=layout.refusal)
        self.journal: Journal | None = None
        self._fs: RunDirFS | None = None

    @property
    def fs(self) -> RunDirFS:
        """The run directory's file layer (``core/rundir_fs.py``): every file of the run below
        its root is reached through it, never by path. Held until :meth:`release`."""
        if self._fs is None:
            self._fs = RunDirFS(self.path)
        return self._fs

    # -- layout ----------------------------------------------------------------------------

    def is_trial_id(self, trial_id: object) -> bool:
        return naming.is_trial_id(trial_id) if self.layout.sweep_ids else _is_flat_id(trial_id)

    def trial_dir(self, trial_id: str) -> Path:
        if not self.is_trial_id(trial_id):
            raise ValueError(f"not a trial id of this run: {trial_id!r}")
        return self.path / "trials" / trial_id

    def result_path(self, trial_id: str) -> Path:
        return self.trial_dir(trial_id) / self.layout.result_file

    # -- the lock --------------------------------------------------------------------------

    def acquire(self) -> None:
        """Check the directory's shape (``check_layout``), then take the run's lock, or raise
        the layout's refusal naming the holder. Nothing is changed before both pass."""
        self.check_layout()
        try:
            self._lock.acquire(self.fs)
        except OSError as exc:  # another user's .lock, a full disk: the machine's (exit 3)
            problem = write_failure(exc, self.path, resumable=False)
            if problem is None:
                raise
            raise problem from None

    def check_layout(self) -> None:
        """Refuse a run directory that a resume would damage or be led out of, before anything
        is written (issue 27 items 10-12): a located exit 2 for a journal or ``.lock`` that is not
        a regular file (a FIFO blocked the resume forever, ``/dev/zero`` read forever, a
        directory crashed it), for anything under ``trials/`` on the way to a trial's directory
        that is a file or a symlink (a symlinked cell sent the trials' output outside the run,
        a file crashed it); exit 3 when this user may not write the directory."""
        if not self.path.is_dir():
            raise RunDirError(f"{self.path} is not a directory", hint="pass a run directory")
        if not os.access(self.path, os.W_OK | os.X_OK):
            raise permission_problem(self.path, fix_dir=self.path)
        check_journal_file(self.journal_path)
        check_outputs(self.path, files=self.layout.files, dirs=self.layout.dirs)
        for path in self._trial_tree():
            try:
                st = path.lstat()
            except OSError:
                continue  # went while we looked (an attempt retired by its own engine)
            if stat.S_ISDIR(st.st_mode):
                continue
            what = (f"a symlink (to {os.readlink(path)[:200]})" if stat.S_ISLNK(st.st_mode)
                    else "a file" if stat.S_ISREG(st.st_mode) else "not a directory")
            raise RunDirError(
                f"{path} is {what}, not a directory: the run's trials are written in real "
                "directories under trials/, never through a link or over a file",
                hint=f"move it away (`mv {path} {path}.bad`) and run the command again; its "
                     "trials then run again")

    def _trial_tree(self) -> Iterator[Path]:
        """``trials/`` and each directory on the way to a trial's: a sweep's ``<cell>/`` and
        ``<cell>/trial-NNN``, another layout's ``<trial id>``."""
        trials = self.path / "trials"
        if not (trials.exists() or trials.is_symlink()):
            return
        yield trials
        if trials.is_symlink() or not trials.is_dir():
            return
        for entry in sorted(os.scandir(trials), key=lambda e: e.name):
            top = Path(entry.path)
            yield top
            if not self.layout.sweep_ids or not entry.is_dir(follow_symlinks=False):
                continue
            for sub in sorted(os.scandir(top), key=lambda e: e.name):
                if _TRIAL_DIR.match(sub.name):
                    yield Path(sub.path)

    def release(self) -> None:
        self.close_journal()
        self._lock.release()
        if self._fs is not None:
            self._fs.close()
            self._fs = None

    def __enter__(self) -> RunStore:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # -- the journal -----------------------------------------------------------------------

    def open_journal(self) -> Journal:
        """The journal writer (an ``EventSink``: prepend it to the bus, so it sees every event
        before any display does)."""
        if self.journal is None:
            self.journal = Journal(self.journal_path, dir_fd=self.fs.fileno())
        return self.journal

    def check_journal(self) -> None:
        """Raise the journal's first write failure (the bus swallows a failing sink's)."""
        if self.journal is not None:
            self.journal.check()

    def close_journal(self) -> None:
        if self.journal is not None:
            self.journal.close()

    def scan(self) -> JournalScan:
        return scan_journal(self.journal_path, sweep_ids=self.layout.sweep_ids)

    def events(self) -> Iterator[Event]:
        yield from self.scan().events

    def sessions(self, scan: JournalScan | None = None) -> int:
        """How many sessions (``run_started`` lines) the journal holds (``scan``: as read)."""
        return sum(1 for e in (scan or self.scan()).events if isinstance(e, RunStarted))

    # -- the resume set --------------------------------------------------------------------

    def resume_state(self, trial_ids: set[str] | None = None, *,
                     scan: JournalScan | None = None) -> ResumeState:
        """Trials done (journal line and whole result), started and never done, damaged lines;
        ``scan``: the journal already read by the caller (:meth:`scan`), not read again."""
        return resume.resume_state(self.path, trial_ids, read_result=self.read_result,
                                   sweep_ids=self.layout.sweep_ids, scan=scan)

    def completed(self, trial_ids: set[str] | None = None) -> set[str]:
        return set(self.resume_state(trial_ids).completed)

    # -- results ---------------------------------------------------------------------------

    def write_result(self, trial_id: str, record: TrialResult | dict[str, Any]) -> Path:
        """The trial's result file, atomically (a reader sees the old file or the whole new one).

        A sweep's is a typed :class:`TrialResult`; another layout's (a policy trial's
        ``outcome.json``) its own dict."""
        data = record.to_dict() if isinstance(record, TrialResult) else record
        # not fsynced: the journal's fsynced trial_finished line is the commit, and a result
        # file a power loss emptied is not trusted by the resume (the trial runs again)
        return self.fs.atomic_write_json(self.result_path(trial_id), data, durable=False)

    def read_result(self, trial_id: str) -> dict[str, Any] | None:
        """The trial's whole result, or ``None`` (missing, damaged, another trial's, not final).

        Only the trial's own directory is read: a retired attempt is evidence, never a result.
        """
        if self.layout.sweep_ids:
            return read_trial_result(self.fs, trial_id)
        if not _is_flat_id(trial_id):
            return None
        data = self.fs.read_json_or_none(self.result_path(trial_id))
        if not isinstance(data, dict):
            return None
        return data if self.layout.accept is None else self.layout.accept(data, trial_id)

    def read_trial(self, trial_id: str) -> TrialResult | None:
        """A sweep trial's whole result, typed; ``None`` as :meth:`read_result`. A field of the
        wrong type reads as absent (``strict=False``): an odd old file still counts its verdict."""
        data = self.read_result(trial_id)
        if data is None:
            return None
        return TrialResult.from_dict(data, where=str(self.result_path(trial_id)), strict=False)

    def make_trial_dir(self, trial_id: str) -> Path:
        """The trial's directory (made when missing) through the file layer: a link or a file
        on the way is refused, never followed."""
        os.close(self.fs.make_dirs(self.trial_dir(trial_id)))
        return self.trial_dir(trial_id)

    def fresh_trial_dir(self, trial_id: str) -> Path:
        """An empty directory for a trial's attempt; what an earlier attempt left is removed
        (a link in its place is removed itself, never followed)."""
        path = self.trial_dir(trial_id)
        if self.fs.lstat(path) is not None:
            self.fs.remove_tree(path)
        return self.make_trial_dir(trial_id)

    def retire_trial(self, trial_id: str) -> Path | None:
        """Move an interrupted attempt aside as evidence (``trial-NNN.interrupted-K``)."""
        path = self.trial_dir(trial_id)
        if self.fs.lstat(path) is None:
            return None
        k = 1
        while self.fs.lstat(dest := path.with_name(f"{path.name}.interrupted-{k}")) is not None:
            k += 1  # a dangling link is a name taken too
        self.fs.rename(path, dest)
        return dest
