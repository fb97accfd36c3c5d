"""The profiler cross-check's own figures, computed from a hand-made chrome trace with known answers.

The script runs on the GPU machine; here its trace arithmetic and verdicts are checked.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from aorta_tui.hwqueue.cupti import MARKER

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "hwqueue_crosscheck.py"


@pytest.fixture(scope="module")
def xc() -> Any:
    spec = importlib.util.spec_from_file_location("hwqueue_crosscheck", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["hwqueue_crosscheck"] = mod
    spec.loader.exec_module(mod)
    return mod


# (correlation, runtime call ts, profiler stream, kernel start, kernel end); runtime calls last 5 us
KERNELS = [(1, 100, 7, 106, 126), (2, 110, 9, 116, 130), (3, 120, 7, 140, 150),
           (4, 300, 9, 310, 320), (5, 400, 9, 420, 425),
           (6, 2000, 7, 2010, 2020)]  # launched after the end markers: not the measured pass


def _trace() -> dict[str, Any]:
    ev: list[dict[str, Any]] = []
    for i in range(50):
        ts = i if i < 25 else 1000 + i
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"{MARKER}{i}", "ts": ts, "dur": 0.5})
    for corr, rt, stream, k0, k1 in KERNELS:
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": rt, "dur": 5,
                   "args": {"correlation": corr}})
        ev.append({"ph": "X", "cat": "kernel", "name": f"k{corr}", "ts": k0, "dur": k1 - k0,
                   "args": {"correlation": corr, "stream": stream}})
    return {"traceEvents": ev}


def test_reference_figures_from_the_trace(xc: Any) -> None:
    acts = xc.window_activities(_trace())
    assert len(acts) == 5  # the kernel launched after the end markers is left out
    ref = xc.reference_figures(acts)
    assert ref["busy_us"] == {7: 30.0, 9: 29.0}
    assert ref["busy_total_us"] == 59.0
    assert ref["concurrency"] == pytest.approx(59.0 / (425 - 106))
    assert ref["delay_mean_us"] == pytest.approx((1 + 1 + 15 + 5 + 15) / 5)
    assert ref["delay_p50_us"] == 5
    assert ref["inter_mean_us"] == pytest.approx((10 + 160) / 2) and ref["intra_mean_us"] == 100
    assert ref["switch_us"] == pytest.approx(85 - 100)


def _result(busy7: float, busy9: float, streams_of: dict[int, int]) -> dict[str, Any]:
    """A queue result as the harness reports it, with kernel rows on the profiler clock."""
    rows = [[0, streams_of[s], f"k{c}", 0.0, 0.0, k0 * 1e3, k1 * 1e3]
            for c, _rt, s, k0, k1 in KERNELS[:5]]
    return {
        "timing": {"profiler": {"clock_offset_ns": 0.0}, "kernels_recorded": 5},
        "timeline_origin_ns": 0.0, "timeline": rows,
        "summary": {"achieved_concurrency": 59.0 / 319, "launch_delay_mean_us": 7.4,
                    "launch_delay_p50_us": 5.0, "switch_overhead_us": -15.0},
        "metrics": {"per_stream": [{"stream": 0, "busy_ms": busy7 / 1e3}, {"stream": 1, "busy_ms": busy9 / 1e3}],
                    "intra_stream_gap_us": {"mean": 100.0}, "inter_stream_gap_us": {"mean": 85.0}},
    }


def test_reported_figures_that_match_the_trace_pass(xc: Any) -> None:
    acts = xc.window_activities(_trace())
    result = _result(30.0, 29.0, {7: 0, 9: 1})
    mapping, agreement = xc.stream_mapping(result, acts)
    assert mapping == {7: 0, 9: 1} and agreement == 1.0
    rows = xc.check_reported(result, xc.reference_figures(acts), mapping, agreement, 0.10)
    assert [r["verdict"] for r in rows] == ["PASS"] * len(rows)


def test_a_busy_time_off_by_20_percent_fails(xc: Any) -> None:
    acts = xc.window_activities(_trace())
    result = _result(36.0, 29.0, {7: 0, 9: 1})
    mapping, agreement = xc.stream_mapping(result, acts)
    rows = {r["metric"]: r for r in xc.check_reported(result, xc.reference_figures(acts), mapping,
                                                       agreement, 0.10)}
    assert rows["busy stream 0"]["verdict"] == "FAIL" and rows["busy stream 0"]["diff"] == pytest.approx(0.2)
    assert rows["busy stream 1"]["verdict"] == "PASS"


def test_kernels_attributed_to_the_wrong_stream_fail_the_mapping(xc: Any) -> None:
    acts = xc.window_activities(_trace())
    result = _result(30.0, 29.0, {7: 0, 9: 0})  # every kernel reported on stream 0
    mapping, agreement = xc.stream_mapping(result, acts)
    rows = {r["metric"]: r for r in xc.check_reported(result, xc.reference_figures(acts), mapping,
                                                       agreement, 0.10)}
    assert rows["profiler streams -> harness streams"]["verdict"] == "FAIL"


def test_a_figure_undefined_on_one_side_only_fails(xc: Any) -> None:
    acts = xc.window_activities(_trace())
    result = _result(30.0, 29.0, {7: 0, 9: 1})
    result["summary"]["switch_overhead_us"] = None
    mapping, agreement = xc.stream_mapping(result, acts)
    rows = {r["metric"]: r for r in xc.check_reported(result, xc.reference_figures(acts), mapping,
                                                       agreement, 0.10)}
    assert rows["switch overhead"]["verdict"] == "FAIL"
