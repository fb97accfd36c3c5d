"""The bytecode cache of the tool's children (core/bytecode.py, ``--bytecode-cache``).

The CPU stand-in for a GPU image that keeps no bytecode (docs/performance.md):
``PYTHONDONTWRITEBYTECODE=1`` with an empty ``PYTHONPYCACHEPREFIX`` makes every Python process
here compile every import, as the H200 image's uv-built torch does. The sweeps run the real CLI
from a fresh working directory with the default ``aorta-out``, and the trials dump their own
``os.environ``: with ``off`` it is exactly the orchestrator's plus the recipe's and what the
result says the tool set; with ``auto`` the cache variables are among what the tool set.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from aorta_tui.core.bytecode import DONT_WRITE_VAR, PREFIX_VAR, import_cost_note, plan_bytecode
from tests.engine_support import aorta, journal, only_run_dir

pytest.importorskip("torch")

DUMP = ("import json, os; json.dump(dict(os.environ), "
        "open(os.path.join(os.environ['AORTA_ARTIFACT_DIR'], 'environ.json'), 'w'))")
PROBE = """\
schema_version: 1
mode: probe
ticket: BC
trials: 1
mitigation_axis: [none, cuda_launch_blocking]
diagnostic_axis: [none]
"""


def _image(tmp_path: Path) -> dict[str, str]:
    """The environment of an image that compiles every import (and a cache dir of its own)."""
    empty = tmp_path / "empty-prefix"
    empty.mkdir(exist_ok=True)
    return {DONT_WRITE_VAR: "1", PREFIX_VAR: str(empty), "XDG_CACHE_HOME": str(tmp_path / "xdg")}


def test_auto_gives_the_cache_only_where_the_image_compiles_every_import(tmp_path):
    image = {**os.environ, **_image(tmp_path)}
    plan = plan_bytecode("auto", image)
    assert plan.active and plan.problem and "PYTHONDONTWRITEBYTECODE=1" in plan.problem
    cache = tmp_path / "xdg" / "aorta-tui" / "pycache"
    assert plan.tool_vars == {PREFIX_VAR: str(cache), DONT_WRITE_VAR: None} and cache.is_dir()
    child = plan.apply(image)
    assert child[PREFIX_VAR] == str(cache) and DONT_WRITE_VAR not in child
    assert "--bytecode-cache off" in plan.note()
    # this venv's torch has its __pycache__ (pip compiled it): nothing to do, nothing set
    clean = {k: v for k, v in os.environ.items() if k not in (DONT_WRITE_VAR, PREFIX_VAR)}
    plan = plan_bytecode("auto", clean)
    assert not plan.active and plan.tool_vars == {} and plan.problem is None and plan.note() is None
    assert plan.apply(clean) == clean
    # off: the image's settings exactly, with the problem still said
    plan = plan_bytecode("off", image)
    assert not plan.active and plan.apply(image) == image and "compiles it from source" in plan.note()
    # on: the cache even where the image keeps bytecode
    assert plan_bytecode("on", {**clean, "XDG_CACHE_HOME": str(tmp_path / "x2")}).active


def test_a_cache_that_cannot_be_made_is_off_with_its_reason(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    plan = plan_bytecode("auto", {**os.environ, **_image(tmp_path), "XDG_CACHE_HOME": str(blocker)})
    assert not plan.active and "cannot create the cache" in plan.reason and plan.tool_vars == {}
    with pytest.raises(ValueError):
        plan_bytecode("sometimes", {})


def test_the_import_cost_note_gives_median_count_and_range():
    plan = plan_bytecode("off", {DONT_WRITE_VAR: "1", PREFIX_VAR: "/nonexistent-prefix"})
    note = import_cost_note(plan, [4000.0, 1000.0, 2000.0])
    assert "median 2.00 s (n=3, 1.00-4.00 s)" in note and "compiled from source" in note
    assert import_cost_note(plan, []) is None
    clean = {k: v for k, v in os.environ.items() if k not in (DONT_WRITE_VAR, PREFIX_VAR)}
    assert import_cost_note(plan_bytecode("off", clean), [1.0]) is None  # bytecode kept: nothing to say


def _sweep(tmp_path: Path, name: str, *flags: str) -> tuple[Path, dict[str, str], list[dict]]:
    cwd = tmp_path / name
    cwd.mkdir()
    (cwd / "probe.yaml").write_text(PROBE)
    env = {**os.environ, **_image(tmp_path)}  # exactly what the CLI process gets
    p = aorta("--batch", "probe.yaml", "--no-snapshot", *flags, "--", sys.executable, "-c", DUMP,
              cwd=cwd, env=env, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    run = only_run_dir(cwd / "aorta-out")  # the default relative output directory
    results = [json.loads(r.read_text()) for r in sorted(run.glob("trials/*/trial-*/result.json"))]
    assert len(results) == 2
    return run, env, results


MASKED = "<masked: secret>"


def _rebuilt(parent: dict[str, str], result: dict, seen: dict[str, str]) -> dict[str, str]:
    """What the trial's environment must be: the orchestrator's, the recipe's, the tool's. A
    masked value (the trial's identity token: result.json never holds a secret) must be in the
    trial's environment, with a value of its own."""
    env = {**parent, **result["env_overlay"]}
    for k, v in result["tool_env"].items():
        if v is None:
            env.pop(k, None)
        elif v == MASKED:
            assert seen.get(k) and seen[k] != MASKED, k
            env[k] = seen[k]
        else:
            env[k] = v
    return env


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_off_gives_the_trials_exactly_the_images_environment(tmp_path):
    run, parent, results = _sweep(tmp_path, "off", "--bytecode-cache", "off")
    for r in results:
        seen = json.loads((run / "trials" / r["trial_id"] / "environ.json").read_text())
        assert seen == _rebuilt(parent, r, seen)
        assert seen[DONT_WRITE_VAR] == "1" and seen[PREFIX_VAR] == parent[PREFIX_VAR]
        assert not {DONT_WRITE_VAR, PREFIX_VAR} & set(r["tool_env"])
        assert set(r["tool_env"]) <= {"AORTA_ARTIFACT_DIR", "AORTA_TRIAL_ID", "AORTA_CELL", "AORTA_TRIAL",
                                      "AORTA_TRIAL_TOKEN", "PYTHONUNBUFFERED"}
        assert r["tool_env"].get("AORTA_TRIAL_TOKEN") == MASKED  # never the token itself
    warnings = [e for e in journal(run) if e.get("event") == "warning" and e.get("code") == "bytecode"]
    assert len(warnings) == 1 and "compiles it from source" in warnings[0]["message"]


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_auto_gives_the_trials_the_cache_and_names_what_it_set(tmp_path):
    run, parent, results = _sweep(tmp_path, "auto")
    cache = str(tmp_path / "xdg" / "aorta-tui" / "pycache")
    for r in results:
        seen = json.loads((run / "trials" / r["trial_id"] / "environ.json").read_text())
        assert seen == _rebuilt(parent, r, seen)
        assert r["tool_env"][PREFIX_VAR] == cache and r["tool_env"][DONT_WRITE_VAR] is None
        assert seen[PREFIX_VAR] == cache and DONT_WRITE_VAR not in seen
    assert sorted(r["env_overlay"].get("CUDA_LAUNCH_BLOCKING", "-") for r in results) == ["-", "1"]
    warnings = [e for e in journal(run) if e.get("event") == "warning" and e.get("code") == "bytecode"]
    assert len(warnings) == 1 and cache in warnings[0]["message"]
    assert any(Path(cache).rglob("*.pyc"))  # the trials' python compiled into it


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_the_env_snapshot_records_the_bytecode_settings_it_ran_with(tmp_path):
    env = {**os.environ, **_image(tmp_path)}
    p = aorta("env", "probe", "--no-torch", "--field", "python.bytecode", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    leaf = json.loads(p.stdout.strip().splitlines()[-1])
    assert leaf["dont_write_bytecode"] is True
    assert leaf["helpers"]["cache"] == str(tmp_path / "xdg" / "aorta-tui" / "pycache")
    p = aorta("env", "probe", "--no-torch", "--bytecode-cache", "off", "--field", "python.bytecode",
              cwd=tmp_path, env=env)
    assert json.loads(p.stdout.strip().splitlines()[-1])["helpers"]["cache"] is None
    bad = aorta("env", "probe", "--bytecode-cache", "sometimes", cwd=tmp_path, env=env)
    assert bad.returncode == 2 and "use one of auto, on, off" in bad.stderr and "Traceback" not in bad.stderr
