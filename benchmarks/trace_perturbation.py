#!/usr/bin/env python3
"""What tracing costs the program it watches, as that program sees it (issue 34).

Three programs, bare and under each trace mode, in fresh processes, alternated over ``--rounds``
rounds (the order rotates every round, so drift and order effects fall on every mode alike):

- ``train``: a real training loop (scripts/dispatch/train_loop.py: 6-layer transformer encoder,
  AdamW, bf16 autocast, ~450 launches per step); its sample is the process's median step time;
- ``decode``: an inference decode loop in the same process (token by token, a sync per token);
- ``cpp``: the plain CUDA C++ launch loop (scripts/dispatch/launch_loop.cu through
  benchmarks/dispatch_overhead.py's helpers): host ns per launch, no interpreter noise.

Modes of the torch programs (``--modes``):

- ``bare``: untraced, the reference of its round;
- ``activity-alone``: only the collector injected (CUDA_INJECTION64_PATH) with no launch
  callback, its records drained by a reader here, no bpftrace: CUPTI's activity records with
  latency timestamps, and nothing else;
- ``default``: ``trace queue --probes cuda`` (since issue 34: the activity records alone, no
  per-launch callback or uprobe; the copy/memset/sync uprobes stay);
- ``collector``: ``--launch-source collector`` (adds CUPTI's launch callback on every launch);
- ``old-default``: ``--launch-source ebpf`` (the launch uprobe printing one record per launch,
  joined with the collector's callbacks: the default before issue 34);
- ``ebpf-only``: ``--device-timestamps off`` (the 22 uprobes, no collector).

The differences between modes give where the old default's time went (docs/tracing.md). Per
mode: the ratio of its sample to the same round's bare sample; printed, the median ratio over
rounds with its 95% percentile-bootstrap interval (5000 resamples). Targets (issue 34): the
default's training-step ratio median <= 1.03 with 95% upper bound <= 1.06; the C++ loop's added
cost per launch (``full`` = the default) upper bound <= 1.0 us.

    sudo python3 benchmarks/trace_perturbation.py --rounds 6 --out DIR [--budget-s 420]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
TRAIN = REPO / "scripts" / "dispatch" / "train_loop.py"
AT = [sys.executable, "-m", "aorta_tui"]
TRACE = [*AT, "trace", "queue", "--probes", "cuda", "--no-calibrate"]
TORCH_MODES: dict[str, list[str] | None] = {
    "bare": None, "activity-alone": None, "default": [],
    "collector": ["--launch-source", "collector"], "old-default": ["--launch-source", "ebpf"],
    "ebpf-only": ["--device-timestamps", "off"],
}
# the collector alone (no session), one knob changed each: where CUPTI's own cost comes from
ACTIVITY_VARIANTS = {"activity-alone": {}, "activity-nolatency": {"AORTA_CUPTI_LATENCY": "0"},
                     "activity-kernels": {"AORTA_CUPTI_KINDS": "kernel"},
                     "activity-flush1s": {"AORTA_CUPTI_FLUSH_MS": "1000"}}
for _v in ACTIVITY_VARIANTS:
    TORCH_MODES.setdefault(_v, None)
CPP_MODES = ("bare", "collector-activity", "full", "full-ebpf")
TARGETS = {"train_ratio_median": 1.03, "train_ratio_upper": 1.06, "cpp_added_upper_ns": 1000.0}


def _last_json(stdout: str) -> dict[str, Any]:
    return json.loads([ln for ln in stdout.splitlines() if ln.startswith("{")][-1])


def torch_sample(mode: str, args: list[str], out: Path, tag: str, library: Path | None) -> dict[str, Any]:
    """One fresh process of the torch programs in ``mode``: median step times, and for a traced
    mode what the trace said (launches, its cost figure)."""
    prog = [sys.executable, str(TRAIN), *args]
    result_path = out / f"{tag}.json"
    t0 = time.monotonic()
    if mode == "bare":
        proc = subprocess.run(prog, capture_output=True, text=True, timeout=180)
    elif mode in ACTIVITY_VARIANTS:
        from dispatch_overhead import _with_collector

        assert library is not None
        prog_json, kernels = _with_collector(prog, library, {"AORTA_CUPTI_DOMAINS": "0", **ACTIVITY_VARIANTS[mode]},
                                             "kernel")
        return {**_medians(prog_json), "mode": mode, "kernel_records": kernels, "wall_s": time.monotonic() - t0}
    else:
        proc = subprocess.run([*TRACE, *(TORCH_MODES[mode] or []), "-o", str(result_path), "--", *prog],
                              capture_output=True, text=True, timeout=240)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode}: exit {proc.returncode}: {proc.stderr[-1500:]}")
    sample = {**_medians(_last_json(proc.stdout)), "mode": mode, "wall_s": time.monotonic() - t0}
    if result_path.is_file():
        sample["trace"] = _trace_facts(json.loads(result_path.read_text()))
    return sample


def _medians(prog: dict[str, Any]) -> dict[str, Any]:
    return {"train_ms": statistics.median(prog["train_step_ms"]) if prog["train_step_ms"] else None,
            "decode_ms": statistics.median(prog["decode_step_ms"]) if prog["decode_step_ms"] else None,
            "train_steps": prog["train_steps"], "decode_steps": prog["decode_steps"],
            "warmup": prog["warmup"]}


def _trace_facts(res: dict[str, Any]) -> dict[str, Any]:
    cuda = res.get("probe_sets", {}).get("cuda", {})
    launch = cuda.get("metrics", {}).get("launch", {})
    return {"launch_source": (res.get("launch_source") or {}).get("mode"), "launches": launch.get("count"),
            "launches_lost": launch.get("lost_events"), "wall_s": res.get("wall_s"),
            "observer_cost": cuda.get("observer_cost"),
            "program_cost": (cuda.get("observer_cost") or {}).get("program_cost")}


def _rotated(modes: list[str], r: int) -> list[str]:
    k = r % len(modes)
    return modes[k:] + modes[:k]


def torch_rounds(modes: list[str], rounds: int, args: list[str], out: Path, library: Path | None,
                 deadline: float) -> list[list[dict[str, Any]]]:
    done = []
    for r in range(rounds):
        if time.monotonic() > deadline:
            print(f"torch: the budget ran out after {r} rounds", flush=True)
            break
        row = []
        for m in _rotated(modes, r):
            try:
                row.append({"round": r, "valid": True, **torch_sample(m, args, out, f"torch-{m}-{r}", library)})
            except (RuntimeError, subprocess.SubprocessError, ValueError, KeyError, IndexError) as exc:
                row.append({"round": r, "mode": m, "valid": False, "error": f"{type(exc).__name__}: {exc}"[:1500]})
        done.append(row)
        (out / "torch-rounds.partial.json").write_text(json.dumps(done, default=str))  # a cut-off run keeps these
        print(f"round {r}: " + ", ".join(
            f"{s['mode']} {s['train_ms'] or 0:.2f}/{s['decode_ms'] or 0:.2f} ms" if s.get("valid") else f"{s['mode']} invalid"
            for s in row), flush=True)
    return done


def ratios(rounds: list[list[dict[str, Any]]], key: str) -> dict[str, Any]:
    """Per mode: the ratio to its round's bare sample, median and 95% bootstrap interval."""
    from aorta_tui.hwqueue.compare import bootstrap_ci

    per: dict[str, list[float]] = {}
    for row in rounds:
        by = {s["mode"]: s for s in row if s.get("valid") and s.get(key)}
        base = by.get("bare")
        if not base:
            continue
        for m, s in by.items():
            if m != "bare":
                per.setdefault(m, []).append(s[key] / base[key])
    out = {}
    for m, xs in per.items():
        ci = bootstrap_ci(xs, statistics.median, resamples=5000)
        out[m] = {"rounds": len(xs), "median": statistics.median(xs), "ci95": list(ci) if ci else None,
                  "ratios": xs}
    return out


