"""Helpers of the tests that run the real CLI: the program in a subprocess, a run's journal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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


# A probe run whose trials print three known step times, its second cell's mitigation making
# them fail (exit 3): a run directory with passing and failing cells, in a few seconds.
PROBE_RECIPE = r"""schema_version: 1
mode: probe
ticket: T-AN
trials: 2
timeout_per_trial: 30
mitigation_axis: [none, gpu_max_hw_queues_2]
diagnostic_axis: [none]
step_time_regex: 'step \d+ took ([0-9.]+)'
"""
PROBE_SCRIPT = ('echo "step 0 took 0.25"; echo "step 1 took 0.5"; echo "step 2 took 1.25"; '
                'if [ "$GPU_MAX_HW_QUEUES" = 2 ]; then exit 3; fi')


def probe_run(base: Path) -> Path:
    """The run directory of :data:`PROBE_RECIPE` made in ``base`` by the real CLI."""
    (base / "probe.yaml").write_text(PROBE_RECIPE)
    proc = aorta("--batch", "probe.yaml", "--output", "out", "--no-snapshot", "--", "sh", "-c",
                 PROBE_SCRIPT, cwd=base)
    assert proc.returncode == 0, proc.stderr
    return only_run_dir(base / "out")




def output_on_a_pty(argv: list[str], cwd: Path, *, columns: int = 80, rows: int = 24) -> str:
    """What ``argv`` (exit 0 asserted) prints on a real terminal of ``columns`` x ``rows``, its
    escape sequences and carriage returns removed: how rich sizes its tables for a user (no
    $COLUMNS/$LINES, which would win over the terminal's own size)."""
    import fcntl
    import pty
    import re
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen(argv, cwd=cwd, stdout=slave, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=120) == 0
    os.close(master)
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r", "")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def json_paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (keys and list indices) to a value inside the JSON value ``doc``: where a
    damaged-field test plants its damage."""
    out = [prefix] if prefix else []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) \
        else []
    for key, value in items:
        out += json_paths(value, (*prefix, key))
    return out


def set_at_path(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    """Put ``value`` at ``path`` (a ``json_paths`` path) inside ``doc``, in place."""
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


def process_alive(pid: int) -> bool:
    """Running: a zombie nobody reaped yet is gone for every test's purpose."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
