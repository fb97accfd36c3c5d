"""``journal.jsonl`` opened for reading through the one checked open, and its refusal: a
journal that is not a regular file is a located exit 2, for its reader and its writer alike."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from aorta_tui.core.errors import RunDirError, UsageError
from aorta_tui.core.inputs import open_input
from aorta_tui.store.naming import JOURNAL


def _journal_refusal(message: str, path: Path) -> RunDirError:
    return RunDirError(message, hint=f"aorta-tui writes {JOURNAL} itself, as a regular file: this "
                       f"run directory is damaged; move {path} away to see the rest of the run "
                       "with `aorta-tui bundle`, or start a new run")


def open_journal_file(path: Path) -> IO[bytes] | None:
    """A run's journal for reading, through the one checked open (``None`` when missing): a
    FIFO, a device such as ``/dev/zero``, a symlink or a directory is a located exit 2 at once,
    never a hang or an endless read."""
    try:
        return open_input(path, what="journal", follow_symlinks=False, missing_ok=True)
    except UsageError as exc:
        raise _journal_refusal(exc.message, path) from None


def check_journal_file(path: Path) -> None:
    """Raise the journal's refusal when it exists and is not a regular file (see above)."""
    fh = open_journal_file(path)
    if fh is not None:
        fh.close()
