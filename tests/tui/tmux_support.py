"""The real `aorta-tui` program in a real terminal: one tmux server per test, read as text.

Every tmux test drives the program through this one class, so that what the terminal is (its
size, TERM, the environment the program sees) and how keys are sent are the same everywhere.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ENTRY = Path(sys.executable).with_name("aorta-tui")


def terminal_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the program's terminal has: a 256-colour TERM, UTF-8, this PATH (and PYTHONPATH)."""
    env = {"TERM": "xterm-256color", "LANG": "C.UTF-8", "PATH": os.environ["PATH"]}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return {**env, **(extra or {})}


class Tmux:
    """A tmux server of its own (``-L socket``); sessions by name (one, ``t``, by default)."""

    def __init__(self, socket: str) -> None:
        self.socket = socket.replace("[", "-").replace("]", "").replace("/", "-")

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True,
                              check=check, timeout=20)

    def start(self, command: str | Sequence[str], cwd: Path, size: tuple[int, int] = (100, 30),
              env: Mapping[str, str] | None = None, session: str = "t") -> None:
        """Run ``command`` (a shell line, or argv to quote) in a detached ``size`` window."""
        line = command if isinstance(command, str) else " ".join(shlex.quote(str(a)) for a in command)
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in terminal_env(env).items())
        # pytest sets COLUMNS and LINES: the pane's size must rule
        self.run("new-session", "-d", "-s", session, "-x", str(size[0]), "-y", str(size[1]),
                 f"cd {shlex.quote(str(cwd))} && env -u COLUMNS -u LINES {exports} {line}")
        # without a client tmux may shrink a detached window to its default size (80x24)
        self.run("set-option", "-t", session, "window-size", "manual", check=False)
        self.run("resize-window", "-t", session, "-x", str(size[0]), "-y", str(size[1]), check=False)

    def screen(self, session: str = "t") -> str:
        return self.run("capture-pane", "-p", "-t", session).stdout

    def keys(self, *keys: str, session: str = "t", literal: bool = False) -> None:
        """Send tmux key names (or, with ``literal``, text), pausing after each as a user does:
        longer after Escape, since escape then a key at once reads as alt+key."""
        if literal:
            self.run("send-keys", "-t", session, "-l", *keys)
            time.sleep(0.3)
            return
        for key in keys:
            self.run("send-keys", "-t", session, key)
            time.sleep(0.6 if key == "Escape" else 0.2)

    def wait_for(self, *texts: str, timeout: float = 30.0, session: str = "t") -> str:
        """The first screen that shows every one of ``texts`` (fails the test after ``timeout``):
        a frame is drawn in parts and a toast may cover a widget a while, so one capture can
        hold some of them and not others."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen(session)
            if all(text in screen for text in texts):
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{texts!r} never appeared together; screen was:\n{screen}")

    def wait_settled(self, text: str, timeout: float = 30.0, session: str = "t") -> str:
        """The screen once it shows ``text`` and is the same twice 0.5 s apart: the first frames
        may be laid out before the terminal's size arrived."""
        deadline = time.monotonic() + timeout
        screen, previous = "", None
        while not (text in screen and screen == previous):
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never settled on the screen:\n{screen}")
            time.sleep(0.5)
            previous, screen = screen, self.screen(session)
        return screen

    def alive(self, session: str = "t") -> bool:
        return self.run("has-session", "-t", session, check=False).returncode == 0

    def gone(self, timeout: float = 10.0, session: str = "t") -> bool:
        """Whether the session's program ended within ``timeout``."""
        deadline = time.monotonic() + timeout
        while self.alive(session):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def kill(self) -> None:
        self.run("kill-server", check=False)
