"""`queue sweep` keeps an isolated sweep in a run directory on RunStore: a lock, an fsynced
journal, one result.json per point and the document; `queue resume DIR` runs only the points
without a whole result and journal line, a finished point never again. Real processes: the CLI,
one `queue run` child per point (CPU emulation, tiny size), SIGINT / SIGKILL to the group."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from aorta_tui.core.events import (
    RunFinished,
    RunStarted,
    TrialFinished,
    TrialStarted,
    event_from_dict,
)
from aorta_tui.hwqueue.sweep import ISOLATED, point_id, sweep_document
from aorta_tui.store.lock import RunLock

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

pytest.importorskip("torch")

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}
POINT = ["tiny_kernel_stress", "--device", "cpu", "--size", "tiny", "-i", "2", "-w", "0"]


def _queue(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aorta_tui", "queue", *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=120)


def _events(text: str) -> list[Any]:
    return [event_from_dict(json.loads(line)) for line in text.splitlines() if line.strip()]


def _journal(run_dir: Path) -> list[Any]:
    return _events((run_dir / "journal.jsonl").read_text())


def _point(run_dir: Path, n: int) -> dict[str, Any]:
    return json.loads((run_dir / "trials" / point_id(n) / "result.json").read_text())


def _ran(events: list[Any]) -> list[str]:
    return [e.trial_id for e in events if isinstance(e, TrialStarted)]


def _expected_document(run_dir: Path, counts: list[int]) -> dict[str, Any]:
    """The document a straight run would write from these points' results."""
    request = json.loads((run_dir / "request.json").read_text())
    return sweep_document(request["run_id"], counts, [_point(run_dir, n) for n in counts], [],
                          request["knee_gain"], ISOLATED)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One whole 1,2-stream sweep, made once; tests work on copies."""
    cwd = tmp_path_factory.mktemp("straight")
    p = _queue("sweep", *POINT, "--streams", "1,2", "--run-dir", "run", "-o", "s.json", "--json",
               cwd=cwd)
    assert p.returncode == 0, p.stderr
    (cwd / "stdout.jsonl").write_text(p.stdout)
    return cwd


def _copy(finished_run: Path, tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run / "run", run_dir)
    return run_dir


def test_a_sweep_keeps_journal_point_results_and_document(finished_run: Path) -> None:
    run_dir = finished_run / "run"
    stdout = _events((finished_run / "stdout.jsonl").read_text())
    journal = _journal(run_dir)
    assert journal == stdout  # the journal holds the --json stream, event for event
    assert isinstance(journal[0], RunStarted) and journal[0].run_dir == "run"
    assert journal[0].cells == ["s0001", "s0002"] and journal[0].total == 2
    assert [e.trial_id for e in journal if isinstance(e, TrialFinished)] == ["s0001", "s0002"]
    last = journal[-1]
    assert isinstance(last, RunFinished) and last.status == "completed" and last.exit_code == 0
    doc = json.loads((run_dir / "sweep.json").read_text())
    assert doc == last.summary["result"] == json.loads((finished_run / "s.json").read_text())
    assert doc == _expected_document(run_dir, [1, 2])
    assert [_point(run_dir, n)["config"]["streams"] for n in (1, 2)] == [1, 2]


def test_a_damaged_or_foreign_point_result_runs_again(finished_run: Path, tmp_path: Path) -> None:
    run_dir = _copy(finished_run, tmp_path)
    kept = _point(run_dir, 1)
    (run_dir / "trials/s0002/result.json").write_text('{"kind": "aorta-tui/queue-res')
    p = _queue("resume", str(run_dir), "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert _ran(_events(p.stdout)) == ["s0002"]
    # another point's whole result in s0002's place is not s0002's result either
    shutil.copy(run_dir / "trials/s0001/result.json", run_dir / "trials/s0002/result.json")
    p = _queue("resume", str(run_dir), "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert _ran(_events(p.stdout)) == ["s0002"]
    assert _point(run_dir, 1) == kept  # never re-run
    assert json.loads((run_dir / "sweep.json").read_text()) == _expected_document(run_dir, [1, 2])


def test_resuming_a_finished_sweep_runs_nothing(finished_run: Path, tmp_path: Path) -> None:
    run_dir = _copy(finished_run, tmp_path)
    before = json.loads((run_dir / "sweep.json").read_text())
    p = _queue("resume", str(run_dir), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "peak:" in p.stdout and f"run directory: {run_dir}" in p.stdout
    assert _ran(_journal(run_dir)) == ["s0001", "s0002"]  # the first session's, no new one
    assert json.loads((run_dir / "sweep.json").read_text()) == before


def test_a_second_orchestrator_is_refused(finished_run: Path, tmp_path: Path) -> None:
    run_dir = _copy(finished_run, tmp_path)
    journal = (run_dir / "journal.jsonl").read_bytes()
    lock = RunLock(run_dir)
    lock.acquire()  # this test process holds the run, as a running sweep would
    try:
        p = _queue("resume", str(run_dir), cwd=tmp_path)
    finally:
        lock.release()
    assert p.returncode == 2, p.stderr
    assert "is already being run by" in p.stderr
    assert "Traceback" not in p.stderr
    assert (run_dir / "journal.jsonl").read_bytes() == journal  # nothing written


def test_not_a_run_directory_and_in_process_run_dir_are_refused(tmp_path: Path) -> None:
    p = _queue("resume", str(tmp_path), cwd=tmp_path)
    assert p.returncode == 2 and "is not a queue sweep's run directory" in p.stderr, p.stderr
    p = _queue("sweep", *POINT, "--streams", "1", "--in-process", "--run-dir", "r", cwd=tmp_path)
    assert p.returncode == 2 and "keeps no run" in p.stderr, p.stderr
    assert list(tmp_path.iterdir()) == []


def _start_and_stop_after_first_point(tmp_path: Path, sig: int) -> tuple[Path, int, str]:
    """A 1,2-stream sweep, sent ``sig`` once the first point's trial_finished line is in the
    journal: to its whole group, as Ctrl-C is; SIGTERM to the process alone, as `kill` or a
    service manager sends it, with SIGINT ignored as under nohup or a background job."""
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "aorta_tui", "queue", "sweep", *POINT,
                             "--streams", "1,2", "--run-dir", str(run_dir)], cwd=tmp_path,
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
                            if sig == signal.SIGTERM else None)
    deadline = time.monotonic() + 60
    journal = run_dir / "journal.jsonl"
    while time.monotonic() < deadline:
        if journal.exists() and '"trial_finished"' in journal.read_text():
            break
        time.sleep(0.05)
    if sig == signal.SIGTERM:
        os.kill(proc.pid, sig)
    else:
        os.killpg(proc.pid, sig)
    _out, err = proc.communicate(timeout=60)
    return run_dir, proc.returncode, err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL],
                         ids=["ctrl-c", "sigterm", "sigkill"])
def test_a_stopped_sweep_resumes_only_its_missing_points(tmp_path: Path, sig: int) -> None:
    run_dir, code, err = _start_and_stop_after_first_point(tmp_path, sig)
    journal = _journal(run_dir)
    done = [e.trial_id for e in journal if isinstance(e, TrialFinished)]
    assert done == ["s0001"], err  # the second point was cut short
    assert not (run_dir / "sweep.json").exists()
    if sig in (signal.SIGINT, signal.SIGTERM):
        assert code == 130, err
        assert f"queue resume {run_dir}" in err and "Traceback" not in err
        assert isinstance(journal[-1], RunFinished) and journal[-1].status == "interrupted"
    else:
        assert code == -signal.SIGKILL
        assert not isinstance(journal[-1], RunFinished)  # no last word: killed
    first = _point(run_dir, 1)
    p = _queue("resume", str(run_dir), "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    events = _events(p.stdout)
    assert isinstance(events[0], RunStarted) and events[0].resumed and events[0].already_done == 1
    assert _ran(events) == ["s0002"]
    assert _point(run_dir, 1) == first  # the finished point is kept as it was
    doc = events[-1].summary["result"]
    assert doc == json.loads((run_dir / "sweep.json").read_text())
    assert doc == _expected_document(run_dir, [1, 2])
    assert doc["stream_counts"] == [1, 2] and doc["failed_points"] == []
