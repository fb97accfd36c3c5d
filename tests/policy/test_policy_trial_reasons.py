"""A trial's missing figures carry the harness's own reason, whatever key the harness filed it under."""

from __future__ import annotations

import json
from pathlib import Path

from aorta_tui.hwqueue.harness import QueueRunConfig, RawRun
from aorta_tui.hwqueue.result import build_result
from aorta_tui.policy.evaluator import _read_result


def test_latency_delay_and_depth_reasons_reach_the_trial_record(tmp_path: Path) -> None:
    cfg = QueueRunConfig(workload="tiny_kernel_stress", streams=2, device="cpu", run_id="t")
    raw = RawRun(records=[], iteration_starts_ns=[0.0], end_ns=1e6, work_per_iteration=1.0,
                 clock_uncertainty_ns=None, memory=None, memory_reason="cpu run",
                 platform={"backend": "cpu"}, stream_devices=["cpu", "cpu"], emulated=True,
                 device_clock="host", params={})
    result = build_result(cfg, raw)
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result))
    got = _read_result(path).figures.unavailable
    for key in ("latency_mean_ms", "latency_p50_ms", "latency_p95_ms", "latency_p99_ms"):
        assert got[key] == result["unavailable"]["iteration_latency_ms"]
    for key in ("launch_delay_mean_us", "launch_delay_p50_us"):
        assert got[key] == result["unavailable"]["launch_delay_us"]
    assert got["queue_depth_max"] == result["unavailable"]["queue_depth"]
    assert got["achieved_concurrency"] == result["unavailable"]["achieved_concurrency"]
    assert not any("no reason" in why for why in got.values())
