"""What the traced program pays for being traced (issue 34), not what the probes cost a CPU.

The figure is the added time per launch (measured for each launch source in the C++ launch loop
on the H200, or calibrated on this machine for a bare uprobe) x the launches the trace saw, as a
share of the trace's wall time, with the measurement's 95% interval carried through. It is a
lower bound: on a real training loop the step-time slowdown measured in alternating rounds was
larger than the per-launch figure predicts (docs/tracing.md, benchmarks/trace_perturbation.py),
and that measured slowdown is given beside it. Where neither exists, the reason is said.
"""

from __future__ import annotations

from typing import Any

# re-measured after the default stopped asking CUPTI for memcpy/memset records (the deadlock in
# docs/tracing.md's Known limits): benchmarks/results/trace-perturbation-2026-12-04b-h200.md
MEASURED_ON = "NVIDIA H200, driver 580.159.04, CUPTI 13.0, 2026-12-04 (benchmarks/trace_perturbation.py)"
# launch source -> added host ns per launch in the C++ launch loop: (median, 95% low, 95% high)
ADDED_NS_PER_LAUNCH: dict[str, tuple[float, float, float]] = {
    "activity": (817.0, 564.0, 1050.0),  # `full`: trace queue's default since issue 34
    "ebpf": (4897.0, 3930.0, 5894.0),  # `full-ebpf`: launch uprobe + collector callbacks
}
# launch source -> the training loop's step-time ratio to bare: (median, 95% low, 95% high)
TRAIN_STEP_RATIO: dict[str, tuple[float, float, float]] = {
    "activity": (1.063, 0.856, 1.307),  # `default`
    "collector": (1.158, 1.027, 1.363),
    "ebpf": (1.295, 1.073, 1.382),  # `old-default`
}


def program_cost(launch_source: str | None, launches: int, wall_s: float,
                 calibrated_per_launch_ns: float | None = None) -> dict[str, Any]:
    """The share of the program's wall time the trace adds, with its interval, or why not."""
    out: dict[str, Any] = {"launches": launches, "wall_s": wall_s, "launch_source": launch_source}
    ratio = TRAIN_STEP_RATIO.get(launch_source or "")
    if ratio is not None:
        out["training_step_ratio"] = {"median": ratio[0], "ci95": [ratio[1], ratio[2]], "measured_on": MEASURED_ON,
                                      "what": "a 6-layer transformer encoder's training step, this mode vs bare"}
    if wall_s <= 0:
        return {**out, "share": None, "reason": "no wall time yet"}
    measured = ADDED_NS_PER_LAUNCH.get(launch_source or "")
    if measured is not None:
        med, lo, hi = measured
        return {**out, "share": launches * med / 1e9 / wall_s,
                "share_ci95": [launches * lo / 1e9 / wall_s, launches * hi / 1e9 / wall_s],
                "added_per_launch_us": med / 1000, "added_per_launch_ci95_us": [lo / 1000, hi / 1000],
                "source": f"measured in the C++ launch loop on {MEASURED_ON}; not calibrated on this machine",
                "lower_bound": True}
    if calibrated_per_launch_ns is not None:
        return {**out, "share": launches * calibrated_per_launch_ns / 1e9 / wall_s, "share_ci95": None,
                "added_per_launch_us": calibrated_per_launch_ns / 1000,
                "source": "the launch uprobe's cost calibrated on this machine (one figure: no interval); "
                          "its output path (one record per launch) is not included", "lower_bound": True}
    return {**out, "share": None,
            "reason": (f"the added time per launch of launch source {launch_source!r} was not measured "
                       "(benchmarks/trace_perturbation.py measures it) and no calibration applies")}


def share_text(cost: dict[str, Any]) -> str:
    """One line for the CLI and the TUI: the share with its interval, or why there is none."""
    if not cost:
        return "not estimated (the trace engine reported nothing)"
    share = cost.get("share")
    if share is None:
        return f"not estimated: {cost.get('reason', 'unknown')}"
    ci = cost.get("share_ci95")
    ci_text = f" [{ci[0]:.1%}, {ci[1]:.1%}]" if ci else ""
    text = (f"≥{share:.1%}{ci_text} of the program's time ({cost['added_per_launch_us']:.2f}µs × "
            f"{cost['launches']:,} launches)")
    ratio = cost.get("training_step_ratio")
    if ratio:
        text += f"; a training step ran {ratio['median']:.2f}× bare on the H200"
    return text
