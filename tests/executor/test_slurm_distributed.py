"""Distributed (torchrun) trials on Slurm: ``nodes`` x ``gpus_per_node``, ``srun torchrun``.

The real trials run on the one-node Slurm of scripts/slurm-local.sh (fake GPUs in gres.conf)
with the ``race`` workload on CPU torch (gloo): each rank writes its rank and world size, so the
test sees that torchrun, started by srun inside the job, really met its ranks. The bad-input
cases are refused before anything is submitted (no run directory).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.executor import slurm_cmd as sc
from aorta_tui.executor.slurm_launch import parse_args, srun_argv
from tests.engine_support import aorta, only_run_dir
from tests.executor.test_slurm_executor import _slurm_problem

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow


@pytest.fixture
def real_slurm() -> None:
    """The tests that submit (or ask sinfo): skip without Slurm, fail with AORTA_REQUIRE_SLURM=1."""
    problem = _slurm_problem()
    if problem is not None:
        if os.environ.get("AORTA_REQUIRE_SLURM") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    pytest.importorskip("torch")

RECIPE = """\
schema_version: 1
ticket: DIST
workload: race
trials: 1
steps: 2
workload_config: {{alltoall_tensor_size: 64}}
{executor}
cells:
  - name: ok
    mitigations: [none]
