"""A damaged per-rank workload result in a real sweep (sweep/orchestrator.py's fold of the
ranks, read through core/worker_result.py): a rank file that is no JSON is left out and the
trial keeps the verdict rank 0's result gives it, as it always did; one that parses but is no
result (``failures: 3``) is left out too, where the untyped fold stopped the sweep with a
TypeError (exit 70). A workload whose result breaks the types still fails its trial."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from tests.engine_support import aorta, only_run_dir

PLUGIN = '''
from aorta_tui.registry.workload import ConfigField, Failure, Workload, WorkloadResult


class Planter(Workload):
    """Plants a rank-1 result file beside the one the worker writes for rank 0."""

    name = "rank_planter_t"
    needs_torch = False
    config_schema = (ConfigField("text", "str", ""), ConfigField("fail", "bool", False),
                     ConfigField("untyped", "bool", False))

    def run(self, ctx):
        if ctx.config["text"]:
            (ctx.trial_dir / "workload_result.rank1.json").write_text(ctx.config["text"])
        ctx.on_step(0, 0.001)
        fails = [Failure("asked", "asked to fail")] if ctx.config["fail"] else []
        if ctx.config["untyped"]:  # a plugin's mistake: no message
            fails = [Failure("asked", None)]
        return WorkloadResult(step_times_s=[0.001], failures=fails)
'''

RECIPE = """\
schema_version: 1
workload: rank_planter_t
ticket: RANKS
trials: 1
steps: 1
workload_config: {config}
cells:
  - name: a
    mitigations: [none]
"""


def _plugin(root: Path) -> dict[str, str]:
    root.mkdir(parents=True)
    (root / "rank_planter_t.py").write_text(PLUGIN)
    info = root / "rank_planter_t-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rank-planter-t\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""\
        [aorta_tui.workloads]
        rank_planter_t = rank_planter_t:Planter
        """))
    # the plugin beside this checkout's aorta_tui (the caller's PYTHONPATH kept)
    return {"PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}


# (rank 1's file, rank 0 asked to fail, the trial's verdict)
CASES = [
    ("{", False, "pass"),  # no JSON: left out, as always
    ('"x"', True, "fail"),  # no object: left out; rank 0's own failure still fails the trial
    ('{"failures": 3}', False, "pass"),  # parses, no result: left out (was a TypeError, exit 70)
]


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize(("text", "fail", "verdict"), CASES, ids=["no-json", "no-object", "no-result"])
def test_a_damaged_rank_file_is_left_out_and_the_verdict_is_rank_0s(tmp_path: Path, text: str,
                                                                    fail: bool, verdict: str) -> None:
    env = _plugin(tmp_path / "plug")
    config = json.dumps({"text": text, "fail": fail})
    (tmp_path / "r.yaml").write_text(RECIPE.format(config=config))
    proc = aorta("--batch", str(tmp_path / "r.yaml"), "--output", str(tmp_path / "out"),
                 "--no-snapshot", env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    (res_path,) = only_run_dir(tmp_path / "out").glob("trials/*/trial-*/result.json")
    res = json.loads(res_path.read_text())
    assert res["verdict"] == verdict
    wr = res["workload_result"]
    assert wr["ranks"] == {} and wr["passed"] is (not fail)
    assert [f["code"] for f in wr["failures"]] == (["asked"] if fail else [])


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_result_that_breaks_the_types_still_fails_the_trial_and_names_the_field(tmp_path: Path) -> None:
    """A failure without a message: main recorded it as written (verdict fail, reason the
    code); the worker now records it as an invalid_result failure naming the field, so the
    verdict stays fail and the reader never meets a file it refuses."""
    env = _plugin(tmp_path / "plug")
    (tmp_path / "r.yaml").write_text(RECIPE.format(config=json.dumps({"untyped": True})))
    proc = aorta("--batch", str(tmp_path / "r.yaml"), "--output", str(tmp_path / "out"),
                 "--no-snapshot", env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (res_path,) = only_run_dir(tmp_path / "out").glob("trials/*/trial-*/result.json")
    res = json.loads(res_path.read_text())
    assert res["verdict"] == "fail"
    (detection,) = [d for d in res["detections"] if d["id"].startswith("workload:")]
    assert detection["id"] == "workload:invalid_result"
    assert "workload_result.json: failures[0].message: expected a string" in detection["message"]
