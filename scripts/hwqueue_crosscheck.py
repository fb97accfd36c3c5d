#!/usr/bin/env python3
"""Cross-check the queue harness's event-based figures against the PyTorch profiler (CUPTI).

One run, two observers: the harness records CUDA events around every launch while
``torch.profiler`` records CUPTI's kernel and runtime-call timestamps of the very same run.
The CUPTI kernels are attributed to the harness's launches (the runtime call that launched
each kernel lies inside exactly one launch's host interval), turned into the same
``LaunchRecord`` timeline, and fed to the same metric functions. Printed per workload:
per-stream busy time, launch delay, idle gaps and switch overhead from both, the relative
difference and PASS/FAIL against the tolerance (10% by default).

    python scripts/hwqueue_crosscheck.py --workloads hetero_kernels,tiny_kernel_stress \\
        --streams 8 --iterations 20 --out /tmp/xcheck
"""

from __future__ import annotations

import argparse
import bisect
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from aorta_tui.hwqueue import metrics as M
from aorta_tui.hwqueue.cupti import DEVICE_CATS, RUNTIME_CATS, clock_markers, estimate_offset
from aorta_tui.hwqueue.harness import QueueRunConfig, run_queue


def cupti_timeline(result: dict[str, Any], trace: dict[str, Any], offset: float,
                   cpu_mode: bool = False) -> dict[str, Any]:
    """Attribute CUPTI device activities to the harness's launches.

    ``cpu_mode`` (a self-test of the attribution on a machine without a GPU) treats the
    profiler's ``cpu_op`` events as the activities, each being its own launch call.
    """
    origin = result["timeline_origin_ns"]
    ours = [M.LaunchRecord(int(it), int(s), str(lab), origin + h0, origin + h1, origin + g0, origin + g1)
            for it, s, lab, h0, h1, g0, g1 in result["timeline"]]
    starts = [r.host_start_ns for r in ours]
    runtime = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS and "correlation" in e.get("args", {}):
            runtime[e["args"]["correlation"]] = e
    per_launch: dict[int, list[tuple[float, float, float]]] = {}
    unattributed = 0
    hta_delays = []
    cupti_streams: dict[int, set[int]] = {}
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") not in (("cpu_op",) if cpu_mode else DEVICE_CATS):
            continue
        rt = e if cpu_mode else runtime.get(e.get("args", {}).get("correlation"))
        if rt is None:
            unattributed += 1
            continue
        rt_start = float(rt["ts"]) * 1e3 - offset
        rt_end = (float(rt["ts"]) + float(rt["dur"])) * 1e3 - offset
        k = bisect.bisect_right(starts, rt_start) - 1
        if k < 0 or not (ours[k].host_start_ns <= rt_start <= ours[k].host_end_ns):
            continue  # warm-up, calibration or setup work
        k0 = float(e["ts"]) * 1e3 - offset
        k1 = k0 + float(e["dur"]) * 1e3
        per_launch.setdefault(k, []).append((k0, k1, rt_end))
        hta_delays.append(k0 - rt_end)
        cupti_streams.setdefault(ours[k].stream, set()).add(e.get("args", {}).get("stream"))
    records, kernel_intervals = [], {}
    matched_ours = []
    for k, r in enumerate(ours):
        acts = per_launch.get(k)
        if not acts:
            continue
        g0 = min(a[0] for a in acts)
        g1 = max(a[1] for a in acts)
        records.append(M.LaunchRecord(r.iteration, r.stream, r.label, r.host_start_ns, r.host_end_ns, g0, g1))
        matched_ours.append(r)
        kernel_intervals.setdefault(r.stream, []).extend((a[0], a[1]) for a in acts)
    return {"ours": ours, "matched_ours": matched_ours, "cupti": records,
            "kernel_intervals": kernel_intervals, "hta_delays_ns": hta_delays,
            "unattributed": unattributed, "cupti_streams": cupti_streams}


