"""Plugins through the real entry-point machinery: a dist-info on PYTHONPATH, as pip leaves it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.engine_support import aorta, only_run_dir

PLUGIN = '''
import os
from aorta_tui.registry.registry import Mitigation
from aorta_tui.registry.workload import ConfigField, Failure, LaunchSpec, Workload, WorkloadResult


class Echo(Workload):
    name = "echo_plugin"
    description = "test plugin: reports a variable, fails on request"
    launch = LaunchSpec(in_process_safe=True)
    hint = "echo_plugin hint: set fail: false"
    config_schema = (ConfigField("fail", "bool", False),)

    def run(self, ctx):
        times = [0.001 * (i + 1) for i in range(ctx.steps)]
        for i, t in enumerate(times):
            ctx.on_step(i, t)
        fails = [Failure("asked_to_fail", "the recipe asked for a failure")] if ctx.config["fail"] else []
        return WorkloadResult(step_times_s=times, failures=fails,
                              metrics={"plugin_var": os.environ.get("PLUGIN_VAR"), "pid": os.getpid()})


MITIGATIONS = [Mitigation("plugin_mit", {"PLUGIN_VAR": "on"}, description="from a plugin")]
CLASHING = [Mitigation("none", {"X": "1"})]
'''


def make_plugin(root: Path, mitigations_ep: str = "MITIGATIONS", workload_ep: str = "Echo"
                ) -> dict[str, str]:
    root.mkdir(parents=True, exist_ok=True)
    (root / "aorta_test_plugin.py").write_text(PLUGIN)
    info = root / "aorta_test_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: aorta-test-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(f"""\
        [aorta_tui.workloads]
        echo_plugin = aorta_test_plugin:{workload_ep}

        [aorta_tui.mitigations]
        plugin = aorta_test_plugin:{mitigations_ep}
        """))
    return {"PYTHONPATH": str(root)}


RECIPE = """\
schema_version: 1
workload: echo_plugin
ticket: PLUG
trials: 2
steps: 3
trial_isolation: {isolation}
cells:
  - name: baseline-local
    mitigations: [none]
  - name: plugin-local
    mitigations: [plugin_mit]
    workload_config: {{fail: true}}
"""


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("isolation", ["process", "in_process"])
def test_plugin_workload_and_mitigation_run(tmp_path, isolation):
    env = make_plugin(tmp_path / "plug")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(isolation=isolation))
    listed = aorta("sweep", "list-mitigations", "--json", env=env)
    assert {"name": "plugin_mit", "source": "aorta-test-plugin"}.items() <= next(
        m for m in json.loads(listed.stdout) if m["name"] == "plugin_mit").items()
    proc = aorta("--batch", str(recipe), "--output", str(tmp_path / "out"), "--no-snapshot", env=env)
    assert proc.returncode == 0, proc.stderr
    run = only_run_dir(tmp_path / "out")
    res = [json.loads(p.read_text()) for p in run.glob("trials/*/trial-*/result.json")]
    assert len(res) == 4
    pids = set()
    for r in res:
        wr = r["workload_result"]
        pids.add(wr["metrics"]["pid"])
        if r["cell"] == "plugin-local":
            assert wr["metrics"]["plugin_var"] == "on"
            assert r["verdict"] == "fail"
            assert any(d["id"] == "workload:asked_to_fail" for d in r["detections"])
        else:
            assert wr["metrics"]["plugin_var"] is None
            assert r["verdict"] == "pass"
        assert r["step_times_s"] == [0.001, 0.002, 0.003] and r["step_time_source"] == "workload"
    # process isolation: a fresh process per trial; in_process: all in the orchestrator
    assert len(pids) == (4 if isolation == "process" else 1)
    assert "echo_plugin hint" in proc.stdout


def test_in_process_refused_for_workloads_that_do_not_declare_it(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("schema_version: 1\nworkload: gpu_smoke\ntrials: 1\nsteps: 1\ntrial_isolation: in_process\n"
                      "cells:\n  - name: a\n    mitigations: [none]\n")
    proc = aorta("--batch", str(recipe), "--output", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "in process" in proc.stderr and "trial_isolation: process" in proc.stderr


def test_a_workload_entry_point_that_names_no_workload_class_is_exit_3(tmp_path):
    """What a plugin's entry point names is checked when it is loaded (it crashed on first use)."""
    env = make_plugin(tmp_path / "plug", workload_ep="MITIGATIONS")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(isolation="process"))
    proc = aorta("--batch", str(recipe), "--output", str(tmp_path / "out"), env=env)
    assert proc.returncode == 3, proc.stderr
    assert ("workload 'echo_plugin' (entry point aorta_test_plugin:MITIGATIONS) is not a Workload "
            "class: found list [Mitigation(") in proc.stderr
    assert "subclass of aorta_tui.registry.workload.Workload" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


def test_mitigation_name_collision_is_an_error(tmp_path):
    env = make_plugin(tmp_path / "plug", mitigations_ep="CLASHING")
    proc = aorta("sweep", "list-mitigations", env=env)
    assert proc.returncode == 2
    assert "'none' is defined twice" in proc.stderr and "Traceback" not in proc.stderr


def test_sidecar_mitigations_file(tmp_path):
    side = tmp_path / "m.json"
    side.write_text(json.dumps({"my_queues": {"env": {"GPU_MAX_HW_QUEUES": "3"}, "description": "x"}}))
    proc = aorta("sweep", "list-mitigations", "--json", "--mitigations-file", str(side))
    assert proc.returncode == 0, proc.stderr
    assert any(m["name"] == "my_queues" and m["env"] == {"GPU_MAX_HW_QUEUES": "3"} for m in json.loads(proc.stdout))
    side.write_text('{"my_queues": {"env": {"GPU_MAX_HW_QUEUES": 3}}}')
    proc = aorta("sweep", "list-mitigations", "--mitigations-file", str(side))
    assert proc.returncode == 2 and "strings" in proc.stderr
    side.write_text('{"none": {"env": {}}}')
    proc = aorta("sweep", "list-mitigations", "--mitigations-file", str(side))
    assert proc.returncode == 2 and "defined twice" in proc.stderr
    side.write_text('{"broken": ')
    proc = aorta("sweep", "list-mitigations", "--mitigations-file", str(side))
    assert proc.returncode == 2 and f"{side}:1:" in proc.stderr
