"""Issue 38 items 5 and 6: a newcomer's recipe typos, through the real CLI in a fresh directory:
an unknown workload is an error with the closest name, and every problem is reported at once
with none that follows from another."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real processes

REPO = Path(__file__).resolve().parents[2]
ENTRY = str(Path(sys.executable).with_name("aorta-tui"))
QUICKSTART = (REPO / "recipes" / "quickstart.yaml").read_text(encoding="utf-8")


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ENTRY, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "80"})


def test_an_unknown_workload_is_an_error_with_did_you_mean(tmp_path: Path) -> None:
    (tmp_path / "r.yaml").write_text(QUICKSTART.replace("workload: gpu_smoke",
                                                        "workload: gpu_smok"))
    for args in (("recipe", "validate", "r.yaml"), ("--batch", "r.yaml", "--dry-run")):
        res = cli(tmp_path, *args)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        assert "r.yaml:12:11: workload: unknown workload 'gpu_smok'" in res.stderr
        assert "did you mean 'gpu_smoke'?" in res.stderr
        assert "valid recipe" not in res.stdout


def test_an_unknown_workload_is_reported_beside_other_errors(tmp_path: Path) -> None:
    text = QUICKSTART.replace("workload: gpu_smoke", "workload: gpu_smok").replace(
        "trials: 2", "trials: many")
    (tmp_path / "r.yaml").write_text(text)
    res = cli(tmp_path, "recipe", "validate", "r.yaml")
    assert res.returncode == 2
    assert "unknown workload 'gpu_smok'" in res.stderr and "trials" in res.stderr


def test_every_problem_at_once_and_no_knock_on(tmp_path: Path) -> None:
    text = (QUICKSTART.replace("threshold: 1.15", "threshhold: 1.15")
            .replace("size: 128", "sise: 128")
            .replace("mitigations: [none]", "mitigation: [none]", 1))
    (tmp_path / "r.yaml").write_text(text)
    res = cli(tmp_path, "recipe", "validate", "r.yaml")
    assert res.returncode == 2, res.stdout
    err = res.stderr
    # the workload setting typo is reported with the others, not after they are fixed
    assert "workload_config.sise: unknown setting 'sise'" in err
    assert "confound.threshhold: unknown key 'threshhold'" in err
    assert "cells[0].mitigation: unknown key 'mitigation'" in err
    # the baseline cell exists (it has an error of its own): no "no cell is named"
    assert "no cell is named" not in err
    # fixing the two recipe typos leaves exactly the one that remained
    (tmp_path / "r.yaml").write_text(text.replace("threshhold", "threshold")
                                     .replace("mitigation: [none]", "mitigations: [none]", 1))
    again = cli(tmp_path, "recipe", "validate", "r.yaml")
    assert again.returncode == 2 and "sise" in again.stderr and "threshhold" not in again.stderr


def test_a_dry_run_reports_them_together_too(tmp_path: Path) -> None:
    text = QUICKSTART.replace("threshold: 1.15", "threshhold: 1.15").replace("size: 128",
                                                                             "sise: 128")
    (tmp_path / "r.yaml").write_text(text)
    res = cli(tmp_path, "--batch", "r.yaml", "--dry-run")
    assert res.returncode == 2
    assert "sise" in res.stderr and "threshhold" in res.stderr