def rel(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return (a - b) / abs(b)


def compare_workload(result: dict[str, Any], tl: dict[str, Any], tol: float) -> list[dict[str, Any]]:
    ours, cupti = tl["matched_ours"], tl["cupti"]
    rows: list[dict[str, Any]] = []

    def add(metric: str, a: float | None, b: float | None, unit: str, checked: bool = True) -> None:
        d = rel(a, b)
        verdict = ("n/a" if d is None else ("PASS" if abs(d) <= tol else "FAIL")) if checked else "info"
        rows.append({"metric": metric, "ours": a, "cupti": b, "unit": unit, "diff": d, "verdict": verdict})

    ours_busy = M.per_stream_busy_ns(ours)
    for s in sorted(ours_busy):
        cb = M.union_length(tl["kernel_intervals"].get(s, []))
        add(f"busy stream {s}", ours_busy[s] / 1e6, cb / 1e6, "ms")
    add("busy total", sum(ours_busy.values()) / 1e6,
        sum(M.union_length(v) for v in tl["kernel_intervals"].values()) / 1e6, "ms")
    # launch delay on the launches where events can measure it (start event after call end)
    pairs = [(o.gpu_start_ns - o.host_end_ns, c.gpu_start_ns - c.host_end_ns)
             for o, c in zip(ours, cupti, strict=True) if o.gpu_start_ns >= o.host_end_ns]
    if pairs:
        add("launch delay mean (measurable launches)", statistics.fmean(p[0] for p in pairs) / 1e3,
            statistics.fmean(p[1] for p in pairs) / 1e3, "us")
        add("launch delay p50 (measurable launches)", statistics.median(p[0] for p in pairs) / 1e3,
            statistics.median(p[1] for p in pairs) / 1e3, "us")
    else:
        add("launch delay (measurable launches)", None, None, "us")
    rows.append({"metric": "launches measurable by events", "ours": len(pairs), "cupti": len(cupti),
                 "unit": "launches", "diff": None, "verdict": "info"})
    if tl["hta_delays_ns"]:
        add("HTA launch delay, all kernels (CUPTI only)", None,
            statistics.fmean(tl["hta_delays_ns"]) / 1e3, "us", checked=False)
    go, gc = M.idle_gaps(ours), M.idle_gaps(cupti)

    def mean(xs: list[float]) -> float | None:
        return statistics.fmean(xs) / 1e3 if xs else None

    add("intra-stream idle gap mean", mean(go.intra_ns), mean(gc.intra_ns), "us")
    add("inter-stream idle gap mean", mean(go.inter_ns), mean(gc.inter_ns), "us")
    so, sc = go.switch_overhead_ns, gc.switch_overhead_ns
    add("switch overhead", None if so is None else so / 1e3, None if sc is None else sc / 1e3, "us")
    add("achieved concurrency", M.achieved_concurrency(ours), M.achieved_concurrency(cupti), "streams")
    dur = [(o.gpu_end_ns - o.gpu_start_ns) - (c.gpu_end_ns - c.gpu_start_ns) for o, c in zip(ours, cupti, strict=True)]
    add("event interval minus CUPTI span, median", statistics.median(dur) / 1e3 if dur else None,
        None, "us", checked=False)
    return rows


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def print_table(title: str, rows: list[dict[str, Any]]) -> str:
    header = ["metric", "ours (events)", "CUPTI", "unit", "diff", "verdict"]
    body = [[r["metric"], fmt(r["ours"]), fmt(r["cupti"]), r["unit"],
             "-" if r["diff"] is None else f"{r['diff'] * 100:+.1f}%", r["verdict"]] for r in rows]
    widths = [max(len(x[i]) for x in [header, *body]) for i in range(len(header))]
    lines = [title, "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)) + " |" for b in body]
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="hetero_kernels,tiny_kernel_stress")
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--size", default="default")
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--out", type=Path, default=Path("hwqueue-crosscheck"))
    args = ap.parse_args(argv)
    import torch
    from torch.profiler import ProfilerActivity, profile

    args.out.mkdir(parents=True, exist_ok=True)
    activities = [ProfilerActivity.CPU]
    if args.device != "cpu":
        activities.append(ProfilerActivity.CUDA)
    summary: dict[str, Any] = {"tolerance": args.tolerance, "workloads": {}}
    failed = False
    texts = []
    for name in [w for w in args.workloads.split(",") if w]:
        cfg = QueueRunConfig(workload=name, streams=args.streams, iterations=args.iterations,
                             warmup=args.warmup, device=args.device, size=args.size,
                             keep_timeline=True)
        with profile(activities=activities) as prof:
            markers = clock_markers(torch, 50)
            result = run_queue(cfg)
        trace_path = args.out / f"{name}.trace.json"
        prof.export_chrome_trace(str(trace_path))
        trace = json.loads(trace_path.read_text())
        trace_path.unlink()  # large; the figures below are what we keep
        offset, unc = estimate_offset(trace, markers)
        tl = cupti_timeline(result, trace, offset, cpu_mode=args.device == "cpu")
        rows = compare_workload(result, tl, args.tolerance)
        title = (f"{name} x{args.streams} streams, {args.iterations} iterations on "
                 f"{result['platform'].get('device_name')}: {len(tl['cupti'])}/{len(tl['ours'])} "
                 f"launches matched to {'cpu_op (self-test)' if args.device == 'cpu' else 'CUPTI'} activity; "
                 f"profiler clock offset +/- {unc / 1e3:.1f} us; "
                 f"event clock alignment +/- {result['timing']['clock_alignment_uncertainty_us']} us")
        texts.append(print_table(title, rows))
        failed |= any(r["verdict"] == "FAIL" for r in rows)
        summary["workloads"][name] = {"rows": rows, "matched": len(tl["cupti"]), "launches": len(tl["ours"]),
                                      "unattributed_activities": tl["unattributed"],
                                      "cupti_stream_ids": {str(k): sorted(map(str, v)) for k, v in tl["cupti_streams"].items()},
                                      "summary": result["summary"]}
    (args.out / "crosscheck.json").write_text(json.dumps(summary, indent=2, default=str))
    (args.out / "crosscheck.md").write_text("\n\n".join(texts) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
