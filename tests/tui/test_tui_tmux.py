"""The real `aorta-tui` program in a real terminal (tmux): every screen, kill, re-attach, quit."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tui_support import PROBE_COMMAND, write_probe_recipe

from aorta_tui.core.launch import launch_detached
from aorta_tui.core.rundir import lock_holder

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")
ENTRY = Path(sys.executable).with_name("aorta-tui")


class Tmux:
    def __init__(self, socket: str) -> None:
        self.socket = socket

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True,
                              check=check, timeout=20)

    def start(self, name: str, command: str, cwd: Path, env: dict[str, str]) -> None:
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        self.run("new-session", "-d", "-s", name, "-x", "100", "-y", "30",
                 f"cd {shlex.quote(str(cwd))} && env -u COLUMNS -u LINES {exports} {command}")  # pytest sets them: the pane size must rule

    def screen(self, name: str) -> str:
        return self.run("capture-pane", "-p", "-t", name).stdout

    def keys(self, name: str, *keys: str) -> None:
        for key in keys:
            self.run("send-keys", "-t", name, key)
            time.sleep(0.15)

    def wait_for(self, name: str, text: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen(name)
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared; screen was:\n{screen}")

    def alive(self, name: str) -> bool:
        return self.run("has-session", "-t", name, check=False).returncode == 0


def test_real_program_survives_a_killed_tui_reattaches_walks_every_screen_and_quits(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TUI_TEST_SLEEP", "0.6")
    recipe = write_probe_recipe(tmp_path, trials=5)  # 10 trials of ~0.7 s: still running when killed
    output = tmp_path / "aorta-out"
    run_dir = launch_detached(recipe, output, command=PROBE_COMMAND)
    tmux = Tmux(f"aorta-tui-test-{os.getpid()}")
    env = {"TERM": "xterm-256color", "LANG": "C.UTF-8", "AORTA_TUI_OUTPUT": str(output),
           "PATH": os.environ["PATH"]}
    try:
        # First TUI: home lists the running sweep; open it.
        tmux.start("first", str(ENTRY), tmp_path, env)
        screen = tmux.wait_for("first", f"TUI-TEST/{run_dir.name}")
        assert "Home" in screen
        tmux.wait_for("first", "running")
        tmux.keys("first", "Enter")  # the runs table has focus
        tmux.wait_for("first", f"Matrix — aorta-out/TUI-TEST/{run_dir.name}")
        # Lose the terminal: the TUI dies, the sweep goes on.
        tmux.run("kill-session", "-t", "first")
        time.sleep(0.3)
        assert lock_holder(run_dir) is not None, "killing the TUI stopped the sweep"

        # Second TUI: re-attach by the run directory, walk every screen, come back, quit.
        tmux.start("second", f"{ENTRY} attach {shlex.quote(str(run_dir))}", tmp_path, env)
        tmux.wait_for("second", run_dir.name)
        # tmux key names; escape leaves the editor's text area so that digits navigate again.
        for key, title in (("1", "Runs in"), ("2", "Recipe editor"), ("Escape", "Recipe editor"),
                           ("4", "Trace monitor"), ("5", "Env diff"), ("6", "Policy comparison"),
                           ("?", "Everywhere"), ("Escape", "Policy comparison"), ("3", run_dir.name)):
            tmux.keys("second", key)
            tmux.wait_for("second", title)
        # The summary line, not the "run completed" toast (which may be drawn a frame apart).
        screen = tmux.wait_for("second", "10/10 done", timeout=60)
        assert "✗" in screen and "✓" in screen and "completed" in screen
        tmux.keys("second", "C-q")
        deadline = time.monotonic() + 10
        while tmux.alive("second") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not tmux.alive("second"), "ctrl+q did not quit"
    finally:
        tmux.run("kill-server", check=False)
