"""Under sudo: the invoking user's terminal settings. (The files the TUI writes are the user's
because the TUI runs as the user: tests/privsep/test_privsep_drop.py.)"""

from __future__ import annotations

import os

import pytest

from aorta_tui.cli.tui_launch import keep_invoking_terminal

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow


def test_sudo_keeps_the_users_term_and_locale(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUDO_UID", "1000")
    for name in ("TERM", "LANG", "LC_ALL", "LC_CTYPE", "COLORTERM"):
        monkeypatch.delenv(name, raising=False)
    keep_invoking_terminal({"TERM": "tmux-256color", "LANG": "de_DE.UTF-8", "COLORTERM": "truecolor"})
    assert os.environ["TERM"] == "tmux-256color"
    assert os.environ["LANG"] == "de_DE.UTF-8"
    assert os.environ["COLORTERM"] == "truecolor"


def test_sudo_with_nothing_to_recover_still_gets_a_utf8_locale(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUDO_UID", "1000")
    for name in ("TERM", "LANG", "LC_ALL", "LC_CTYPE"):
        monkeypatch.delenv(name, raising=False)
    keep_invoking_terminal({})
    assert os.environ["LANG"] == "C.UTF-8" and os.environ["TERM"] == "xterm-256color"


def test_without_sudo_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUDO_UID", raising=False)
    monkeypatch.setenv("TERM", "vt100")
    keep_invoking_terminal({"TERM": "xterm"})
    assert os.environ["TERM"] == "vt100"
