"""`aorta-tui recipe validate | resolve | schema`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from aorta_tui.cli.main import app
from aorta_tui.recipe import load_recipe, load_recipe_text, recipe_hash

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_validate_prints_the_plan(upstream_dir):
    res = invoke("recipe", "validate", str(upstream_dir / "probe-template-bash.yaml"))
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "mode probe" in out and "4 cells, 12 trials" in out
    assert "baseline none-none (explicit)" in out
    assert "tf32_off-xnack" in out and "DISABLE_TF32=1 HSA_XNACK=1" in out
    assert "given after `--`" in out


def test_validate_json(upstream_dir, registry):
    path = upstream_dir / "example-fsdp-smoke.yaml"
    res = invoke("recipe", "validate", str(path), "--json")
    assert res.exit_code == 0
    data = json.loads(res.stdout)
    assert data["ok"] is True and data["mode"] == "triage" and data["workload"] == "race"
    assert data["hash"] == recipe_hash(load_recipe(path, registry=registry))
    cells = {c["name"]: c for c in data["cells"]}
    assert cells["xnack-local"]["env"] == {"HSA_XNACK": "1"}
    assert cells["baseline-local"]["baseline"] is True and cells["baseline-local"]["env"] == {}
    assert data["total_trials"] == 6


def test_validate_json_reports_every_issue(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("schema_version: 1\nworkload: gpu_smoke\ntrials: x\nsteps: 1\n"
                 "cells: [{name: a, mitigations: [tf32of]}]\nextra: 1\n")
    res = invoke("recipe", "validate", str(f), "--json")
    assert res.exit_code == 2
    data = json.loads(res.stdout)
    assert data["ok"] is False
    assert [(i["line"], i["path"]) for i in data["issues"]] == [
        (3, "trials"), (5, "cells[0].mitigations[0]"), (6, "extra")]
    assert "did you mean 'tf32_off'" in data["issues"][1]["hint"]
    assert f"{f}:3:9" in res.stderr and "3 problems" in res.stderr


def test_validate_env_layers_and_sidecar_mitigations(tmp_path):
    sidecar = tmp_path / "mine.json"
    sidecar.write_text(json.dumps({"my_knob": {"env": {"MY_KNOB": "on"}}}))
    f = tmp_path / "r.yaml"
    f.write_text(
        "schema_version: 1\nworkload: gpu_smoke\ntrials: 2\nsteps: 1\n"
        "extra_env: {A: recipe, B: recipe}\n"
        "cells:\n  - name: a\n    mitigations: [my_knob, xnack]\n    extra_env: {B: cell}\n"
        "    trials: 3\n")
    res = invoke("recipe", "validate", str(f), "--json")
    assert res.exit_code == 2 and "unknown mitigation 'my_knob'" in res.stderr
    res = invoke("recipe", "validate", str(f), "--json", "--mitigations-file", str(sidecar))
    assert res.exit_code == 0, res.stderr
    (cell,) = json.loads(res.stdout)["cells"]
    assert cell["env"] == {"MY_KNOB": "on", "HSA_XNACK": "1", "A": "recipe", "B": "cell"}
    assert cell["trials"] == 3


def test_resolve_writes_a_reloadable_file_with_the_command(upstream_dir, registry, tmp_path):
    path = upstream_dir / "probe-template-bash.yaml"
    res = invoke("recipe", "resolve", str(path), "--", "bash", "-c", "exit 3")
    assert res.exit_code == 0, res.stderr
    again = load_recipe_text(res.stdout, registry=registry)
    assert again.command == ("bash", "-c", "exit 3")
    assert [c.name for c in again.cells] == [c.name for c in load_recipe(path).cells]
    assert yaml.safe_load(res.stdout)["command"] == ["bash", "-c", "exit 3"]


def test_resolve_refuses_a_command_for_a_triage_recipe(upstream_dir):
    res = invoke("recipe", "resolve", str(upstream_dir / "example-fsdp-smoke.yaml"), "--",
                 "true")
    assert res.exit_code == 2 and "mode: triage" in res.stderr


def test_schema_stdout_and_file(tmp_path):
    res = invoke("recipe", "schema")
    assert res.exit_code == 0
    assert json.loads(res.stdout)["title"].startswith("aorta-tui recipe")
    out = tmp_path / "sub" / "recipe.schema.json"
    res = invoke("recipe", "schema", "-o", str(out))
    assert res.exit_code == 0 and json.loads(out.read_text()) == json.loads(
        invoke("recipe", "schema").stdout)
    assert [p.name for p in out.parent.iterdir()] == ["recipe.schema.json"]  # no temp left


def test_schema_to_an_unwritable_place(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = invoke("recipe", "schema", "-o", str(blocker / "schema.json"))
    assert res.exit_code == 2 and "cannot write" in res.stderr
    assert blocker.read_text() == "x"


@pytest.mark.parametrize("sub", ["validate", "resolve", "schema"])
def test_help_has_an_example(sub):
    res = invoke("recipe", sub, "--help")
    assert res.exit_code == 0 and "Example" in res.stdout and "aorta-tui recipe" in res.stdout


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_examples_validate_through_the_real_program(example_files):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for f in example_files:
        proc = subprocess.run([sys.executable, "-m", "aorta_tui", "recipe", "validate", str(f)],
                              capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
        assert proc.returncode == 0, (f, proc.stderr)
        assert "valid recipe" in proc.stdout


WC = """\
schema_version: 1
workload: gpu_smoke
trials: 1
steps: 2
workload_config:
  size: 64
  dtipe: float32
cells:
  - name: a
    mitigations: [none]
  - name: b
    mitigations: [none]
    workload_config:
      sise: 3
  - name: c
    mitigations: [none]
    workload_config:
      size: big
"""


def test_validate_checks_workload_config_against_the_workload(tmp_path):
    f = tmp_path / "wc.yaml"
    f.write_text(WC)
    res = invoke("recipe", "validate", str(f), "--json")
    assert res.exit_code == 2
    issues = json.loads(res.stdout)["issues"]
    assert [(i["line"], i["column"], i["path"]) for i in issues] == [
        (7, 3, "workload_config.dtipe"),  # reported once, at the recipe level
        (14, 7, "cells[1].workload_config.sise"),
        (18, 13, "cells[2].workload_config.size"),
    ]
    assert "did you mean 'size'" in issues[1]["hint"]
    assert issues[2]["message"].startswith("expected an integer")
    fixed = WC.replace("dtipe", "dtype").replace("sise", "size").replace("big", "32")
    f.write_text(fixed)
    assert invoke("recipe", "validate", str(f)).exit_code == 0


def test_validate_refuses_a_workload_that_is_not_registered(tmp_path):
    # issue 38 item 5: it was a note and exit 0; a run would stop on it, so it is an error
    f = tmp_path / "nw.yaml"
    f.write_text(WC.replace("gpu_smoke", "not_installed_here"))
    res = invoke("recipe", "validate", str(f), "--json")
    assert res.exit_code == 2, res.stdout
    assert "unknown workload 'not_installed_here'" in res.stdout + res.stderr


def test_in_process_needs_a_workload_that_allows_it(tmp_path):
    from aorta_tui.registry.registry import load_workload

    f = tmp_path / "ip.yaml"
    f.write_text(WC.replace("dtipe", "dtype").replace("sise", "size").replace("big", "32")
                 + "trial_isolation: in_process\n")
    res = invoke("recipe", "validate", str(f))
    safe = load_workload("gpu_smoke").launch.in_process_safe
    assert res.exit_code == (0 if safe else 2)
    if not safe:
        assert f"{f}:19:18: trial_isolation" in res.stderr
