"""``--i-trust-this-directory``: one definition for every command that reads or resumes a run
directory (``sweep run --resume``, ``policy resume``, ``policy report``, ``queue resume``,
``bundle``), and the one call that applies it (``core/run_trust.py``; docs/security.md)."""

from __future__ import annotations

import shlex
from pathlib import Path

import typer

from aorta_tui.core.run_trust import TRUST_FLAG, TRUST_WARNING_CODE, check_run_dir_trust

TRUST_OPT = typer.Option(
    False, TRUST_FLAG,
    help="As root without sudo: go on with a run directory that another user owns or can write "
         "(refused otherwise, exit 3: its owner chooses what a resume runs). Recorded in the "
         "run's journal. Safer: run the command as that user (sudo -u USER aorta-tui ...).")


def guard_run_dir(run_dir: Path, command: list[str], *, trusted: bool) -> None:
    """Refuse (exit 3) root without sudo over a run directory someone else controls, before
    anything of it is read; with ``trusted``, record the override in the run's journal."""
    note = check_run_dir_trust(run_dir, command=shlex.join(command), trusted=trusted)
    if note is not None:
        from aorta_tui.store.rundir import record_warning

        record_warning(run_dir, note, code=TRUST_WARNING_CODE)