def table(summary: dict[str, Any]) -> list[str]:
    rows = [f"trace_perturbation, {summary['date']} ({summary['gpu']})", "",
            "| program | mode | rounds | step ratio vs bare: median [95% CI] | bare step p50 ms (per round) |",
            "|---|---|---|---|---|"]
    for prog in ("train", "decode"):
        bare = ", ".join(f"{x:.2f}" for x in summary["bare_ms"][prog] if x is not None)
        for m, e in summary[prog].items():
            ci = "-" if not e["ci95"] else f"[{e['ci95'][0]:.3f}, {e['ci95'][1]:.3f}]"
            rows.append(f"| {prog} | {m} | {e['rounds']} | {e['median']:.3f} {ci} | {bare} |")
    for m, e in (summary.get("cpp") or {}).get("modes", {}).items():
        add = e.get("added_vs_bare_ns")
        if add and add.get("ci95"):
            rows.append(f"| cpp | {m} | {add['pairs']} | added {add['median'] / 1000:+.3f} us per launch "
                        f"[{add['ci95'][0] / 1000:+.3f}, {add['ci95'][1] / 1000:+.3f}] | "
                        f"{e['ns_per_launch']['p50'] / 1000:.3f} us per launch (median, this mode) |")
    rows.append("")
    rows += [f"target {k}: {v}" for k, v in summary["verdicts"].items()]
    return rows


