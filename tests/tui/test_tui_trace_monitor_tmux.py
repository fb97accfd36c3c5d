"""The real `aorta-tui` under tmux replays recorded launch_to_start snapshots in the queue
monitor: the default metric, its clock alignment, the count metric, at 80x24 and 160x48."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tui_support import FIXTURES

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")
ENTRY = Path(sys.executable).with_name("aorta-tui")
RECORDING = FIXTURES / "launch_to_start_snapshots.jsonl"


def _tmux(socket: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True, check=check, timeout=20)


def _wait(socket: str, *texts: str, timeout: float = 30.0) -> str:
    """The first frame that shows every one of ``texts``: a frame is drawn in parts, and a
    toast may cover a widget for a while, so one capture can hold some of them and not others."""
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux(socket, "capture-pane", "-p", "-t", "mon").stdout
        if all(text in screen for text in texts):
            return screen
        time.sleep(0.1)
    raise AssertionError(f"{texts!r} never appeared together; screen was:\n{screen}")


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_real_program_shows_launch_to_start_from_a_recording(tmp_path: Path, size: tuple[int, int]) -> None:
    socket = f"aorta-tui-mon-{os.getpid()}-{size[0]}"
    env = {"TERM": "xterm-256color", "LANG": "C.UTF-8", "AORTA_TUI_OUTPUT": str(tmp_path / "out"),
           "PATH": os.environ["PATH"]}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    try:
        _tmux(socket, "new-session", "-d", "-s", "mon", "-x", str(size[0]), "-y", str(size[1]),
              f"cd {shlex.quote(str(tmp_path))} && env -u COLUMNS -u LINES {exports} {ENTRY}")  # pytest sets them: the pane size must rule
        # without a client tmux may shrink a detached window to its default size
        _tmux(socket, "set-option", "-t", "mon", "window-size", "manual", check=False)
        _tmux(socket, "resize-window", "-t", "mon", "-x", str(size[0]), "-y", str(size[1]), check=False)
        _wait(socket, "Home")
        _tmux(socket, "send-keys", "-t", "mon", "4")
        _wait(socket, "Trace monitor")
        _tmux(socket, "send-keys", "-t", "mon", "t")
        time.sleep(0.3)
        _tmux(socket, "send-keys", "-t", "mon", "-l", f"replay {RECORDING}")
        _wait(socket, "launch_to_start_snapshots.jsonl")  # typed into the target field
        lines = _tmux(socket, "capture-pane", "-p", "-t", "mon").stdout.splitlines()
        assert len(lines) == size[1], f"the pane is {len(lines)} lines, not {size[1]}"
        for key in ("Escape", "s"):  # apart: an escape followed quickly by s reads as alt+s
            _tmux(socket, "send-keys", "-t", "mon", key)
            time.sleep(0.6)
        screen = _wait(socket, "the recording ends here", "cuda.launch_to_start", "clocks aligned ±0.4 µs", "p99")
        assert "{'" not in screen, screen
        _tmux(socket, "send-keys", "-t", "mon", "m")
        _wait(socket, "cuda.kernel_duration")
        _tmux(socket, "send-keys", "-t", "mon", "m")
        screen = _wait(socket, "unit kernels")
        assert " kernels" in screen.split("unit kernels", 1)[1]  # p50 and friends are counts
        _tmux(socket, "send-keys", "-t", "mon", "C-q")
        deadline = time.monotonic() + 10
        while _tmux(socket, "has-session", "-t", "mon", check=False).returncode == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _tmux(socket, "has-session", "-t", "mon", check=False).returncode != 0, "ctrl+q did not quit"
    finally:
        _tmux(socket, "kill-server", check=False)
