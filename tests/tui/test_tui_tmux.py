"""The real `aorta-tui` program in a real terminal (tmux): every screen, kill, re-attach, quit."""

from __future__ import annotations

import os
import shlex
import shutil
import time
from pathlib import Path

import pytest
from tmux_support import ENTRY, Tmux
from tui_support import PROBE_COMMAND, write_probe_recipe

from aorta_tui.relay.launch import launch_detached
from aorta_tui.store.lock import lock_holder

pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"), pytest.mark.slow]


def test_real_program_survives_a_killed_tui_reattaches_walks_every_screen_and_quits(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TUI_TEST_SLEEP", "0.6")
    recipe = write_probe_recipe(tmp_path, trials=5)  # 10 trials of ~0.7 s: still running when killed
    output = tmp_path / "aorta-out"
    run_dir = launch_detached(recipe, output, command=PROBE_COMMAND)
    tmux = Tmux(f"aorta-tui-test-{os.getpid()}")
    env = {"AORTA_TUI_OUTPUT": str(output)}
    try:
        # First TUI: home lists the running sweep; open it.
        tmux.start(str(ENTRY), tmp_path, env=env, session="first")
        screen = tmux.wait_for(f"TUI-TEST/{run_dir.name}", session="first")
        assert "Home" in screen
        tmux.wait_for("running", session="first")
        tmux.keys("Enter", session="first")  # the runs table has focus
        tmux.wait_for(f"Matrix — aorta-out/TUI-TEST/{run_dir.name}", session="first")
        # Lose the terminal: the TUI dies, the sweep goes on.
        tmux.run("kill-session", "-t", "first")
        time.sleep(0.3)
        assert lock_holder(run_dir) is not None, "killing the TUI stopped the sweep"

        # Second TUI: re-attach by the run directory, walk every screen, come back, quit.
        tmux.start(f"{ENTRY} attach {shlex.quote(str(run_dir))}", tmp_path, env=env, session="second")
        tmux.wait_for(run_dir.name, session="second")
        # tmux key names; escape leaves the editor's text area so that digits navigate again.
        for key, title in (("1", "Runs in"), ("2", "Recipe editor"), ("Escape", "Recipe editor"),
                           ("4", "Trace monitor"), ("5", "Env diff"), ("6", "Policy comparison"),
                           ("?", "Everywhere"), ("Escape", "Policy comparison"), ("3", run_dir.name)):
            tmux.keys(key, session="second")
            tmux.wait_for(title, session="second")
        # Both in one frame: the last trial's line (10/10) comes before the report's run_finished
        # (completed), so a frame between the two shows 10/10 still running.
        screen = tmux.wait_for("10/10 done", "completed", timeout=60, session="second")
        assert "✗" in screen and "✓" in screen
        tmux.keys("C-q", session="second")
        assert tmux.gone(session="second"), "ctrl+q did not quit"
    finally:
        tmux.kill()
