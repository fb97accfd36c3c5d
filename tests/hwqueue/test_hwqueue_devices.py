"""Device selection (`--device cuda` follows LOCAL_RANK, `--devices all`) and a throughput that
does not exist (comms_compute_overlap without GEMMs): null with a reason, never 0.0.

The GPU paths cannot run on this CPU box: the selection logic is checked with LOCAL_RANK set
by a real torchrun, and `--devices all` with the GPU count passed in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.errors import EnvironmentProblem, UsageError
from aorta_tui.hwqueue.backends import resolve_devices

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

ENV = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
ENV["PYTHONUNBUFFERED"] = "1"
ENV["COLUMNS"] = "200"  # the table's rows unwrapped: its width at 80 columns is test_hwqueue_table_width's
TORCHRUN = Path(sys.executable).with_name("torchrun")


@given(st.integers(min_value=0, max_value=255))
def test_plain_cuda_follows_local_rank_and_an_explicit_index_does_not(rank: int) -> None:
    env = {"LOCAL_RANK": str(rank)}
    assert resolve_devices("cuda", None, env=env) == ("cuda", [f"cuda:{rank}"])
    assert resolve_devices("rocm", None, env=env) == ("cuda", [f"cuda:{rank}"])
    assert resolve_devices("cuda:0", None, env=env) == ("cuda", ["cuda:0"])
    assert resolve_devices("cuda", ["cuda:1", "cuda:0"], env=env) == ("cuda", ["cuda:1", "cuda:0"])
    assert resolve_devices("cpu", None, env=env) == ("cpu", ["cpu"])


def test_without_a_launcher_plain_cuda_is_device_zero() -> None:
    assert resolve_devices("cuda", None, env={}) == ("cuda", ["cuda:0"])
    assert resolve_devices("cuda", None, env={"LOCAL_RANK": ""}) == ("cuda", ["cuda:0"])


def test_a_local_rank_that_is_not_a_number_is_refused_with_the_fix() -> None:
    with pytest.raises(UsageError, match="LOCAL_RANK='x'") as exc:
        resolve_devices("cuda", None, env={"LOCAL_RANK": "x"})
    assert "--device cuda:N" in (exc.value.hint or "")


@given(st.integers(min_value=1, max_value=16), st.sampled_from(["all", "ALL", " all "]))
def test_devices_all_is_every_visible_gpu(count: int, spelling: str) -> None:
    kind, devs = resolve_devices("cuda", [spelling], env={"LOCAL_RANK": "1"}, gpu_count=lambda: count)
    assert kind == "cuda" and devs == [f"cuda:{i}" for i in range(count)]


def test_devices_all_on_cpu_and_its_errors() -> None:
    assert resolve_devices("cpu", ["all"], gpu_count=lambda: 8) == ("cpu", ["cpu"])
    with pytest.raises(EnvironmentProblem, match="found no GPU"):
        resolve_devices("cuda", ["all"], gpu_count=lambda: 0)
    with pytest.raises(UsageError, match="cannot be combined"):
        resolve_devices("cuda", ["all", "cuda:0"], gpu_count=lambda: 2)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aorta_tui", "queue", *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("args", "code", "needle"), [
    (["--device", "cuda", "--devices", "all"], 3, "--devices all found no GPU"),
    (["--devices", "all,cuda:1"], 2, "'all' cannot be combined"),
])
def test_devices_all_errors_through_the_cli(tmp_path: Path, args: list[str], code: int, needle: str) -> None:
    p = _cli("run", "hetero_kernels", "--streams", "2", *args, "-o", "x.json", cwd=tmp_path)
    assert p.returncode == code and needle in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and list(tmp_path.iterdir()) == []


# -- under a real torchrun (2 ranks, gloo) -----------------------------------------------------

PROBE = """
import json, os, pathlib
from aorta_tui.hwqueue.backends import resolve_devices
# One file per rank: two ranks printing to one pipe can interleave their lines.
rank = int(os.environ["RANK"])
pathlib.Path(f"rank{rank}.json").write_text(json.dumps({"rank": rank, "cuda": resolve_devices("cuda", None)[1],
                  "cuda:0": resolve_devices("cuda:0", None)[1]}))
