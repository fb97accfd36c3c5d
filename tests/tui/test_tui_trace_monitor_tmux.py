"""The real `aorta-tui` under tmux replays recorded launch_to_start snapshots in the trace
monitor: the default metric, its clock alignment, the count metric, at 80x24 and 160x48."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from tmux_support import ENTRY, Tmux
from tui_support import FIXTURES

pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"), pytest.mark.slow]
RECORDING = FIXTURES / "launch_to_start_snapshots.jsonl"


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_real_program_shows_launch_to_start_from_a_recording(tmp_path: Path, size: tuple[int, int]) -> None:
    tmux = Tmux(f"aorta-tui-mon-{os.getpid()}-{size[0]}")
    try:
        tmux.start([ENTRY], tmp_path, size, env={"AORTA_TUI_OUTPUT": str(tmp_path / "out")})
        tmux.wait_for("Home")
        tmux.keys("4")
        tmux.wait_settled("no events yet")  # the screen drawn whole: its keys are bound
        tmux.keys("t")
        time.sleep(0.5)  # the focus moves to the target field on the next frame
        tmux.keys(f"replay {RECORDING}", literal=True)
        tmux.wait_for("launch_to_start_snapshots.jsonl")  # typed into the target field
        lines = tmux.screen().splitlines()
        assert len(lines) == size[1], f"the pane is {len(lines)} lines, not {size[1]}"
        tmux.keys("Escape", "s")  # apart: an escape followed quickly by s reads as alt+s
        screen = tmux.wait_for("the recording ends here", "cuda.launch_to_start", "clocks aligned ±0.4 µs", "p99")
        assert "{'" not in screen, screen
        tmux.keys("m")
        tmux.wait_for("cuda.kernel_duration")
        tmux.keys("m")
        screen = tmux.wait_for("unit kernels")
        assert " kernels" in screen.split("unit kernels", 1)[1]  # p50 and friends are counts
        tmux.keys("C-q")
        assert tmux.gone(), "ctrl+q did not quit"
    finally:
        tmux.kill()
