"""The `queue run` table: a missing figure shows "not available (reason)", never a bare blank."""

from __future__ import annotations

import pytest

from aorta_tui.cli.queue_cmd import print_result
from aorta_tui.hwqueue.harness import QueueRunConfig, RawRun
from aorta_tui.hwqueue.result import build_result


def _result_without_launches() -> dict:
    cfg = QueueRunConfig(workload="tiny_kernel_stress", streams=2, device="cpu", run_id="t")
    raw = RawRun(records=[], iteration_starts_ns=[0.0], end_ns=1e6, work_per_iteration=1.0,
                 clock_uncertainty_ns=None, memory=None, memory_reason="cpu run",
                 platform={"backend": "cpu", "device_name": "cpu"},
                 stream_devices=["cpu", "cpu"], emulated=True, device_clock="host",
                 params={})
    return build_result(cfg, raw)


def test_every_missing_figure_is_shown_with_its_reason(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # rows unwrapped: the width at 80 is test_hwqueue_table_width's
    result = _result_without_launches()
    assert result["summary"]["latency_p50_ms"] is None
    assert result["metrics"]["per_stream"][0]["busy_ms"] is None
    print_result(result)
    lines = capsys.readouterr().out.splitlines()
    for key in ("latency_mean_ms", "latency_p50_ms", "latency_p95_ms", "latency_p99_ms"):
        row = next(ln for ln in lines if ln.startswith(key))
        assert "not available (no device activity was recorded)" in row, row
    for s in (0, 1):
        row = next(ln for ln in lines if ln.startswith(f"stream {s} busy"))
        assert "not available (the workload issued no launch on this stream)" in row, row
    # nothing that was not measured reads as a number
    for ln in lines:
        if "not available" in ln:
            assert "0.0" not in ln