"""


@pytest.fixture(scope="module")
def under_torchrun(tmp_path_factory: pytest.TempPathFactory) -> dict:
    if not TORCHRUN.exists():
        pytest.skip("torchrun not installed next to this python")
    tmp = tmp_path_factory.mktemp("devices")
    (tmp / "probe.py").write_text(PROBE)
    jobs = {
        "probe": [str(TORCHRUN), "--nproc_per_node=2", str(tmp / "probe.py")],
        # comms only (no GEMMs), real gloo all-reduces, --devices all: every rank writes a result
        "comms_only": [str(TORCHRUN), "--nproc_per_node=2", "-m", "aorta_tui", "queue", "run",
                       "comms_compute_overlap", "--device", "cpu", "--devices", "all", "--size", "tiny",
                       "--param", "collectives=real", "--param", "gemms_per_stream=0", "--streams", "2",
                       "-i", "3", "-w", "1", "-q", "--timeline", "-o", "co.json"],
    }

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, cwd=tmp, env=ENV, capture_output=True, text=True, timeout=120)

    with ThreadPoolExecutor(2) as pool:
        done = {name: pool.submit(run, argv) for name, argv in jobs.items()}
        procs = {name: f.result() for name, f in done.items()}
    return {"tmp": tmp, **procs}


def test_each_torchrun_rank_picks_its_local_rank_gpu(under_torchrun: dict) -> None:
    p = under_torchrun["probe"]
    assert p.returncode == 0, p.stderr[-2000:]
    rows = [json.loads((under_torchrun["tmp"] / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert rows == [{"rank": 0, "cuda": ["cuda:0"], "cuda:0": ["cuda:0"]},
                    {"rank": 1, "cuda": ["cuda:1"], "cuda:0": ["cuda:0"]}]


def test_devices_all_and_a_comms_only_run_under_torchrun(under_torchrun: dict) -> None:
    p = under_torchrun["comms_only"]
    assert p.returncode == 0, p.stderr[-2000:]
    for rank in (0, 1):
        data = json.loads((under_torchrun["tmp"] / f"co.rank{rank}.json").read_text())
        assert data["platform"]["distributed"] == {"rank": rank, "world_size": 2, "backend": "gloo"}
        assert data["config"]["devices"] == ["cpu"]
        # no GEMM ran: no TFLOP/s to report, and the result says why instead of 0.0
        assert data["workload"]["work_per_iteration"] == 0
        assert data["summary"]["throughput"] is None and data["metrics"]["throughput"]["value"] is None
        assert "gemms_per_stream=0" in data["unavailable"]["throughput"]
        labels = [row[data["timeline_fields"].index("label")] for row in data["timeline"]]
        assert labels == ["all_reduce"] * 3  # one comm stream, one all-reduce per iteration
        assert data["summary"]["latency_p50_ms"] > 0  # the all-reduces were measured


# -- the throughput of a run without the counted work ------------------------------------------

def test_comms_only_throughput_is_null_with_a_reason_and_the_table_says_so(tmp_path: Path) -> None:
    p = _cli("run", "comms_compute_overlap", "--device", "cpu", "--size", "tiny", "--streams", "2",
             "--param", "gemms_per_stream=0", "-i", "3", "-w", "1", "-o", "co.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    data = json.loads((tmp_path / "co.json").read_text())
    assert data["summary"]["throughput"] is None
    row = next(ln for ln in p.stdout.splitlines() if ln.startswith("throughput"))
    assert "not available (no GEMMs (gemms_per_stream=0)" in row and "0.0" not in row
    # with GEMMs the same workload has a throughput, equal to its work over the wall time
    p = _cli("run", "comms_compute_overlap", "--device", "cpu", "--size", "tiny", "--streams", "2",
             "-i", "3", "-w", "1", "-o", "cc.json", cwd=tmp_path)
    data = json.loads((tmp_path / "cc.json").read_text())
    s = data["summary"]
    assert "throughput" not in data["unavailable"]
    assert s["throughput"] == pytest.approx(data["workload"]["work_per_iteration"] * 3 / s["wall_s"] / 1e12)
