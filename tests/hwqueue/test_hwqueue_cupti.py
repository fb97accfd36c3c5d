"""Attribution of profiler (CUPTI) activities to launches, on a constructed chrome trace."""

from __future__ import annotations

import pytest

from aorta_tui.hwqueue import metrics as M
from aorta_tui.hwqueue.cupti import MARKER, activity_records, estimate_offset


def ev(cat: str, name: str, ts_us: float, dur_us: float, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts_us, "dur": dur_us, "args": args}


def test_offset_comes_from_the_tightest_marker() -> None:
    # trace clock = perf clock + 1_000_000 ns; marker 1 has the narrowest bracket
    trace = {"traceEvents": [
        ev("user_annotation", f"{MARKER}0", 1000.0 + 0.05, 1),
        ev("user_annotation", f"{MARKER}1", 1000.0 + 2.0, 1),
        ev("gpu_user_annotation", f"{MARKER}1", 5.0, 1),  # the GPU copy must be ignored
    ]}
    markers = [(0.0, 1000.0, f"{MARKER}0"), (1900.0, 2100.0, f"{MARKER}1")]
    offset, unc = estimate_offset(trace, markers)
    assert offset == pytest.approx(1_000_000.0)
    assert unc == pytest.approx(100.0)


def test_missing_markers_are_an_error() -> None:
    with pytest.raises(RuntimeError, match="clock markers"):
        estimate_offset({"traceEvents": []}, [(0.0, 1.0, f"{MARKER}0")])


def test_kernels_are_attributed_to_the_launch_whose_call_issued_them() -> None:
    launches = [  # host intervals in perf ns
        M.LaunchRecord(0, 0, "gemm", 10_000, 20_000, 0, 0),
        M.LaunchRecord(0, 1, "tiny", 20_000, 30_000, 0, 0),
    ]
    offset = 1_000_000.0  # trace ns - perf ns
    trace = {"traceEvents": [
        ev("cuda_runtime", "cudaLaunchKernel", 1012.0, 3.0, correlation=1),
        ev("cuda_runtime", "cudaLaunchKernel", 1021.0, 2.0, correlation=2),
        ev("cuda_runtime", "cudaLaunchKernel", 1025.0, 2.0, correlation=3),
        ev("cuda_runtime", "cudaLaunchKernel", 900.0, 2.0, correlation=4),  # warm-up: dropped
        ev("kernel", "sgemm", 1018.0, 100.0, correlation=1, stream=7),
        ev("kernel", "mul", 1024.0, 1.5, correlation=2, stream=13),
        ev("kernel", "add", 1028.0, 1.0, correlation=3, stream=13),
        ev("kernel", "old", 903.0, 1.0, correlation=4, stream=7),
        ev("kernel", "orphan", 1030.0, 1.0, correlation=99, stream=7),
        # CUPTI's clock fell back for this record: it "starts" 1e8 us before its own call
        ev("cuda_runtime", "cudaLaunchKernel", 1026.0, 1.0, correlation=5),
        ev("kernel", "bogus", 1026.0 - 1e8, 1.0, correlation=5, stream=13),
    ]}
    recs, info = activity_records(trace, offset, launches)
    assert [(r.stream, r.label) for r in recs] == [(0, "sgemm"), (1, "mul"), (1, "add")]
    gemm = recs[0]
    assert gemm.host_start_ns == pytest.approx(12_000) and gemm.host_end_ns == pytest.approx(15_000)
    assert gemm.gpu_start_ns == pytest.approx(18_000) and gemm.gpu_end_ns == pytest.approx(118_000)
    assert info == {"activities": 3, "without_runtime_call": 1, "outside_measured_launches": 1,
                    "launches_with_activity": 2, "launches": 2, "implausible_timestamps_dropped": 1}
    delays, _ = M.launch_delays_ns(recs, keep_negative=True)
    assert delays == pytest.approx([3_000, 1_000, 1_000])  # HTA: kernel start - call end
    assert M.per_stream_busy_ns(recs) == pytest.approx({0: 100_000, 1: 2_500})
