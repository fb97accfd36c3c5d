"""Shared by the workload tests: run one workload in this process, as the trial worker would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aorta_tui.registry.workload import Workload, WorkloadContext, WorkloadResult, validate_config


def run_workload(cls: type[Workload], raw: dict[str, Any], steps: int, trial_dir: Path,
                 switches: tuple[str, ...] = ()) -> WorkloadResult:
    config = validate_config(cls.config_schema, raw)
    seen: list[tuple[int, float]] = []
    ctx = WorkloadContext(steps=steps, config=config, seed=0, trial_dir=trial_dir,
                          switches=switches, on_step=lambda s, t: seen.append((s, t)))
    w = cls()
    try:
        w.setup(ctx)
        result = w.run(ctx)
    finally:
        w.cleanup(ctx)
    # on_step reports exactly the measured steps, 1-based, with the recorded times
    assert [s for s, _ in seen] == list(range(1, len(result.step_times_s) + 1))
    assert [t for _, t in seen] == result.step_times_s
    return result
