"""Issue 37 item 1: a run directory renamed after a SIGKILL is the same run.

``aorta-tui --batch p.yaml -- trial``, SIGKILL once the trial started, ``mv RUN renamed``,
``sweep run --resume renamed``: the old attempt ran on beside the new one (both wrote all their
beats) and the warning called the real orphan "forged or stale", because its identity token was
bound to the directory's old path. The token is bound to the run id now, which run.json keeps.
The real CLI, a real SIGKILL, a real ``rename(2)``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.engine_support import REPO

TRIAL = textwrap.dedent("""\
    #!/bin/sh
    # The first attempt beats until it is ended; a later attempt is a short, passing trial.
    if mkdir "$RENAME_CASE/first" 2>/dev/null; then
      while :; do echo beat >> "$RENAME_CASE/beats.$$"; sleep 0.1; done
    fi
    echo step_time 0.01
    """)

RECIPE = """\
schema_version: 1
mode: probe
ticket: REN
trials: 1
mitigation_axis: [none]
diagnostic_axis: [none]
"""


def _env(case: Path) -> dict[str, str]:
    return {**os.environ, "RENAME_CASE": str(case), "PYTHONPATH": str(REPO),
            "PATH": f"{case / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"}


def _marked(case: Path) -> set[int]:
    """Live (not zombie) processes carrying this case's marker in their environment."""
    want = f"RENAME_CASE={case}".encode()
    out = set()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if want in env and state != b"Z":
            out.add(int(name))
    return out


def _events(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            if line.startswith("{"):
                out.append(json.loads(line))
    return out


def _kill_after_trial_started(case: Path) -> Path:
    proc = subprocess.Popen([sys.executable, "-m", "aorta_tui", "--batch", "probe.yaml",
                             "--no-snapshot", "--json", "--", "beats"], cwd=case, env=_env(case),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            for journal in (case / "aorta-out" / "REN").glob("*/journal.jsonl"):
                if '"trial_started"' in journal.read_text() and list(case.glob("beats.*")):
                    return journal.parent
            assert proc.poll() is None, "the sweep ended before its trial started"
            time.sleep(0.05)
        raise AssertionError("the trial never started")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_renamed_run_directory_ends_its_orphan_and_runs_the_trial_once(
        tmp_path: Path, attack_tally) -> None:
    case = tmp_path / "case"
    (case / "bin").mkdir(parents=True)
    (case / "bin" / "beats").write_text(TRIAL)
    (case / "bin" / "beats").chmod(0o755)
    (case / "probe.yaml").write_text(RECIPE)
    try:
        run_dir = _kill_after_trial_started(case)
        orphans = _marked(case)
        assert orphans, "the trial did not outlive its orchestrator"
        renamed = run_dir.with_name("renamed")
        os.rename(run_dir, renamed)
        res = subprocess.run([sys.executable, "-m", "aorta_tui", "sweep", "run", "--resume",
                              str(renamed), "--no-snapshot", "--json"], cwd=case, env=_env(case),
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr[-2000:]
        alive = orphans & _marked(case)
        attack_tally.record("renamed run directory, orphan ended (issue 37 item 1)", cases=1,
                            failures=int(bool(alive)), promise="the old attempt ended, run once")
        assert not alive, f"the old attempt still runs after the resume: {sorted(alive)}"
        warnings = [e["message"] for e in _events(res.stdout)
                    if e.get("event") == "warning" and e.get("code") == "orphan"]
        assert warnings and all("ended" in w for w in warnings), warnings
        assert not any("forged" in w for w in warnings), warnings
        # the orphan stopped beating: its file does not grow after the resume
        beats = {p: p.stat().st_size for p in case.glob("beats.*")}
        time.sleep(0.4)
        assert {p: p.stat().st_size for p in case.glob("beats.*")} == beats
        matrix = json.loads((renamed / "matrix.json").read_text())
        assert matrix["status"] == "completed" and matrix["trials_finished"] == 1, matrix
    finally:
        for pid in _marked(case):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
