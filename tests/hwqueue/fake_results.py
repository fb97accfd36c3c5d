"""A queue result document built by hand, for compare tests that need exact samples."""

from __future__ import annotations

from aorta_tui.hwqueue.result import SUMMARY_FIELDS


def fake_result(periods: list[float], latencies: list[float]) -> dict:
    wall = sum(periods) / 1e3
    lat = sorted(latencies)
    summary = {k: None for k in SUMMARY_FIELDS}
    summary.update(throughput=100.0 * len(periods) / wall, wall_s=wall,
                   latency_mean_ms=sum(lat) / len(lat), latency_p50_ms=lat[len(lat) // 2],
                   latency_p95_ms=lat[-1], latency_p99_ms=lat[-1], achieved_concurrency=2.0)
    return {
        "kind": "aorta-tui/queue-result", "run_id": "r", "emulated": False,
        "workload": {"name": "w"}, "config": {"streams": 2},
        "summary": summary,
        "summary_units": {k: (u or "X/s") for k, (u, _) in SUMMARY_FIELDS.items()},
        "summary_better": {k: b for k, (_, b) in SUMMARY_FIELDS.items()},
        "samples": {"iteration_period_ms": periods, "iteration_latency_ms": latencies,
                    "iteration_concurrency": [2.0] * len(periods)},
    }
