"""The gate marker every task of a Slurm job array writes (executor/slurm_job.pass_gate).

Seen in CI (2026-12-04): two tasks wrote the one marker at the same moment; the atomic writer's
check that the name holds the file it wrote saw the other task's file and refused (exit 3), so
that task's trial read "error: its Slurm job failed before the trial's outcome was written".
No Slurm needed: pass_gate is the task's own code, run here as the task runs it.
"""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from typing import Any

import pytest

from aorta_tui.core.errors import RunDirRefused
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.executor import slurm_job

TOKEN = "0123456789abcdef"


def _swap_in(marker: Path, content: str, *, open_gate: bool) -> object:
    """An atomic write of the marker that loses the race: another task's file lands first."""
    def write(self: RunDirFS, path: object, text: str) -> Path:
        marker.write_text(content)
        if open_gate:
            marker.with_name(marker.name + slurm_job.GATE_SUFFIX).write_text("")
        raise RunDirRefused(f"{marker}: its temp file was moved or replaced while it was written")
    return write


def test_a_marker_another_task_wrote_with_our_token_lets_the_task_go(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "slurm" / f"gate-s1-{TOKEN}"
    marker.parent.mkdir()
    monkeypatch.setattr(RunDirFS, "atomic_write_text", _swap_in(marker, f"{TOKEN} other-node\n", open_gate=True))
    with RunDirFS(tmp_path) as fs:
        waited = slurm_job.pass_gate(marker, TOKEN, fs)
    assert waited is not None and waited >= 0  # it went on to the go, and runs its trial


@pytest.mark.parametrize("content", ["ffffffffffffffff other\n", "", "\x00\x01"])
def test_a_marker_that_is_not_ours_stays_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 content: str) -> None:
    marker = tmp_path / "slurm" / f"gate-s1-{TOKEN}"
    marker.parent.mkdir()
    monkeypatch.setattr(RunDirFS, "atomic_write_text", _swap_in(marker, content, open_gate=True))
    with RunDirFS(tmp_path) as fs, pytest.raises(RunDirRefused):
        slurm_job.pass_gate(marker, TOKEN, fs)


def test_a_link_in_the_markers_place_stays_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "slurm" / f"gate-s1-{TOKEN}"
    marker.parent.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text(f"{TOKEN} node\n")  # our token, but through a link: never followed

    def write(self: RunDirFS, path: object, text: str) -> Path:
        marker.symlink_to(elsewhere)
        raise RunDirRefused("swapped")
    monkeypatch.setattr(RunDirFS, "atomic_write_text", write)
    with RunDirFS(tmp_path) as fs, pytest.raises(RunDirRefused):
        slurm_job.pass_gate(marker, TOKEN, fs)


def _task(run_dir: str, marker: str, results: Any) -> None:  # Any: a multiprocessing queue
    with RunDirFS(Path(run_dir)) as fs:
        results.put(slurm_job.pass_gate(Path(marker), TOKEN, fs))


def test_many_tasks_writing_the_marker_at_once_all_pass_the_gate(tmp_path: Path) -> None:
    marker = tmp_path / "slurm" / f"gate-s1-{TOKEN}"
    marker.parent.mkdir()
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    tasks = [ctx.Process(target=_task, args=(str(tmp_path), str(marker), results)) for _ in range(12)]
    for t in tasks:
        t.start()
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    marker.with_name(marker.name + slurm_job.GATE_SUFFIX).write_text("")  # the orchestrator's go
    for t in tasks:
        t.join(timeout=60)
    assert [t.exitcode for t in tasks] == [0] * len(tasks)  # none refused (exit 3 in a real task)
    got = [results.get(timeout=5) for _ in tasks]
    assert all(w is not None for w in got)