def verdicts(summary: dict[str, Any]) -> dict[str, str]:
    out = {}
    d = summary["train"].get("default")
    if d and d["ci95"]:
        out["train default ratio median <= 1.03"] = f"{'met' if d['median'] <= 1.03 else 'MISSED'} ({d['median']:.3f})"
        out["train default ratio 95% upper <= 1.06"] = f"{'met' if d['ci95'][1] <= 1.06 else 'MISSED'} ({d['ci95'][1]:.3f})"
    add = ((summary.get("cpp") or {}).get("modes", {}).get("full") or {}).get("added_vs_bare_ns") or {}
    if add.get("ci95"):
        hi = add["ci95"][1]
        out["cpp default added per launch 95% upper <= 1.0 us"] = f"{'met' if hi <= 1000 else 'MISSED'} ({hi / 1000:.3f} us)"
    return out


def _collector(out: Path) -> Path:
    from aorta_tui.trace.device.build import build_collector

    return build_collector(target_python=sys.executable).library


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--modes", default="bare,activity-alone,default,collector,old-default,ebpf-only")
    ap.add_argument("--cpp-modes", default=",".join(CPP_MODES))
    ap.add_argument("--programs", default="torch,cpp")
    ap.add_argument("--train-steps", type=int, default=60)
    ap.add_argument("--decode-steps", type=int, default=64)
    ap.add_argument("--cpp-launches", type=int, default=200_000)
    ap.add_argument("--budget-s", type=float, default=420.0, help="no new round starts after this")
    ap.add_argument("--torch-share", type=float, default=0.7, help="of the budget, for the torch rounds")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    library = _collector(a.out)
    summary: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "gpu": _gpu()}
    programs = a.programs.split(",")
    if "torch" in programs:
        torch_budget = start + a.budget_s * (a.torch_share if "cpp" in programs else 1.0)
        rounds = torch_rounds(a.modes.split(","), a.rounds, ["--train-steps", str(a.train_steps),
                              "--decode-steps", str(a.decode_steps)], a.out, library, torch_budget)
        summary["torch_rounds"] = rounds
        summary["train"], summary["decode"] = ratios(rounds, "train_ms"), ratios(rounds, "decode_ms")
        summary["bare_ms"] = {p: [s[f"{p}_ms"] for row in rounds for s in row if s["mode"] == "bare" and s.get("valid")]
                              for p in ("train", "decode")}
    else:
        summary.update(train={}, decode={}, bare_ms={"train": [], "decode": []})
    if "cpp" in programs:
        from dispatch_overhead import build_c_loop, run_rounds, summarise

        exe = build_c_loop(a.out)
        modes = a.cpp_modes.split(",")
        left = max(30.0, a.budget_s - (time.monotonic() - start))
        c_rounds = run_rounds(exe, modes, a.rounds, a.cpp_launches, 8, library, 1, left)
        summary["cpp"] = summarise(c_rounds, modes)
        summary["cpp_rounds"] = c_rounds
    summary["verdicts"] = verdicts(summary)
    lines = table(summary)
    (a.out / "trace-perturbation.json").write_text(json.dumps(summary, indent=1, default=str))
    (a.out / "trace-perturbation.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _gpu() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown GPU"


if __name__ == "__main__":
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # every mode alike: import time is not measured
    main()
