"""SIGTERM or SIGHUP while the real TUI runs, started as `aorta-tui edit FILE`, bare, or as
`aorta-tui attach`'s would be (one launch for all): the App exits as ctrl+q does and Textual gives
the terminal back (alternate screen, mouse reporting off, cursor shown). `edit` kept the
start-up's quiet exit for both while its TUI ran: the process left at once with exit 130 and the
terminal still in the TUI's modes (a shell under a mouse-reporting alternate screen)."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import time
from pathlib import Path

import pytest
from tmux_support import ENTRY, Tmux

pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"),
              pytest.mark.slow]

# tmux's view of the pane's terminal: what a program that ended cleanly leaves switched off
TERMINAL_STATE = "alternate=#{alternate_on} mouse=#{mouse_any_flag} sgr=#{mouse_sgr_flag} cursor=#{cursor_flag}"
GIVEN_BACK = "alternate=0 mouse=0 sgr=0 cursor=1"


def _pid(pidfile: Path, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = pidfile.read_text() if pidfile.exists() else ""
        if text.strip():
            return int(text)
        time.sleep(0.1)
    raise AssertionError("the program never started")


@pytest.mark.parametrize(("sig", "code", "words"), [(signal.SIGTERM, 130, "interrupted"), (signal.SIGHUP, 129, "")],
                         ids=["TERM", "HUP"])
@pytest.mark.parametrize("args", [["edit", "new.yaml"], []], ids=["edit", "bare"])
def test_a_stop_signal_ends_the_tui_with_the_terminal_given_back(
        tmp_path: Path, args: list[str], sig: signal.Signals, code: int, words: str) -> None:
    pidfile = tmp_path / "pid"
    program = shlex.join([str(ENTRY), *args])
    # the pane outlives the program (its shell prints the exit status, then waits), so that the
    # terminal's state after it can be read
    inner = f"echo $$ > {shlex.quote(str(pidfile))}; exec {program}"
    tmux = Tmux(f"aorta-tui-edit-signals-{os.getpid()}-{tmp_path.name}")
    try:
        tmux.start(f"sh -c {shlex.quote(inner)}; echo EXIT=$?; sleep 60", tmp_path)
        tmux.wait_settled("Recipe editor" if args else "Home")
        assert tmux.run("display", "-p", "-t", "t", TERMINAL_STATE).stdout.strip() == \
            "alternate=1 mouse=1 sgr=1 cursor=0", "the TUI's modes were never on: nothing is tested"
        os.kill(_pid(pidfile), sig)
        screen = tmux.wait_for(f"EXIT={code}", timeout=20)
        assert words in screen
        assert tmux.run("display", "-p", "-t", "t", TERMINAL_STATE).stdout.strip() == GIVEN_BACK
    finally:
        tmux.kill()
