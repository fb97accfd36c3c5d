"""Issue 16 items 2 and 3 in the real program under tmux at 80x24 and 160x48 (the issue asked
for both sizes; the picker had Pilot tests only, the editor a tmux test at 80x24 only).

From a fresh directory with the default output directory: the env-diff picker takes typed
paths (a snapshot named like the CLI help's `-o h200.json` included) and refuses A == B; the
editor opened by `aorta-tui edit FILE` turns screen keys into screens while viewing, digits
into text while editing, and asks before ctrl+q drops the edit."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENTRY = Path(sys.executable).with_name("aorta-tui")
EXAMPLE = "recipes/examples/probe-bash.yaml"
SIZES = [(80, 24), (160, 48)]

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    def __init__(self, socket: str) -> None:
        self.socket = socket

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True,
                              check=check, timeout=20)

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "t").stdout

    def wait(self, text: str, timeout: float = 30) -> str:
        deadline, screen = time.monotonic() + timeout, ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared:\n{screen}")

    def keys(self, *keys: str, literal: bool = False) -> None:
        self("send-keys", "-t", "t", *(("-l",) if literal else ()), *keys)
        time.sleep(0.3)

    def start(self, cwd: Path, size: tuple[int, int], *args: str) -> None:
        env = f"TERM=xterm-256color LANG=C.UTF-8 PATH={shlex.quote(os.environ['PATH'])}"
        if os.environ.get("PYTHONPATH"):
            env += f" PYTHONPATH={shlex.quote(os.environ['PYTHONPATH'])}"
        command = " ".join(shlex.quote(a) for a in (str(ENTRY), *args))
        self("new-session", "-d", "-s", "t", "-x", str(size[0]), "-y", str(size[1]),
             f"cd {shlex.quote(str(cwd))} && env -u COLUMNS -u LINES {env} {command}")

    def gone(self, timeout: float = 10) -> bool:
        deadline = time.monotonic() + timeout
        while self("has-session", "-t", "t", check=False).returncode == 0:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True


@pytest.fixture
def tmux(request: pytest.FixtureRequest) -> Iterator[Tmux]:
    t = Tmux(f"aorta-audit-{os.getpid()}-{request.node.name}".replace("[", "-").replace("]", ""))
    try:
        yield t
    finally:
        t("kill-server", check=False)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "160x48"])
def test_picker_takes_typed_paths_and_refuses_the_same_file(tmp_path: Path, tmux: Tmux,
                                                             size: tuple[int, int]) -> None:
    fixtures = REPO / "tests" / "fixtures" / "envsnap"
    shutil.copy(fixtures / "cpu-box.json", tmp_path / "a.json")
    shutil.copy(fixtures / "h200.json", tmp_path / "h200.json")  # not named *env*.json
    tmux.start(tmp_path, size)
    tmux.wait("Home")
    tmux.keys("5")
    tmux.wait("Env diff")
    tmux.keys("o")
    tmux.wait("h200.json")  # listed
    tmux.keys("a.json", literal=True)
    tmux.keys("Enter")
    tmux.wait("chosen:")
    tmux.keys("h200.json", literal=True)
    tmux.keys("Enter")
    screen = tmux.wait("differences")
    assert "no differences" not in screen
    assert "A a.json" in screen and "B h200.json" in screen

    tmux.keys("o")
    tmux.wait("Pick snapshot A")
    tmux.keys("a.json", literal=True)
    tmux.keys("Enter")
    tmux.wait("chosen:")
    tmux.keys("a.json", literal=True)
    tmux.keys("Enter")
    tmux.wait("already picked")


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "160x48"])
def test_edit_file_screen_keys_digits_and_the_discard_prompt(tmp_path: Path, tmux: Tmux,
                                                             size: tuple[int, int]) -> None:
    (tmp_path / "recipes" / "examples").mkdir(parents=True)
    shutil.copy(REPO / EXAMPLE, tmp_path / EXAMPLE)
    original = (tmp_path / EXAMPLE).read_text()
    tmux.start(tmp_path, size, "edit", EXAMPLE)
    tmux.wait("VIEWING")
    tmux.keys("3")  # viewing: a screen key, not text
    tmux.wait("Matrix")
    tmux.keys("2")
    screen = tmux.wait("VIEWING")
    assert "modified" not in screen
    for key in ("e", "Home", "4", "2"):
        tmux.keys(key)
    screen = tmux.wait("42")
    assert "EDITING" in screen and "modified" in screen and "Queue monitor" not in screen
    tmux.keys("C-q")
    tmux.wait("Discard your unsaved changes")
    tmux.keys("n")  # keeps editing
    screen = tmux.wait("EDITING")
    assert "42" in screen
    tmux.keys("C-q")
    tmux.wait("Discard your unsaved changes")
    tmux.keys("y")
    assert tmux.gone(), "y did not quit"
    assert (tmp_path / EXAMPLE).read_text() == original
