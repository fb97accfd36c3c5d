"""Issue 38 item 12: a run stopped by Ctrl-C or SIGKILL while its prepared zygotes import leaves
no ``BrokenPipeError`` traceback in ``RUN/warm/prepared-N.log`` (bundles include those logs).

The quickstart as a user runs it, in a fresh directory: the orchestrator is stopped as soon as
its first zygotes are started; the zygotes (their own sessions: Ctrl-C does not reach them)
finish importing, find the orchestrator gone, and leave."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real processes, torch imports

pytest.importorskip("torch")
REPO = Path(__file__).resolve().parents[2]
ENTRY = str(Path(sys.executable).with_name("aorta-tui"))


def _writers_of(logs: list[Path]) -> list[int]:
    """Pids whose stderr is one of ``logs`` (the zygotes still running)."""
    wanted = {str(p.resolve()) for p in logs}
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "fd" / "2") in wanted:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_a_stopped_run_leaves_no_traceback_in_the_prepared_logs(tmp_path: Path, sig: int) -> None:
    (tmp_path / "recipes").mkdir()
    shutil.copy(REPO / "recipes" / "quickstart.yaml", tmp_path / "recipes" / "quickstart.yaml")
    proc = subprocess.Popen([ENTRY, "--batch", "recipes/quickstart.yaml"], cwd=tmp_path,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        logs: list[Path] = []
        while time.monotonic() < deadline and not logs:  # the first batch of zygotes started
            logs = sorted(tmp_path.glob("aorta-out/QUICKSTART/*/warm/prepared-*.log"))
            time.sleep(0.05)
        assert logs, "no prepared zygote was started"
        os.killpg(proc.pid, sig)  # Ctrl-C reaches the terminal's process group
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    logs = sorted(tmp_path.glob("aorta-out/QUICKSTART/*/warm/prepared-*.log"))
    deadline = time.monotonic() + 120
    while _writers_of(logs) and time.monotonic() < deadline:  # they finish importing, then see
        time.sleep(0.2)
    assert not _writers_of(logs), "a zygote outlived its orchestrator by minutes"
    for log in logs:
        text = log.read_text(errors="replace")
        assert "Traceback" not in text and "BrokenPipeError" not in text, (log.name, text)
