from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from aorta_tui.core.errors import UsageError
from aorta_tui.trace import cupti_join


def profiler_trace(path: Path, launches_us: list[float], starts_us: list[float], streams: list[int]) -> None:
    ev = []
    for i, (t, g, s) in enumerate(zip(launches_us, starts_us, streams, strict=True)):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t, "dur": 4.0,
                   "args": {"correlation": 100 + i}})
        ev.append({"ph": "X", "cat": "kernel", "name": "add_kernel", "ts": g, "dur": 2.0,
                   "args": {"correlation": 100 + i, "stream": s}})
    path.write_text(json.dumps({"traceEvents": ev}))


def test_join_recovers_known_delays_per_stream_whatever_the_clock_offset(tmp_path: Path) -> None:
    n = 40
    launch_us = [1000.0 + 25.0 * i for i in range(n)]
    delay = [10.0 if i % 2 else 30.0 for i in range(n)]  # from driver entry: stream 7 30 us, 9 10 us
    cupti_streams = [9 if i % 2 else 7 for i in range(n)]
    profiler_trace(tmp_path / "t.json", launch_us, [t + 1.0 + d for t, d in zip(launch_us, delay, strict=True)],
                   cupti_streams)
    # eBPF sees the driver entry 1 us after the runtime call starts, on another clock; with no
    # common clock the constant lag is absorbed: delays count from the runtime call's start
    offset_ns = 5_000_000_000_000
    ebpf_ts = np.array([int((t + 1.0) * 1000) + offset_ns for t in launch_us], dtype=np.int64)
    ebpf_stream = np.array([0x2000 if i % 2 else 0x1000 for i in range(n)], dtype=np.int64)
    launches, kernels = cupti_join.load_profiler_trace(tmp_path / "t.json")
    out = cupti_join.join(ebpf_ts, ebpf_stream, launches, kernels)
    assert out["ebpf_launches"] == out["profiler_launch_calls"] == out["profiler_kernels"] == n
    assert out["negative_delays"] == 0 and out["launches_without_kernel"] == 0
    ps = out["per_stream"]
    assert ps["0x1000"]["cupti_stream"] == 7 and abs(ps["0x1000"]["p50_us"] - 31.0) < 1e-6
    assert ps["0x2000"]["cupti_stream"] == 9 and abs(ps["0x2000"]["p50_us"] - 11.0) < 1e-6
    assert out["delay_us"]["count"] == n and out["delay_us"]["max"] == 31.0


def test_join_refuses_to_pair_different_launch_counts(tmp_path: Path) -> None:
    profiler_trace(tmp_path / "t.json", [1.0, 2.0, 3.0], [5.0, 6.0, 7.0], [7, 7, 7])
    launches, kernels = cupti_join.load_profiler_trace(tmp_path / "t.json")
    out = cupti_join.join(np.array([1, 2], dtype=np.int64), np.array([0, 0], dtype=np.int64), launches, kernels)
    assert out["delay_us"] is None and "cannot pair: 2 eBPF launches vs 3" in out["reason"]


def test_a_launch_without_correlation_pairs_with_no_kernel_without_one(tmp_path: Path) -> None:
    """A missing correlation id is no id: the uncorrelated launch counts as without a kernel,
    never paired with an uncorrelated kernel (both once keyed the join by None)."""
    ev = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1000.0, "dur": 4.0,
           "args": {}},
          {"ph": "X", "cat": "kernel", "name": "add_kernel", "ts": 1500.0, "dur": 2.0,
           "args": {"stream": 7}},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 2000.0, "dur": 4.0,
           "args": {"correlation": 5}},
          {"ph": "X", "cat": "kernel", "name": "add_kernel", "ts": 2010.0, "dur": 2.0,
           "args": {"correlation": 5, "stream": 7}}]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": ev}))
    launches, kernels = cupti_join.load_profiler_trace(tmp_path / "t.json")
    ebpf_ts = np.array([1_000_000, 2_000_000], dtype=np.int64)
    out = cupti_join.join(ebpf_ts, np.array([0x1000, 0x1000], dtype=np.int64), launches, kernels)
    assert out["launches_without_kernel"] == 1
    assert out["delay_us"]["count"] == 1 and out["delay_us"]["max"] == 10.0


@pytest.mark.parametrize(("event", "field", "expected"), [
    ({"cat": "kernel", "name": "k", "ts": 1.0, "args": {"correlation": 1.5}}, "args.correlation", "an integer"),
    ({"cat": "kernel", "name": "k", "ts": 1.0, "args": [1]}, "args", "an object"),
    ({"cat": "kernel", "name": "k", "ts": 1.0, "dur": "long", "args": {"correlation": 1}}, "dur",
     "a finite number"),
])
def test_a_field_of_the_wrong_type_is_named_with_its_event(tmp_path: Path, event: dict, field: str,
                                                           expected: str) -> None:
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": [{"cat": "x"}, event]}))
    with pytest.raises(UsageError, match=rf"traceEvents\[1\]\.{re.escape(field)}: expected {expected}"):
        cupti_join.load_profiler_trace(tmp_path / "t.json")


def test_a_profiler_trace_that_is_not_an_array_of_events_is_refused(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": {"not": "a list"}}))
    with pytest.raises(UsageError, match=r"traceEvents: expected an array"):
        cupti_join.load_profiler_trace(tmp_path / "t.json")
