"""`--stream-priority default|lc`: which streams each workload marks latency-critical, the CLI
contract, what a CPU (emulated) run records, and the GPU backend's stream creation.

The GPU backend is driven by a stand-in ``torch.cuda`` (the one thing this CPU box lacks); the
real CUDA/HIP path is run on a GPU machine, not here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.errors import UsageError
from aorta_tui.hwqueue.backends import TorchGpuBackend
from aorta_tui.hwqueue.compare import compare
from aorta_tui.hwqueue.harness import QueueRunConfig, _priority_info
from aorta_tui.hwqueue.run import run_queue
from aorta_tui.hwqueue.workloads import WORKLOADS, workload_class
from aorta_tui.hwqueue.workloads.base import QueueWorkloadContext

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}
MARKED = {"hetero_kernels", "continuous_batch", "speculative_decode"}


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aorta_tui", "queue", *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=120)


def _set_up(name: str, streams: int) -> Any:
    import torch

    wl = workload_class(name)({}, size="tiny")
    wl.setup(QueueWorkloadContext(torch=torch, dtype=torch.float32, stream_devices=["cpu"] * streams,
                             backend="cpu"))
    return wl


# --- which streams are latency-critical -------------------------------------------------------

def _role_streams(name: str, n: int) -> tuple[set[int], set[int]]:
    """(latency-critical, other) streams as ``setup`` assigns the roles."""
    wl = _set_up(name, n)
    if name == "hetero_kernels":
        return set(wl.small_streams), set(range(wl.n_large))
    if name == "continuous_batch":
        return set(wl.decode), set(wl.prefill) | set(wl.cache)
    if name == "speculative_decode":
        return set(wl.draft_streams), {0}
    raise AssertionError(name)


@pytest.mark.parametrize("name", sorted(MARKED))
def test_marked_streams_are_the_ones_setup_gives_the_latency_critical_role(name: str) -> None:
    info = workload_class(name).info()
    for n in range(info.min_streams, info.max_streams + 1):
        lc, other = _role_streams(name, n)
        declared = workload_class(name)({}, size="tiny").latency_critical_streams(n)
        assert set(declared) == lc, n
        assert len(declared) == len(set(declared)) and lc  # no duplicates, never empty
        assert not lc & other, n  # the GEMM / prefill / verify streams stay at default
        assert workload_class(name).latency_critical_role


def test_examples_of_the_selection() -> None:
    def lc(name: str, n: int) -> tuple[int, ...]:
        return workload_class(name)({}).latency_critical_streams(n)

    assert lc("hetero_kernels", 8) == (4, 5, 6, 7)  # tiny kernels on the upper half
    assert lc("continuous_batch", 8) == (3, 4, 5)  # prefill 0-2, decode 3-5, cache 6-7
    assert lc("speculative_decode", 4) == (1, 2, 3)  # stream 0 verifies


@pytest.mark.parametrize("name", sorted(set(WORKLOADS) - MARKED))
def test_other_workloads_declare_none(name: str) -> None:
    cls = workload_class(name)
    assert cls.latency_critical_role is None
    assert cls({}).latency_critical_streams(cls.recommended_streams) == ()


@given(name=st.sampled_from(sorted(WORKLOADS)), data=st.data())
def test_selection_stays_inside_the_stream_range(name: str, data: st.DataObject) -> None:
    info = workload_class(name).info()
    n = data.draw(st.integers(info.min_streams, info.max_streams))
    picked = workload_class(name)({}).latency_critical_streams(n)
    assert all(0 <= s < n for s in picked) and len(picked) < max(n, 2)


# --- configuration and CLI --------------------------------------------------------------------

@given(st.text(max_size=12).filter(lambda v: v not in ("default", "lc")))
def test_config_rejects_any_other_value(value: str) -> None:
    cfg = QueueRunConfig(workload="hetero_kernels", streams=2, device="cpu", size="tiny",
                         stream_priority=value)
    with pytest.raises(UsageError, match="stream priority"):
        cfg.validate()


def test_validation_does_not_import_torch() -> None:
    code = ("import sys\nfrom aorta_tui.hwqueue.harness import QueueRunConfig\n"
            "QueueRunConfig(workload='hetero_kernels', streams=2, device='cpu',"
            " stream_priority='lc').validate()\n"
            "try:\n    QueueRunConfig(workload='hetero_kernels', streams=2, device='cpu',"
            " stream_priority='hi').validate()\nexcept Exception as e:\n    print(type(e).__name__)\n"
            "print('torch' in sys.modules)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.split() == ["UsageError", "False"], p.stderr


@pytest.mark.parametrize("cmd", [["run"], ["sweep"]])
def test_cli_rejects_a_bad_value_with_exit_2_and_writes_nothing(tmp_path: Path,
                                                                cmd: list[str]) -> None:
    streams = "2" if cmd == ["run"] else "2,4"
    p = cli(*cmd, "hetero_kernels", "--streams", streams, "--device", "cpu", "--size", "tiny",
            "--stream-priority", "high", "-o", "out.json", cwd=tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "unknown stream priority 'high'" in p.stderr and "--stream-priority default or lc" in p.stderr
    assert "Traceback" not in p.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_cli_run_lc_on_cpu_records_that_it_was_not_applied(tmp_path: Path) -> None:
    p = cli("run", "hetero_kernels", "--streams", "4", "--device", "cpu", "--size", "tiny",
            "-i", "2", "-w", "0", "--stream-priority", "lc", "-o", "r.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["config"]["stream_priority"] == "lc"
    sp = data["stream_priority"]
    assert sp["requested"] == "lc" and sp["applied"] is False
    assert "emulated" in sp["reason"] and sp["highest_priority"] is None
    assert sp["latency_critical_streams"] == [2, 3]
    per = data["metrics"]["per_stream"]
    assert [ps["latency_critical"] for ps in per] == [False, False, True, True]
    assert [ps["priority"] for ps in per] == [None] * 4  # never a made-up 0
    assert "emulated" in data["unavailable"]["stream_priority"]
    assert "stream priority" in p.stdout and "not applied" in p.stdout


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_cli_sweep_accepts_lc_and_every_point_records_it(tmp_path: Path) -> None:
    p = cli("sweep", "speculative_decode", "--streams", "4,5", "--device", "cpu", "--size",
            "tiny", "-i", "2", "-w", "0", "--stream-priority", "lc", "-o", "s.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    for point in doc["points"]:
        n = point["config"]["streams"]
        assert point["config"]["stream_priority"] == "lc"
        assert point["stream_priority"]["latency_critical_streams"] == list(range(1, n))
        assert point["stream_priority"]["applied"] is False


def test_default_says_not_requested() -> None:
    result = run_queue(QueueRunConfig(workload="hetero_kernels", streams=2, device="cpu",
                                      size="tiny", iterations=1, warmup=0)).to_json()
    assert result["config"]["stream_priority"] == "default"
    assert result["stream_priority"]["applied"] is False
    assert result["stream_priority"]["reason"].startswith("not requested")


def test_compare_notes_different_stream_priorities() -> None:
    base = run_queue(QueueRunConfig(workload="hetero_kernels", streams=2, device="cpu",
                                    size="tiny", iterations=2, warmup=0)).to_json()
    test = run_queue(QueueRunConfig(workload="hetero_kernels", streams=2, device="cpu",
                                    size="tiny", iterations=2, warmup=0, stream_priority="lc")).to_json()
    assert "different stream priorities: default vs lc" in compare(base, test)["notes"]
    assert not any("priorit" in n for n in compare(base, base)["notes"])


# --- the GPU backend with a stand-in torch.cuda -----------------------------------------------

class _FakeStream:
    def __init__(self, device: str | None = None, priority: int = 0) -> None:
        self.device = device
        self.priority = max(-5, min(0, priority))  # clamped into the range, as CUDA does

    @staticmethod
    def priority_range() -> tuple[int, int]:
        return (0, -5)  # (least, greatest) as torch returns it on CUDA


class _FakeCuda:
    Stream = _FakeStream

    class device:  # noqa: N801 - mirrors torch.cuda.device
        def __init__(self, d: str) -> None:
            self.d = d

        def __enter__(self) -> None:
            return None

        def __exit__(self, *exc: object) -> None:
            return None


class _FakeTorch:
    cuda = _FakeCuda


def test_gpu_backend_gives_only_the_marked_streams_the_highest_priority() -> None:
    backend = TorchGpuBackend(_FakeTorch(), ["cuda:0"], "cuda")
    streams = backend.make_streams(["cuda:0"] * 4, high_priority={2, 3})
    assert [backend.read_priority(s) for s in streams] == [0, 0, -5, -5]
    assert backend.highest_priority("cuda:0") == -5
    assert [backend.read_priority(s) for s in backend.make_streams(["cuda:0"] * 2)] == [0, 0]


def test_gpu_run_of_a_workload_without_latency_critical_streams_says_lc_was_a_no_op() -> None:
    backend = TorchGpuBackend(_FakeTorch(), ["cuda:0"], "cuda")
    cfg = QueueRunConfig(workload="tiny_kernel_stress", streams=2, stream_priority="lc")
    wl = workload_class("tiny_kernel_stress")({})
    info = _priority_info(cfg, backend, wl, (), ["cuda:0", "cuda:0"])
    assert info["applied"] is False and "declares no latency-critical streams" in info["reason"]
    cfg.workload = "hetero_kernels"
    info = _priority_info(cfg, backend, workload_class("hetero_kernels")({}), (1,), ["cuda:0"] * 2)
    assert info["applied"] is True and info["reason"] is None and info["highest_priority"] == -5
