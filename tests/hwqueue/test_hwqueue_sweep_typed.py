"""`queue sweep` hands its document on typed (hwqueue/sweep.py returns the QueueSweepDoc, the
CLI prints its attributes): a plan the run loop ended without an exception is the Ctrl-C it
stands for, not an empty document the table's reader then refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from aorta_tui.hwqueue import sweep
from aorta_tui.hwqueue.harness import QueueRunConfig


def test_a_plan_stopped_without_an_exception_is_an_interruption(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def stopped(store: object, bus: object, plan: object, engine: object
                ) -> sweep.QueueSweepOutcome:
        return sweep.QueueSweepOutcome(tmp_path / "run", "interrupted", 130, None)

    monkeypatch.setattr(sweep, "run_planned", stopped)
    cfg = QueueRunConfig(workload="tiny_kernel_stress", streams=1, iterations=2, warmup=0,
                         device="cpu", size="tiny", run_id="q-stop")
    with pytest.raises(KeyboardInterrupt):  # the untyped code returned {}
        sweep.run_sweep(cfg, [1], runner=lambda *_a: {}, run_dir=tmp_path / "run")
    assert (tmp_path / "run" / "request.json").is_file()  # the run directory stays for resume
