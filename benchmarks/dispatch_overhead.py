#!/usr/bin/env python3
"""What live submit->dispatch tracing costs the traced program, per launch, and its live lag.

Default (``--loop c``): the plain CUDA C++ launch loop (scripts/dispatch/launch_loop.cu, built
here with nvcc: no Python between launches, so the noise of an interpreter loop does not hide
a microsecond) runs in fresh processes, alternated over ``--rounds`` rounds (the order rotates
every round, so drift and order effects fall on every mode alike), as:

- ``bare``: the reference, untraced, in the same round;
- ``collector-activity``: the collector with CUPTI's activity records only, no launch callback
  (``AORTA_CUPTI_DOMAINS=0``; since issue 34 with latency timestamps, ``AORTA_CUPTI_LATENCY=0``
  leaves them off): the part of the collector's cost that is CUPTI's kernel tracing;
  valid when one kernel record per launch arrived;
- ``collector``: only the CUPTI collector injected (CUDA_INJECTION64_PATH), its records drained
  by a reader in this process, no bpftrace; the run counts only when the collector really sent
  one launch record per launch (otherwise it is reported as invalid, never averaged in);
- ``ebpf``: ``trace queue --probes cuda --device-timestamps off`` (the uprobes alone);
- ``full-ebpf``: ``trace queue --probes cuda --device-timestamps on --launch-source ebpf``: the
  collector and the launch uprobe, joined (the mode before issue 24);
- ``full``: ``trace queue --probes cuda --device-timestamps on`` (what a user runs: since issue 34
  the kernel activity records alone with CUPTI's latency timestamps, no launch callback, no launch
  uprobe);
- ``full-collector``: the same with ``--launch-source collector`` (the collector's launch callback).

The ``trace queue`` modes start bpftrace (seconds each), so they run every ``--heavy-every``-th
round only, paired with that round's ``bare``. ``--budget-s`` stops starting rounds once spent.

Each process times its loop in ``--segments`` equal parts; its sample is the median part
(host ns per launch while issuing, the final synchronise excluded). Printed per mode: median,
p25-p75 (IQR) and the number of processes; per traced mode the paired difference against
``bare`` of the same round: the median difference and its 95% bootstrap interval. The
collector's target (<= 1.5 us per launch) is met when the interval's upper end is at most
the target, missed when its lower end is above, and undecided otherwise; targets (issue 24):
collector <= 1.0 us, ``trace queue`` (full) <= 2.0 us per launch.

``--loop python`` keeps the earlier torch loops (scripts/dispatch/launch_loop.py, ``tiny`` and
``matmul``) with the modes untraced, collector, collector-driver, collector-runtime, ebpf, full.

``--lag`` also measures how far the live histogram trails the GPU: a program runs bursts of
launches 2 s apart and prints when each burst's kernels finished (CLOCK_MONOTONIC); the lag is
the time until a ``--json`` snapshot first counts them.

    sudo python3 benchmarks/dispatch_overhead.py --rounds 24 --out "$OUT"
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
LOOP = REPO / "scripts" / "dispatch" / "launch_loop.py"
LOOP_CU = REPO / "scripts" / "dispatch" / "launch_loop.cu"
AT = [sys.executable, "-m", "aorta_tui"]
TARGETS_NS = {"collector": 1000, "full": 2000}  # issue 24's upper bounds of the added cost per launch
C_MODES = ("bare", "collector-activity", "collector", "ebpf", "full-ebpf", "full")
HEAVY = ("ebpf", "full-ebpf", "full", "full-collector")  # modes that start bpftrace
TRACED = {"ebpf": ("off", None), "full-ebpf": ("on", "ebpf"), "full": ("on", None),
          "full-collector": ("on", "collector")}


def _program_json(stdout: str) -> dict:
    return json.loads([ln for ln in stdout.splitlines() if ln.startswith("{")][-1])


def _with_collector(prog: list[str], library: Path, extra_env: dict[str, str],
                    record: str = "launch") -> tuple[dict, int]:
    """Run ``prog`` with the collector injected; returns its JSON and the launch (or kernel)
    records read."""
    from aorta_tui.trace.device.channel import DeviceChannel
    from aorta_tui.trace.device.records import Rec

    counted = {"launch": 0}
    kinds = (Rec.LAUNCH,) if record == "launch" else (Rec.KERNEL, Rec.KERNEL_LAT)

    def count(parsed: Any) -> None:
        counted["launch"] += sum(len(parsed.of(k)) for k in kinds)

    ch = DeviceChannel(count)
    ch.start()
    env = {**os.environ, **ch.env(library), **extra_env}
    try:
        out = subprocess.run(prog, env=env, capture_output=True, text=True, timeout=600, check=True)
    finally:
        ch.stop()
    return _program_json(out.stdout), counted["launch"]


def _traced(prog: list[str], device: str, launch_source: str | None = None) -> dict:
    src = ["--launch-source", launch_source] if launch_source else []
    out = subprocess.run([*AT, "trace", "queue", "--probes", "cuda", "--device-timestamps", device, *src,
                          "--no-calibrate", "--", *prog], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"trace queue --device-timestamps {device} {' '.join(src)}: exit {out.returncode}: "
                           f"{out.stderr[-1500:]}")
    return _program_json(out.stdout)


# -- the C++ loop -------------------------------------------------------------------------------
def build_c_loop(out_dir: Path) -> Path:
    exe = out_dir / "launch_loop"
    subprocess.run(["nvcc", "-O2", "-o", str(exe), str(LOOP_CU)], check=True)
    return exe


def c_sample(mode: str, exe: Path, launches: int, segments: int, library: Path | None) -> dict[str, Any]:
    """One fresh process of the C++ loop in ``mode``: its per-launch figure and what backs it."""
    prog = [str(exe), str(launches), "4", "0", str(segments)]
    collector_records = None
    if mode == "bare":
        prog_json = _program_json(subprocess.run(prog, capture_output=True, text=True, timeout=600,
                                                 check=True).stdout)
    elif mode == "collector":
        assert library is not None
        prog_json, collector_records = _with_collector(prog, library, {})
    elif mode == "collector-activity":
        assert library is not None
        prog_json, collector_records = _with_collector(prog, library, {"AORTA_CUPTI_DOMAINS": "0"}, "kernel")
    else:
        prog_json = _traced(prog, *TRACED[mode])
    segs = prog_json.get("segment_ns_per_launch") or [prog_json["host_ns_per_launch"]]
    sample: dict[str, Any] = {"mode": mode, "ns_per_launch": statistics.median(segs),
                              "whole_loop_ns_per_launch": prog_json["host_ns_per_launch"],
                              "segments": segs, "cuda_error": prog_json.get("error")}
    valid = prog_json.get("error") == "no error"
    if collector_records is not None:
        expected = prog_json["measured_launches"] + prog_json["warmup_launches"]
        sample["collector_launch_records"] = collector_records
        sample["launches"] = expected
        valid &= collector_records == expected
    sample["valid"] = valid
    return sample


def _rotated(modes: list[str], r: int) -> list[str]:
    k = r % len(modes)
    return modes[k:] + modes[:k]


def run_rounds(exe: Path, modes: list[str], rounds: int, launches: int, segments: int,
               library: Path | None, heavy_every: int, budget_s: float) -> list[list[dict[str, Any]]]:
    t0 = time.monotonic()
    done: list[list[dict[str, Any]]] = []
    for r in range(rounds):
        if time.monotonic() - t0 > budget_s:
            print(f"budget of {budget_s:g} s spent after {r} rounds", flush=True)
            break
        these = [m for m in modes if m not in HEAVY or r % heavy_every == 0]
        row = []
        for m in _rotated(these, r):
            try:
                row.append({"round": r, **c_sample(m, exe, launches, segments, library)})
            except (RuntimeError, subprocess.SubprocessError, ValueError, KeyError, IndexError) as exc:
                row.append({"round": r, "mode": m, "valid": False, "error": f"{type(exc).__name__}: {exc}"[:2000]})
        done.append(row)
        print(f"round {r}: " + ", ".join(f"{s['mode']} {s['ns_per_launch']:.0f} ns" if s.get("valid")
                                         else f"{s['mode']} invalid" for s in row), flush=True)
    return done


def summarise(rounds: list[list[dict[str, Any]]], modes: list[str]) -> dict[str, Any]:
    """Per mode: median and IQR over processes; per traced mode: paired difference against bare."""
    from aorta_tui.core.stats import spread
    from aorta_tui.hwqueue.compare import bootstrap_ci

    per: dict[str, list[float]] = {m: [] for m in modes}
    diffs: dict[str, list[float]] = {m: [] for m in modes if m != "bare"}
    invalid: dict[str, int] = dict.fromkeys(modes, 0)
    for row in rounds:
        by = {s["mode"]: s for s in row}
        for m, s in by.items():
            if s.get("valid"):
                per[m].append(s["ns_per_launch"])
            else:
                invalid[m] += 1
        base = by.get("bare")
        for m in diffs:
            s = by.get(m)
            if base and s and base.get("valid") and s.get("valid"):
                diffs[m].append(s["ns_per_launch"] - base["ns_per_launch"])
    out: dict[str, Any] = {"modes": {}, "targets_ns": TARGETS_NS}
    for m in modes:
        entry: dict[str, Any] = {"ns_per_launch": spread(per[m]), "invalid_runs": invalid[m]}
        if m in diffs:
            d = diffs[m]
            ci = bootstrap_ci(d, statistics.median, resamples=5000)
            entry["added_vs_bare_ns"] = {
                "pairs": len(d), "median": statistics.median(d) if d else None,
                "ci95": list(ci) if ci else None,
                "method": "median of (mode - bare) over rounds where both ran, 95% percentile "
                          "bootstrap of that median (5000 resamples)"}
        out["modes"][m] = entry
    out["targets"] = {}
    for m, target in TARGETS_NS.items():
        add = out["modes"].get(m, {}).get("added_vs_bare_ns")
        if add and add["ci95"]:
            lo, hi = add["ci95"]
            out["targets"][m] = "met" if hi <= target else "missed" if lo > target else "undecided"
        else:
            out["targets"][m] = "not measured (fewer than 2 valid pairs)"
    return out


def c_table(summary: dict[str, Any]) -> list[str]:
    def us(x: float | None) -> str:
        return "-" if x is None else f"{x / 1000:.3f}"

    rows = ["| mode | processes | host us per launch: median | p25-p75 (IQR) | added vs bare: median "
            "[95% CI] (pairs) | invalid |", "|---|---|---|---|---|---|"]
    for m, e in summary["modes"].items():
        s = e["ns_per_launch"]
        add = e.get("added_vs_bare_ns")
        add_s = "-" if not add else (f"{us(add['median'])} [{us(add['ci95'][0])}, {us(add['ci95'][1])}] "
                                     f"({add['pairs']})" if add["ci95"] else f"{us(add['median'])} ({add['pairs']})")
        iqr = "-" if s["p25"] is None else f"{us(s['p25'])}-{us(s['p75'])} ({us(s['iqr'])})"
        rows.append(f"| {m} | {s['n']} | {us(s['p50'])} | {iqr} | {add_s} | {e['invalid_runs']} |")
    for m, verdict in summary["targets"].items():
        rows.append(f"{m} target (added <= {summary['targets_ns'][m] / 1000:g} us per launch, 95% CI upper end): {verdict}")
    return rows


# -- the torch loops (earlier benchmark) ----------------------------------------------------------
def run_mode(mode: str, loop_args: list[str], library: Path | None) -> dict:
    prog = [sys.executable, str(LOOP), *loop_args]
    if mode.startswith("collector"):
        assert library is not None
        extra = {"collector-driver": {"AORTA_CUPTI_DOMAINS": "1"},
                 "collector-runtime": {"AORTA_CUPTI_DOMAINS": "2"}}.get(mode, {})
        return _with_collector(prog, library, extra)[0]
    if mode in ("ebpf", "full"):
        return _traced(prog, "off" if mode == "ebpf" else "on")
    return _program_json(subprocess.run(prog, capture_output=True, text=True, timeout=600, check=True).stdout)


def overhead(loop: str, modes: list[str], reps: int, library: Path) -> list[str]:
    args = (["--kernel", "tiny", "--launches", "200000", "--streams", "4"] if loop == "tiny"
            else ["--kernel", "matmul", "--launches", "1000", "--streams", "4", "--warmup", "200"])
    per: dict[str, list[float]] = {m: [] for m in modes}
    added: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(reps):
        base = None
        for m in modes:
            ns = run_mode(m, args, library)["host_ns_per_launch"]
            per[m].append(ns)
            if m == "untraced":
                base = ns
            elif base is not None:
                added[m].append(ns - base)
    return [f"| {loop} | {m} | {statistics.median(per[m]) / 1000:.2f} "
            f"({min(per[m]) / 1000:.2f}-{max(per[m]) / 1000:.2f}) | "
            + ("-" if m == "untraced" else f"{statistics.median(added[m]) / 1000:+.2f}") + f" | {len(per[m])} |"
            for m in modes]


BURSTS = r"""
import json, sys, time, torch
s = torch.cuda.Stream(); x = torch.zeros(256, device="cuda")
with torch.cuda.stream(s):
    for _ in range(500): x.add_(1)
    s.synchronize()
    for b in range(5):
        time.sleep(2.0)
        for _ in range(20000): x.add_(1)
        s.synchronize()
        print(json.dumps({"burst": b, "done_ns": time.monotonic_ns(), "launches": 500 + 20000 * (b + 1)}), file=sys.stderr, flush=True)
