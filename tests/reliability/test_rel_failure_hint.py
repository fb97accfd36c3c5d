"""Issue 27 item 19: the failure hint only when something failed.

A real ``gpu_smoke`` sweep in worker processes, through the real CLI, from a fresh working
directory with the default output directory (``aorta-out``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine_support import aorta, only_run_dir

pytest.importorskip("torch")

RECIPE = """\
schema_version: 1
ticket: HINT
workload: gpu_smoke
trials: 1
steps: 2
workload_config: {{size: 16, device: cpu, inject_error: {inject}}}
cells:
  - name: baseline-local
    mitigations: [none]
"""


def _run(tmp_path: Path, inject: str) -> tuple[dict, dict]:
    (tmp_path / "r.yaml").write_text(RECIPE.format(inject=inject))
    proc = aorta("--batch", "r.yaml", "--no-snapshot", "--json", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    finished = [json.loads(ln) for ln in proc.stdout.splitlines()
                if ln.startswith('{"event": "run_finished"')]
    assert len(finished) == 1, proc.stdout[-2000:]
    matrix = json.loads((only_run_dir(tmp_path / "aorta-out") / "matrix.json").read_text())
    return finished[0], matrix


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_an_all_pass_run_carries_no_failure_hint(tmp_path: Path) -> None:
    finished, matrix = _run(tmp_path, "false")
    assert [t["verdict"] for t in matrix["trials"]] == ["pass"]
    assert finished["summary"]["hint"] == ""
    assert matrix["hint"] == ""
    md = (only_run_dir(tmp_path / "aorta-out") / "matrix.md").read_text()
    assert "Hint:" not in md


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_failing_run_still_carries_its_hint(tmp_path: Path) -> None:
    finished, matrix = _run(tmp_path, "true")
    assert [t["verdict"] for t in matrix["trials"]] == ["fail"]
    assert "injected" in finished["summary"]["hint"] and matrix["hint"] == finished["summary"]["hint"]
