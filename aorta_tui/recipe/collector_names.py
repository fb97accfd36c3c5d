"""Upstream AORTA's ``collect:`` collectors: their names, and checking a request for them.

A recipe (or ``sweep run --collect``) naming collectors loads, validates (names and upstream's
option schemas, located) and plans like any other. Each trial then runs them where they can
run (collect/collectors.py: ``rocprof`` under ``rocprofv3``, ``proton`` under Triton's proton,
``layer_numerics`` as hooks in the trial worker) and its ``result.json`` says ``not available:
<reason>`` for each one that cannot: a missing tool never refuses the whole sweep.
"""

from __future__ import annotations

# Upstream 0.3.0's aorta.run.collectors.KNOWN_RECIPES, with what each runs here.
KNOWN_COLLECTORS: dict[str, str] = {
    "rocprof": "ROCm's rocprofv3 around the trial's command (or $ROCPROF_BIN)",
    "proton": "Triton's proton profiler around the trial's Python (pip install triton)",
    "numerics": "validated only, as upstream (a workload wrapper must implement it)",
    "layer_numerics": "per-layer activation/gradient statistics of the workload's torch model",
    "amd_log": "validated only, as upstream (the amd_log_level_4 mitigation sets AMD_LOG_LEVEL)",
    # aorta-tui's addition, not upstream's: the CUDA counterpart of rocprof's kernel trace
    "torch_profiler": "torch.profiler around the workload's steps (chrome trace + op/kernel summary)",
    "ncu": "NVIDIA Nsight Compute around the trial's command (or $NCU_BIN; first 50 launches)",
}


def collectors_runnable_problem(names: tuple[str, ...], *, where: str,
                                check_only: bool = False) -> None:
    """Raise a usage error for an unknown name (``--collect``'s names are not checked by the
    recipe loader). A known collector is never refused here: a trial that cannot run it
    records why (``check_only`` is kept for callers; a dry run and a run check the same)."""
    from aorta_tui.core.errors import UsageError

    del check_only
    unknown = [n for n in names if n not in KNOWN_COLLECTORS]
    if unknown:
        from aorta_tui.core.suggest import did_you_mean

        raise UsageError(f"{where}: unknown collector {unknown[0]!r}",
                         hint=did_you_mean(unknown[0], KNOWN_COLLECTORS) + "known: "
                         + ", ".join(sorted(KNOWN_COLLECTORS)))


__all__ = ["KNOWN_COLLECTORS", "collectors_runnable_problem"]
