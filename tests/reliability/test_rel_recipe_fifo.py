"""A FIFO or a device given as a recipe: a located exit 2 at once, never a hang in open()
(issue 12 item 6). Runs the real CLI as a user would, with a time limit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("args", [["recipe", "validate"], ["--batch"]])
def test_a_fifo_as_a_recipe_is_refused_without_blocking(tmp_path: Path, args: list[str], attack_tally) -> None:
    fifo = tmp_path / "recipe.yaml"
    os.mkfifo(fifo)
    out = subprocess.run([sys.executable, "-m", "aorta_tui", *args, str(fifo)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    attack_tally.record("hostile recipe paths (FIFO, device)", cases=1, failures=int(out.returncode != 2))
    assert out.returncode == 2, out.stderr
    assert "not a regular file" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "aorta-out").exists()  # nothing half-written


def test_dev_zero_as_a_recipe_is_refused(tmp_path: Path, attack_tally) -> None:
    out = subprocess.run([sys.executable, "-m", "aorta_tui", "recipe", "validate", "/dev/zero"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    attack_tally.record("hostile recipe paths (FIFO, device)", cases=1, failures=int(out.returncode != 2),
                        promise="exit 2 at once, nothing written")
    assert out.returncode == 2 and "not a regular file" in out.stderr
