"""A CUDA program that runs its own CUPTI profiler (torch.profiler with CUDA activities) between
two plain phases: the collector's subscriber-conflict check (scripts/dispatch_check.py).

    python3 own_profiler.py [--launches N] [--profile-first]

Phases: ``plain`` (N launches), ``profiled`` (N launches inside ``torch.profiler.profile``),
``after`` (N launches). ``--profile-first`` starts the profiler before the program's first CUDA
call (the profiler, not the injected collector, then meets CUDA's start-up first). Prints one
JSON line: CLOCK_MONOTONIC at each phase boundary, the CUDA kernels the profiler saw, and the
profiler's exception if it raised one (the program never dies of it: that is what is checked).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time

import torch
from torch.profiler import ProfilerActivity, profile


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--profile-first", action="store_true")
    a = ap.parse_args()
    marks: dict[str, int] = {}
    out: dict[str, object] = {"launches_per_phase": a.launches, "profile_first": a.profile_first}
    x: list[torch.Tensor] = []

    def phase(name: str) -> None:
        if not x:
            x.append(torch.zeros(256, device="cuda"))
            for _ in range(200):  # warm the kernel up before any measured phase
                x[0].add_(1)
            torch.cuda.synchronize()
        marks[name] = time.monotonic_ns()
        for _ in range(a.launches):
            x[0].add_(1)
        torch.cuda.synchronize()

    if not a.profile_first:
        phase("plain")
    prof = None
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            phase("profiled")
    except Exception as exc:  # reported, never fatal: the check is that the program survives
        out["profiler_error"] = f"{type(exc).__name__}: {exc}"[:500]
    if "profiled" not in marks:
        phase("profiled")
    if a.profile_first:
        phase("plain")
    phase("after")
    marks["end"] = time.monotonic_ns()
    kernels = None
    if prof is not None:
        with contextlib.suppress(Exception):
            kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    out.update(marks_ns=marks, profiler_cuda_events=kernels, value=float(x[0][0]))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
