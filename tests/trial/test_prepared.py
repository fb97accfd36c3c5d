"""How many trials the default prepares ahead, bounded by cores and free memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.trial.prepared import MAX_AHEAD, default_ahead
from tests.engine_support import aorta, only_run_dir
from tests.registry.test_plugins import RECIPE, make_plugin


def test_the_two_core_box_prepares_one_and_the_h200_box_eight():
    assert default_ahead(cpus=2, mem_available_gib=24.0) == 1
    assert default_ahead(cpus=16, mem_available_gib=120.0) == 8
    assert default_ahead(cpus=16, mem_available_gib=5.0) == 2  # memory bounds it: 2 GiB each


@given(st.integers(min_value=0, max_value=4096),
       st.one_of(st.none(), st.floats(min_value=0.0, max_value=1e6, allow_nan=False)))
def test_ahead_is_always_between_one_and_the_cap(cpus, mem):
    n = default_ahead(cpus=cpus, mem_available_gib=mem)
    assert 1 <= n <= MAX_AHEAD
    assert n <= max(1, cpus // 2)


def _journal_warnings(run: Path) -> list[dict]:
    lines = [json.loads(ln) for ln in (run / "journal.jsonl").read_text().splitlines() if ln.strip()]
    return [e for e in lines if e.get("event") == "warning" and e.get("code") == "prepared"]


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_workload_that_cannot_load_before_the_fork_is_execd_and_said_once(tmp_path):
    """A workload module that refuses to load in a zygote (as one that initialises the device at
    import would be refused): its trials still run, each exec'd, in a fresh cwd with the default
    aorta-out; one warning says why, and no trial claims a zygote."""
    env = make_plugin(tmp_path / "plug")
    mod = tmp_path / "plug" / "aorta_test_plugin.py"
    mod.write_text("import os\nif 'AORTA_ZYGOTE_TOKEN' in os.environ:\n"
                   "    raise RuntimeError('this module cannot be loaded before the fork')\n" + mod.read_text())
    work = tmp_path / "work"
    work.mkdir()
    (work / "r.yaml").write_text(RECIPE.format(isolation="process"))
    proc = aorta("--batch", "r.yaml", "--no-snapshot", cwd=work, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # plugin-local fails on purpose: a verdict, not an error
    run = only_run_dir(work / "aorta-out")
    results = [json.loads(p.read_text()) for p in sorted(run.glob("trials/*/trial-*/result.json"))]
    assert sorted(r["verdict"] for r in results) == ["fail", "fail", "pass", "pass"]
    assert all("warm" not in r["timeline"]["info"] for r in results)
    warnings = _journal_warnings(run)
    assert len(warnings) == 1, warnings
    assert "cannot be loaded before the fork" in warnings[0]["message"]


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_trials_of_the_default_each_get_a_zygote_of_their_own(tmp_path):
    """The default: every trial forked from its own zygote (never shared), no warning."""
    env = make_plugin(tmp_path / "plug")
    work = tmp_path / "work"
    work.mkdir()
    (work / "r.yaml").write_text(RECIPE.format(isolation="process"))
    proc = aorta("--batch", "r.yaml", "--no-snapshot", cwd=work, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = only_run_dir(work / "aorta-out")
    warm = [json.loads(p.read_text())["timeline"]["info"]["warm"]
            for p in sorted(run.glob("trials/*/trial-*/result.json"))]
    assert len(warm) == 4 and all(w["zygote"] == "own" and w["trial_in_zygote"] == 1 for w in warm)
    assert len({w["zygote_pid"] for w in warm}) == 4
    assert all(w["waited_for_zygote_ms"] >= 0 for w in warm)
    assert _journal_warnings(run) == []