"""


def lag() -> list[str]:
    proc = subprocess.Popen([*AT, "trace", "queue", "--probes", "cuda", "--device-timestamps", "on",
                             "--no-calibrate", "--interval", "0.1", "--json", "--",
                             sys.executable, "-c", BURSTS],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    snaps: list[tuple[int, int]] = []  # (arrival CLOCK_MONOTONIC, launch_to_start count)
    bursts: list[dict] = []

    def read_err() -> None:
        for ln in proc.stderr:
            if ln.startswith('{"burst"'):
                bursts.append(json.loads(ln))

    t = threading.Thread(target=read_err, daemon=True)
    t.start()
    for ln in proc.stdout:
        if '"cuda.launch_to_start"' in ln:
            snaps.append((time.monotonic_ns(), json.loads(ln)["count"]))
    proc.wait()
    t.join(timeout=5)
    rows = []
    for b in bursts:
        seen = [arr for arr, n in snaps if n >= b["launches"]]
        lag_s = (seen[0] - b["done_ns"]) / 1e9 if seen else None
        rows.append(f"| burst {b['burst']} ({b['launches']} launches) | "
                    + ("never seen" if lag_s is None else f"{lag_s:.3f} s") + " |")
    return rows


def _collector_library(modes: list[str]) -> Path | None:
    if not any(m.startswith("collector") or m == "full" for m in modes):
        return None
    if prebuilt := os.environ.get("AORTA_CUPTI_COLLECTOR"):
        return Path(prebuilt)
    from aorta_tui.trace.device.build import build_collector

    return build_collector().library


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--loop", choices=["c", "python"], default="c")
    ap.add_argument("--rounds", type=int, default=24, help="--loop c: rounds of alternated processes")
    ap.add_argument("--launches", type=int, default=100_000, help="--loop c: launches per process")
    ap.add_argument("--segments", type=int, default=10, help="--loop c: timed parts per process")
    ap.add_argument("--heavy-every", type=int, default=3, help="--loop c: ebpf/full every N-th round")
    ap.add_argument("--budget-s", type=float, default=140.0, help="--loop c: start no round after this")
    ap.add_argument("--loop-exe", type=Path, help="--loop c: a built launch_loop (default: nvcc here)")
    ap.add_argument("--reps", type=int, default=3, help="--loop python: rounds")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--modes", help=f"--loop c default: {','.join(C_MODES)}; --loop python default: "
                                    "untraced,collector,collector-driver,collector-runtime,ebpf,full")
    ap.add_argument("--lag", action="store_true")
    a = ap.parse_args()
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    doc: dict[str, Any] = {"date": stamp, "loop": a.loop}
    if a.loop == "c":
        modes = (a.modes or ",".join(C_MODES)).split(",")
        if "bare" not in modes:
            raise SystemExit("--modes must include bare (the reference every difference is against)")
        library = _collector_library(modes)
        exe = a.loop_exe or build_c_loop(a.out or Path("/tmp"))
        t0 = time.monotonic()
        rounds = run_rounds(exe, modes, a.rounds, a.launches, a.segments, library, a.heavy_every, a.budget_s)
        summary = summarise(rounds, modes)
        doc.update(settings={"launches_per_process": a.launches, "streams": 4, "segments": a.segments,
                             "rounds_asked": a.rounds, "rounds_run": len(rounds), "heavy_every": a.heavy_every,
                             "collector": str(library) if library else None},
                   wall_s=time.monotonic() - t0, summary=summary, rounds=rounds)
        lines = [f"dispatch overhead (C++ launch loop, {a.launches} launches x 4 streams per process), {stamp}, "
                 f"{len(rounds)} rounds", "", *c_table(summary)]
    else:
        modes = (a.modes or "untraced,collector,collector-driver,collector-runtime,ebpf,full").split(",")
        library = _collector_library(modes)
        lines = [f"dispatch overhead, {stamp}, reps={a.reps}", "",
                 "| loop | mode | host us per launch, median (range) | added vs untraced, median | rounds |",
                 "|---|---|---|---|---|"]
        for loop in ("tiny", "matmul"):
            lines += overhead(loop, modes, a.reps, library)
    if a.lag:
        lines += ["", "| live lag: burst | first snapshot counting it, after the kernels finished |", "|---|---|"]
        lines += lag()
    text = "\n".join(lines)
    print(text)
    if a.out:
        (a.out / "dispatch-overhead.md").write_text(text + "\n")
        doc["table"] = lines
        (a.out / "dispatch-overhead.json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