"""


def _write(tmp_path: Path, executor: str, extra: str = "") -> Path:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(executor=executor) + extra)
    return recipe


def _run(recipe: Path, out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return aorta("--batch", str(recipe), "--output", str(out), "--no-snapshot", *flags, timeout=240)


def _check_distributed_trial(out: Path) -> dict:
    run = only_run_dir(out)
    trial = run / "trials" / "ok" / "trial-000"
    res = json.loads((trial / "result.json").read_text())
    assert res["verdict"] == "pass", res["reason"]
    assert res["argv"][1:3] == ["-m", "aorta_tui.executor.slurm_launch"]
    assert "--nodes=1" in res["argv"] and "--nproc-per-node=2" in res["argv"]
    stderr = (trial / "stderr.log").read_text()
    assert "srun --nodes=1" in stderr and "rendezvous" in stderr, stderr[-2000:]
    ranks = {}
    for name in ("workload_result.json", "workload_result.rank1.json"):
        m = json.loads((trial / name).read_text())["metrics"]
        ranks[m["rank"]] = (m["world_size"], m["backend"])
    assert ranks == {0: (2, "gloo"), 1: (2, "gloo")}  # two ranks met through c10d on the node
    facts = res["process"]["executor"]
    assert facts["state"] == "COMPLETED" and facts["job_id"] and facts["node"]
    assert facts["nodes"] == [facts["node"]]
    assert facts["distributed"] == {"nodes": 1, "ranks_per_node": 2, "world_size": 2}
    gpus = facts["gpus"]["SLURM_JOB_GPUS"]
    assert gpus is not None and len(gpus.split(",")) == 2, facts  # --gres=gpu:2 on the node
    assert facts["gpus"]["CUDA_VISIBLE_DEVICES"] == gpus
    # Slurm itself ran it as that job (squeue keeps finished jobs for MinJobAge)
    q = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-j", facts["job_id"].split("_")[0],
                        "-o", "%i|%T|%D"], capture_output=True, text=True, timeout=30)
    assert f"{facts['job_id']}|COMPLETED|1" in q.stdout, q.stdout
    return facts


def test_a_torchrun_trial_runs_as_srun_torchrun_in_its_job(tmp_path, real_slurm):
    recipe = _write(tmp_path, "executor: {kind: slurm, nodes: 1, gpus_per_node: 2}")
    proc = _run(recipe, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    facts = _check_distributed_trial(tmp_path / "out")
    assert f"[job {facts['job_id']} on {facts['node']}, GPU {facts['gpus']['SLURM_JOB_GPUS']}" in proc.stdout


def test_sweep_run_flags_give_nodes_and_gpus_per_node(tmp_path, real_slurm):
    recipe = _write(tmp_path, "executor: slurm")
    proc = _run(recipe, tmp_path / "out", "--nodes", "1", "--gpus-per-node", "2")
    assert proc.returncode == 0, proc.stderr
    _check_distributed_trial(tmp_path / "out")


@pytest.mark.parametrize(("executor", "flags", "code", "says"), [
    ("executor: {kind: slurm, nodes: 0}", (), 2, "r.yaml:7:32: executor.nodes: must be at least 1"),
    ("executor: {kind: slurm, gpus_per_node: -1}", (), 2, "executor.gpus_per_node: must be at least 1"),
    ("executor: slurm", ("--nodes", "0"), 2, "--nodes 0: a trial needs at least 1"),
    ("executor: {nodes: 1}", (), 2, "executor.nodes: nodes is a Slurm option, and kind is local"),
    ("", ("--nodes", "1"), 2, "--nodes and --gpus-per-node spread a trial over Slurm nodes"),
    ("executor: {kind: slurm, gres: 'gpu:1', gpus_per_node: 2}", (), 2, "gres and gpus_per_node"),
    ("executor: {kind: slurm, nodes: 1, extra_sbatch: [--nodes=2]}", (), 2,
     "executor.extra_sbatch[0]: --nodes is set by aorta-tui"),
    ("executor: {kind: slurm, nodes: 9}", (), 3, "has 1 node(s), and the trial asks for 9"),
    ("executor: slurm", ("--nodes", "2"), 3, "has 1 node(s), and the trial asks for 2"),
    ("executor: {kind: slurm, gpus_per_node: 64}", (), 3, "at most 4 GPU(s), and the trial asks for 64"),
    ("executor: {kind: slurm, nodes: 1, gpus_per_node: 2}\nworkload_config: {world_size: 4}", (), 2,
     "world_size 4, and executor nodes 1 x gpus_per_node 2 start 2 ranks"),
])
def test_bad_distributed_input_is_refused_before_any_job(tmp_path, real_slurm, executor, flags,
                                                         code, says):
    recipe = _write(tmp_path, executor)
    if "world_size: 4" in executor:  # a second workload_config key: the cell's own instead
        recipe.write_text(RECIPE.format(executor=executor.split("\n")[0]).replace(
            "mitigations: [none]", "mitigations: [none]\n    workload_config: {world_size: 4}"))
    proc = _run(recipe, tmp_path / "out", *flags)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert says in proc.stderr and "fix:" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()  # nothing written, nothing submitted


@pytest.mark.parametrize("recipe_text", [
    RECIPE.format(executor="executor: {kind: slurm, nodes: 2}").replace("workload: race", "workload: inference")
    .replace("workload_config: {alltoall_tensor_size: 64}\n", ""),
    "schema_version: 1\nmode: probe\nticket: p\ntrials: 1\nmitigation_axis: [none]\n"
    "diagnostic_axis: [none]\nexecutor: {kind: slurm, nodes: 2}\n",
])
def test_a_non_distributed_trial_over_several_nodes_is_exit_2(tmp_path, real_slurm, recipe_text):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(recipe_text)
    command = ["--", "true"] if "mode: probe" in recipe_text else []
    proc = aorta("--batch", str(recipe), "--output", str(tmp_path / "out"), "--no-snapshot",
                 *command, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "executor.nodes 2:" in proc.stderr and "only a torchrun workload spreads over nodes" in proc.stderr
    assert "r.yaml:" in proc.stderr and not (tmp_path / "out").exists()


def test_the_launcher_argv_and_its_options():
    argv = srun_argv(nodes=3, nproc_per_node=4, host="n1", port=29500, rdzv_id="aorta-7",
                     worker=["-m", "aorta_tui.trial.worker", "/r/spec.json"], python="/py")
    assert argv[:6] == ["srun", "--nodes=3", "--ntasks=3", "--ntasks-per-node=1",
                        "--kill-on-bad-exit=1", "--export=ALL"]
    assert "--nnodes=3" in argv and "--nproc-per-node=4" in argv and "--rdzv-backend=c10d" in argv
    assert "--rdzv-endpoint=n1:29500" in argv and argv[-3:] == ["-m", "aorta_tui.trial.worker",
                                                                "/r/spec.json"]
    assert parse_args(["--nodes=2", "--nproc-per-node=8", "--", "-m", "x"]) == (2, 8, ["-m", "x"])


_LINE = st.text(alphabet=st.sampled_from("abc*|:,()0123456789gpuS-\n "), max_size=60)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.tuples(st.sampled_from(["a", "b", "gpu"]), st.booleans(),
                                st.integers(0, 5000), st.integers(0, 64),
                                st.sampled_from(["gpu:{}", "gpu:a100:{}(S:0,1)", "(null)",
                                                 "gpu:{},mps:100"])), max_size=6),
       noise=st.lists(_LINE, max_size=4))
def test_sinfo_capacity_parser_sums_nodes_and_reads_gpus(parts, noise, attack_tally):
    text = "\n".join([f"{n}{'*' if d else ''}|{c}|{g.format(k)}" for n, d, c, k, g in parts] + noise)
    failures = 0
    try:
        for want in ("a", "b", "gpu", None):
            got = sc.parse_capacity(text, want)
            rows = [p for p in parts if (p[0] == want if want else p[1])]
            if want is None and rows:
                rows = [p for p in parts if p[0] == rows[0][0]]
            clean = all("|" not in n for n in noise)  # noise may add lines of its own
            if rows and clean:
                gpus = max(0 if g == "(null)" else k for _, _, _, k, g in rows)
                if got != (rows[0][0], sum(p[2] for p in rows), gpus):
                    failures += 1
    except Exception:
        failures += 1
    attack_tally.record("sinfo capacity parser", cases=1, failures=failures,
                        promise="partition nodes and GPUs read back, never raises")
    assert failures == 0
