"""``--i-trust-this-directory``: one definition for every command that reads or resumes a run
directory (``sweep run --resume``, ``policy resume``, ``policy report``, ``queue resume``,
``bundle``), and the one call that applies it (``core/run_trust.py``; docs/security.md)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

import typer

from aorta_tui.core.run_trust import TRUST_FLAG, TRUST_WARNING_CODE, check_run_dir_trust

TRUST_OPT = typer.Option(
    False, TRUST_FLAG,
    help="As root without sudo: go on with a run directory that another user owns or can write "
         "(refused otherwise, exit 3: its owner chooses what a resume runs). Recorded in the "
         "run's journal. Safer: run the command as that user (sudo -u USER aorta-tui ...).")


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
