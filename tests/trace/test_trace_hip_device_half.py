"""The `hip` probe set has a device half (the rocprofiler-sdk collector): a HIP trace says why it
has launches only (auto never loads a collector that has never run on AMD hardware), and
`--device-timestamps on` without rocprofiler-sdk is exit 3 with the fix, on real uprobes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_trace_cli import cli

from aorta_tui.trace.probes.hip import HIP_DEVICE_METRICS, HipProbes


def _hip_trace(fakelibs, tmp_path: Path, *extra: str):
    out = tmp_path / "q.json"
    return out, cli("trace", "queue", "--probes", "hip", "--lib", f"hip={fakelibs.hip}", "-o", str(out),
                    "--no-calibrate", *extra, "--",
                    str(fakelibs.driver), "hip", str(fakelibs.hip), "8", "100", "0x10", "0x20",
                    env={"AORTA_ROCPROFILER_ROOT": str(tmp_path / "no-rocm"), "ROCM_PATH": str(tmp_path / "no-rocm")})


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_auto_traces_launches_and_says_why_there_are_no_gpu_start_times(bpftrace, fakelibs, tmp_path) -> None:
    out, r = _hip_trace(fakelibs, tmp_path)
    assert r.returncode == 0, r.stderr
    said = r.stdout + r.stderr
    assert "hip: launches only, no GPU start times" in said
    assert "never run on AMD hardware" in said and "--device-timestamps on" in said
    result = json.loads(out.read_text())
    assert any("hip: launches only" in w for w in result["warnings"]), result["warnings"]
    assert result["probe_sets"]["hip"]["metrics"]["launch"]["count"] == 8
    assert "launch_to_start" not in result["probe_sets"]["hip"]["metrics"]  # never 0.0 for "none"
    # issue 34: which parts of launch -> start ROCm cannot give, and why (none of them is made up)
    parts = result["probe_sets"]["hip"]["device_timestamps"]["launch_parts"]
    assert set(parts) == {"launch_host", "launch_push", "launch_gpu_queue"}
    assert all(v.startswith("unavailable: ") for v in parts.values()) and "doorbell" in parts["launch_push"]


def test_on_without_rocprofiler_sdk_is_exit_3_with_the_fix(bpftrace, fakelibs, tmp_path) -> None:
    out, r = _hip_trace(fakelibs, tmp_path, "--device-timestamps", "on")
    assert r.returncode == 3, r.stderr
    assert "GPU start times cannot be collected" in r.stderr and "fix:" in r.stderr
    assert "rocprofiler-sdk" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()


def test_the_hip_device_metrics_name_their_source() -> None:
    assert HipProbes.device_metrics == HIP_DEVICE_METRICS
    assert [m.name for m in HIP_DEVICE_METRICS] == ["launch_to_start", "kernel_duration", "queued", "gpu_idle"]
    assert all("rocprofiler-sdk" in m.measures and "CUPTI" not in m.measures for m in HIP_DEVICE_METRICS)
