"""Writing ``journal.jsonl``: the append-only ``Journal`` an engine holds while it runs, the
one line encoding, and a one-off line a command writes under the run's lock."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

from aorta_tui.core.events import Event, RunFinished, RunStarted, TrialFinished
from aorta_tui.store.journal_file import check_journal_file, open_journal_file
from aorta_tui.store.lock import RunLock
from aorta_tui.store.naming import JOURNAL


class Journal:
    """Append-only ``journal.jsonl``. Each line reaches the OS (one ``write``) before ``append``
    returns; a line that says a trial finished is also fsynced: a resume trusts those lines.

    A failed write (a full disk) is raised and remembered in ``error``: the event bus keeps a
    failing sink from stopping a run, and the sweep must stop when its journal cannot be written.
    """

    DURABLE: tuple[type[Event], ...] = (TrialFinished, RunFinished, RunStarted)

    def __init__(self, path: Path, *, dir_fd: int | None = None) -> None:
        self.path = path
        self.error: OSError | None = None
        # O_NOFOLLOW | O_NONBLOCK and the fstat: a journal that is a symlink or a FIFO is refused
        # at once (a FIFO's open for writing would wait for a reader forever). ``dir_fd``: the
        # run's root held by its file layer (RunStore), so the journal is the one in that run.
        try:
            self._fd = os.open(path.name if dir_fd is not None else path,
                               os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                               | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o644, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                check_journal_file(path)  # raises the located refusal
            raise
        if not stat.S_ISREG(os.fstat(self._fd).st_mode):
            os.close(self._fd)
            self._fd = -1
            check_journal_file(path)
        os.set_blocking(self._fd, True)
        # A writer killed mid-line (or a failed write) left a fragment: end it, or the next event
        # would be glued onto it and lost to every reader.
        self._torn = self._ends_torn()

    def _ends_torn(self) -> bool:
        try:
            fh = open_journal_file(self.path)
            if fh is None:
                return False
            with fh:
                fh.seek(0, os.SEEK_END)
                if fh.tell() == 0:
                    return False
                fh.seek(-1, os.SEEK_END)
                return fh.read(1) != b"\n"
        except OSError:
            return False

    def append(self, event: Event) -> None:
        data = encode_journal_line(event.to_dict())
        if self._torn:
            data = b"\n" + data
        try:
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                self._torn = True  # until the whole line is out
                view = view[n:]
            self._torn = False
            if isinstance(event, self.DURABLE):
                os.fsync(self._fd)
        except OSError as exc:
            if exc.filename is None:
                exc.filename = str(self.path)
            self.error = self.error or exc
            raise

    # An EventSink, so the bus can feed it first.
    emit = append

    def check(self) -> None:
        """Raise the first write failure, if any (the bus swallowed it)."""
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            os.close(self._fd)
            self._fd = -1


def encode_journal_line(obj: dict[str, Any]) -> bytes:
    try:
        text = json.dumps(obj, ensure_ascii=False, default=str)
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (an undecodable byte from argv or a path): escape it, so the line is
        # still UTF-8 JSON that reads back to the same string.
        return (json.dumps(obj, ensure_ascii=True, default=str) + "\n").encode("ascii")


def record_warning(run_dir: Path, message: str, *, code: str) -> None:
    """Append one ``warning`` line to the run's journal under its lock (taken and released
    here): what a command decided about the run before its engine starts, e.g. root's
    ``--i-trust-this-directory`` (``core/run_trust.py``). Refused like a resume while another
    process holds the lock. A directory without a journal is no run: nothing is made in it
    (the command itself then says what it is)."""
    from aorta_tui.core.events import RunWarning

    if not (run_dir / JOURNAL).is_file():
        return
    lock = RunLock(run_dir)
    lock.acquire()
    try:
        journal = Journal(run_dir / JOURNAL)
        try:
            journal.append(RunWarning(run_dir.name, message=message, code=code))
        finally:
            journal.close()
    finally:
        lock.release()
