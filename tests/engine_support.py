"""Helpers of the tests that run the real CLI: the program in a subprocess, a run's journal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def aorta(*args: str, cwd: Path | None = None, timeout: float = 120, env: dict | None = None,
          ) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "aorta_tui", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def journal(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines() if line.strip()]


def only_run_dir(output: Path) -> Path:
    runs = list(output.glob("*/*/journal.jsonl"))
    assert len(runs) == 1, runs
    return runs[0].parent


