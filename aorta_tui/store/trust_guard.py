"""The one call that applies a run directory's trust check (``core/run_trust.py``) before any of
it is read: refused, or the override recorded in the run's own journal. Every reader of a run
directory someone may hand over calls it: ``sweep run --resume``, ``policy resume|report``,
``queue resume``, ``bundle``, and the engine entry ``sweep/child.py``."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from aorta_tui.core.run_trust import TRUST_WARNING_CODE, check_run_dir_trust


def guard_run_dir(run_dir: Path, command: list[str], *, trusted: bool,
                  say: Callable[[str], None] | None = None) -> None:
    """Refuse (exit 3) root without sudo over a run directory someone else controls, before
    anything of it is read; with ``trusted``, record the override in the run's journal.
    ``say`` (a command that only reads the run, ``bundle``): the override is also shown, and
    a run that a live session holds (a hang bundled while it hangs) is not refused for its
    lock: its journal is that session's, so the note is shown and not written."""
    note = check_run_dir_trust(run_dir, command=shlex.join(command), trusted=trusted)
    if note is not None:
        from aorta_tui.store.journal_writer import record_warning
        from aorta_tui.store.lock import lock_holder

        if say is not None:
            say(f"warning: {note}")
            if run_dir.is_dir() and lock_holder(run_dir) is not None:
                return
        record_warning(run_dir, note, code=TRUST_WARNING_CODE)
