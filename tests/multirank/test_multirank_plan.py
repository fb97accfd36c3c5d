"""The command lines scripts/multigpu_check.py starts for 0, 1, 2 and 8 GPUs (what the N-GPU run
will execute, checked here without GPUs), and the per-rank shim torchrun starts."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def plan(multigpu, gpus: int, tmp_path: Path) -> dict[str, list[list[str]]]:
    return multigpu.plan_commands(multigpu.layout(gpus), tmp_path, multigpu.parse_args([]))


def opt(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


@pytest.mark.parametrize("gpus", [2, 8])
def test_n_gpus_run_one_nccl_rank_per_gpu(multigpu, tmp_path: Path, gpus: int) -> None:
    p = plan(multigpu, gpus, tmp_path)
    timings = []
    for argv in p["overlap"]:
        assert f"--nproc_per_node={gpus}" in argv and opt(argv, "--device") == "cuda:{LOCAL_RANK}"
        assert "--size" not in argv and "collectives=real" in argv
        timings.append(opt(argv, "--timing"))
    assert timings == ["events", "events", "events", "cupti"]  # three modes + the profiler cross-check
    [hetero] = p["hetero"]
    assert opt(hetero, "--devices") == ",".join(f"cuda:{i}" for i in range(gpus)) and opt(hetero, "--streams") == "16"
    [hang] = p["hang"]
    assert f"--nproc_per_node={gpus}" in hang and "--backend" not in hang  # rank_hang.py picks NCCL itself
    assert opt(hang, "--timeout") == "20"  # NCCL's first all-reduce also builds the communicator
    [ebpf] = p["ebpf"]
    assert f"--nproc_per_node={gpus}" in ebpf and "collectives=real" in ebpf and "cuda:{LOCAL_RANK}" in ebpf


def test_one_gpu_is_nccl_world_one_and_the_two_process_items_fall_back(multigpu, tmp_path: Path) -> None:
    p = plan(multigpu, 1, tmp_path)
    assert all("--nproc_per_node=1" in argv for argv in p["overlap"])
    [hang] = p["hang"]
    assert "--nproc_per_node=2" in hang and opt(hang, "--backend") == "gloo"  # one GPU holds one NCCL rank
    [ebpf] = p["ebpf"]
    assert "--nproc_per_node=2" in ebpf and opt(ebpf, "--device") == "cuda:0" and "collectives=real" not in ebpf


def test_no_gpu_is_two_gloo_processes_on_emulated_streams(multigpu, tmp_path: Path) -> None:
    p = plan(multigpu, 0, tmp_path)
    assert [opt(a, "--timing") for a in p["overlap"]] == ["events"] * 3
    assert all("--nproc_per_node=2" in a and opt(a, "--device") == "cpu" and opt(a, "--size") == "tiny"
               for a in p["overlap"])
    assert opt(p["hetero"][0], "--device") == "cpu"
    assert opt(p["hang"][0], "--timeout") == "10"
    assert p["ebpf"] == []  # the CPU form drives the fake libcuda itself


def test_plan_option_prints_shell_lines(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "multigpu_check.py"), "--plan", "2", "--only",
                          "hang", "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[0] == "# hang" and len(lines) == 2
    argv = shlex.split(lines[1])
    assert argv[argv.index("--") + 1:][:5] == [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                                "--nproc_per_node=2"]


def test_rank_shim_records_its_pid_and_substitutes_the_local_rank(tmp_path: Path) -> None:
    env = dict(os.environ, RANK="3", LOCAL_RANK="1", PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, str(REPO / "scripts" / "multigpu_check.py"), "--rank-exec",
                             str(tmp_path), "queue", "run", "no_such_workload_{LOCAL_RANK}"],
                            env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "no_such_workload_1" in err  # exec'd aorta-tui saw the substituted name
    assert (tmp_path / "rank3.pid").read_text() == str(proc.pid)  # exec kept the pid
