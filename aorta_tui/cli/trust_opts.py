"""``--i-trust-this-directory``: one definition for every command that reads or resumes a run
directory (``sweep run --resume``, ``policy resume``, ``policy report``, ``queue resume``,
``bundle``), and the one call that applies it (``store/trust_guard.guard_run_dir`` over
``core/run_trust.py``; docs/security.md)."""

from __future__ import annotations

import typer

from aorta_tui.core.run_trust import TRUST_FLAG

TRUST_OPT = typer.Option(
    False, TRUST_FLAG,
    help="As root without sudo: go on with a run directory that another user owns or can write "
         "(refused otherwise, exit 3: its owner chooses what a resume runs). Recorded in the "
         "run's journal. Safer: run the command as that user (sudo -u USER aorta-tui ...).")
