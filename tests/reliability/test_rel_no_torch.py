"""Issue 27 items 17-18: without torch (the README says it is optional).

``queue run tiny_kernel_stress --device cpu`` and ``queue sweep`` exited 70
(``ModuleNotFoundError`` in hwqueue/backends.py), a ``policy sweep`` recorded each trial as an
internal error, and ``--batch recipes/quickstart.yaml`` failed all 6 trials with a traceback
and the hint that the device is broken. Now each is exit 3 with the fix, the sweep before any
trial runs.

"Without torch" is this interpreter with torch made unimportable for it and for every process
it starts: ``PYTHONPATH`` names a directory whose ``sitecustomize`` puts a finder first on
``sys.meta_path`` that answers ``No module named 'torch'`` (what an interpreter without torch
says), while aorta-tui and its other dependencies import as usual. Real CLI, fresh working
directory, default output directories.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine_support import REPO

BLOCKER = '''\
import sys


class _NoTorch:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoTorch)
'''
QUEUE = ["--device", "cpu", "--iterations", "2", "--warmup", "1", "--size", "tiny"]
PROBE = ("schema_version: 1\nmode: probe\nticket: NT\ntrials: 1\nmitigation_axis: [none]\n"
         "diagnostic_axis: [none]\n")


@pytest.fixture
def no_torch(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow), str(REPO)])}
    work = tmp_path / "work"
    work.mkdir()
    check = subprocess.run([sys.executable, "-c", "import aorta_tui.cli.main\nimport torch"],
                           env=env, capture_output=True, text=True, timeout=60)
    assert "No module named 'torch'" in check.stderr, check.stderr  # torch is gone, we are not
    return work, env


def _cli(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aorta_tui", *args], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)


def _assert_needs_torch(res: subprocess.CompletedProcess[str]) -> None:
    assert res.returncode == 3, res.stderr
    assert "needs torch" in res.stderr and "pip install torch" in res.stderr, res.stderr
    assert "ROCm or CUDA build" in res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr


def test_queue_run_without_torch_is_exit_3_with_the_fix(no_torch) -> None:
    work, env = no_torch
    res = _cli(work, env, "queue", "run", "tiny_kernel_stress", "--streams", "2", *QUEUE,
               "-o", "q.json")
    _assert_needs_torch(res)
    assert not (work / "q.json").exists()


def test_queue_sweep_without_torch_is_exit_3_before_any_point_runs(no_torch) -> None:
    work, env = no_torch
    res = _cli(work, env, "queue", "sweep", "tiny_kernel_stress", "--streams", "2,4", *QUEUE)
    _assert_needs_torch(res)
    assert "point" not in res.stderr  # refused up front, not once per point
    assert not list(work.glob("aorta-queue/*/trials/*"))


def test_policy_sweep_without_torch_is_exit_3_and_keeps_nothing(no_torch) -> None:
    work, env = no_torch
    res = _cli(work, env, "policy", "sweep", "tiny_kernel_stress", "--streams", "2",
               "--trials", "1", *QUEUE)
    _assert_needs_torch(res)
    assert not list(work.glob("aorta-policy/*"))


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_the_quickstart_without_torch_is_exit_3_at_plan_time(no_torch) -> None:
    work, env = no_torch
    res = _cli(work, env, "--batch", str(REPO / "recipes" / "quickstart.yaml"), "--no-snapshot")
    _assert_needs_torch(res)
    assert "workload 'gpu_smoke' needs torch" in res.stderr
    assert "device or its runtime is broken" not in res.stdout + res.stderr
    assert not (work / "aorta-out").exists()  # no trial ran, no run directory was made
    dry = _cli(work, env, "--batch", str(REPO / "recipes" / "quickstart.yaml"), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "needs torch" in dry.stdout + dry.stderr and "a real run would stop" in dry.stdout + dry.stderr


def test_a_probe_recipe_still_runs_without_torch(no_torch) -> None:
    """What needs no torch keeps working without it (the README's promise)."""
    work, env = no_torch
    (work / "probe.yaml").write_text(PROBE)
    res = _cli(work, env, "--batch", "probe.yaml", "--no-snapshot", "--", "true")
    assert res.returncode == 0, res.stderr
