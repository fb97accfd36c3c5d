"""Audit of issue 12 item 6: a FIFO or /dev/zero as a policy file is refused with a message
that reads right ("not a policy file", once), through the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_fifo_or_device_policy_file_says_policy_file_once(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "policies.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    proc = subprocess.run([sys.executable, "-m", "aorta_tui", "policy", "sweep", "tiny_kernel_stress",
                           "--policy-file", str(path), "--dry-run"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert f"{path} is " in proc.stderr and "not a policy file" in proc.stderr, proc.stderr
    assert "file file" not in proc.stderr and "Traceback" not in proc.stderr
