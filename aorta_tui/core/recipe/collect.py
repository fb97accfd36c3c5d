"""Upstream AORTA's ``collect:`` collectors: their names, and why they cannot run here.

A recipe (or ``sweep run --collect``) naming collectors loads, validates and plans like any
other (``recipe validate`` and ``--dry-run`` show them). Running one is refused before the
first trial with an environment error (exit 3) naming what it needs: aorta-tui does not run
upstream's in-process collectors yet, and a run whose measurements silently do not exist would
be worse than no run (docs/compat.md).
"""

from __future__ import annotations

import shutil

from aorta_tui.core.errors import EnvironmentProblem

# Upstream 0.3.0's aorta.run.collectors.KNOWN_RECIPES, with what each would need here.
KNOWN_COLLECTORS: dict[str, str] = {
    "rocprof": "ROCm's rocprofv3 (apt install rocprofiler-sdk) on PATH",
    "proton": "Triton's proton profiler (pip install triton) in the workload's Python",
    "numerics": "upstream AORTA's numerics collector (not implemented in aorta-tui)",
    "layer_numerics": "upstream AORTA's per-layer activation/gradient logger (not implemented "
                      "in aorta-tui)",
    "amd_log": "upstream AORTA's AMD_LOG_LEVEL log collector (not implemented in aorta-tui; "
               "the amd_log_level_4 mitigation sets the variable)",
}


def collectors_runnable_problem(names: tuple[str, ...], *, where: str,
                                check_only: bool = False) -> None:
    """Raise a usage error for an unknown name, an environment error for a known one
    (``check_only``, a dry run: names only; the plan is shown)."""
    from aorta_tui.core.errors import UsageError

    unknown = [n for n in names if n not in KNOWN_COLLECTORS]
    if unknown:
        from aorta_tui.core.suggest import did_you_mean

        raise UsageError(f"{where}: unknown collector {unknown[0]!r}",
                         hint=did_you_mean(unknown[0], KNOWN_COLLECTORS) + "known: " + ", ".join(sorted(KNOWN_COLLECTORS)))
    if not names or check_only:
        return
    needs = "; ".join(f"{n} needs {KNOWN_COLLECTORS[n]}" for n in names)
    tool = shutil.which("rocprofv3") if "rocprof" in names else None
    have = f" (rocprofv3 is at {tool}, but aorta-tui does not drive it yet)" if tool else ""
    raise EnvironmentProblem(
        f"{where}: collector{'s' if len(names) > 1 else ''} {', '.join(names)} cannot run "
        f"here: {needs}{have}",
        hint="remove the collectors to run the sweep without them (`--dry-run` still shows "
             "the plan); `trace:` records eBPF traces and `env snapshot` the environment")


__all__ = ["KNOWN_COLLECTORS", "collectors_runnable_problem"]
