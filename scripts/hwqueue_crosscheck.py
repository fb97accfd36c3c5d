#!/usr/bin/env python3
"""Cross-check the queue harness's reported figures against the PyTorch profiler (CUPTI).

Each workload runs once with the default ``--timing auto``: a measure pass, then a detail pass
under ``torch.profiler`` whose raw chrome trace is kept (``--profiler-trace``). The harness
reports per-stream busy time, concurrency, launch delay, idle gaps and switch overhead from the
profiler's kernel records after attributing each to the launch and stream that issued it.

Table 1 checks those reported figures against the same pass's raw trace, recomputed here
without the harness's attribution, clock mapping or metric functions: device activities per
CUDA stream, in the profiler's own clock, between the harness's start and end clock markers.
Its verdicts (tolerance 10% by default) decide the exit status.

Table 2 puts the same pass's CUDA-event timings next to the CUPTI ones, launch by launch: what
events measure (stream occupancy) and where that equals kernel execution. It is information,
not a verdict on the reported figures.

    python scripts/hwqueue_crosscheck.py --workloads hetero_kernels,tiny_kernel_stress \\
        --streams 8 --iterations 20 --out /tmp/xcheck
"""

from __future__ import annotations

import argparse
import bisect
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, NamedTuple

from aorta_tui.hwqueue import metrics as M
from aorta_tui.hwqueue.cupti import DEVICE_CATS, MARKER, RUNTIME_CATS
from aorta_tui.hwqueue.harness import QueueRunConfig
from aorta_tui.hwqueue.run import run_queue

START_MARKERS = 25  # the harness opens 25 clock markers before the loop and 25 after


class Activity(NamedTuple):
    """One device activity of the trace, in the profiler's clock (us)."""

    stream: Any  # the profiler's CUDA stream id
    start_us: float
    end_us: float
    call_end_us: float  # end of the runtime call that launched it


def window_activities(trace: dict[str, Any]) -> list[Activity]:
    """Device activities whose runtime call lies between the start and end clock markers."""
    events = trace.get("traceEvents", [])
    before, after = [], []
    for e in events:
        name = str(e.get("name", ""))
        if e.get("ph") == "X" and name.startswith(MARKER):
            idx = int(name[len(MARKER):])
            ts = float(e["ts"])
            if idx < START_MARKERS:
                before.append(ts + float(e.get("dur", 0.0)))
            else:
                after.append(ts)
    if not before or not after:
        raise SystemExit("the profiler trace has no clock markers: was it written by --timing auto/cupti?")
    lo, hi = max(before), min(after)
    runtime = {e["args"]["correlation"]: e for e in events
               if e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS and "correlation" in e.get("args", {})}
    out = []
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in DEVICE_CATS:
            continue
        rt = runtime.get(e.get("args", {}).get("correlation"))
        if rt is None or not (lo <= float(rt["ts"]) <= hi):
            continue
        start = float(e["ts"])
        out.append(Activity(e.get("args", {}).get("stream"), start, start + float(e.get("dur", 0.0)),
                            float(rt["ts"]) + float(rt.get("dur", 0.0))))
    return out


def covered(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of intervals."""
    total, end = 0.0, None
    start = 0.0
    for a, b in sorted(intervals):
        if end is None or a > end:
            if end is not None:
                total += end - start
            start, end = a, b
        else:
            end = max(end, b)
    return total + (end - start if end is not None else 0.0)


def reference_figures(acts: list[Activity]) -> dict[str, Any]:
    """The kernel-level figures straight from the trace (us; busy per profiler stream id)."""
    by_stream: dict[Any, list[tuple[float, float]]] = defaultdict(list)
    for a in acts:
        by_stream[a.stream].append((a.start_us, a.end_us))
    busy = {s: covered(iv) for s, iv in by_stream.items()}
    span = max(a.end_us for a in acts) - min(a.start_us for a in acts) if acts else 0.0
    delays = [a.start_us - a.call_end_us for a in acts]
    intra, inter = [], []
    last_end, last_stream = None, None
    for a in sorted(acts, key=lambda x: (x.start_us, x.end_us)):
        if last_end is not None and a.start_us > last_end:
            (intra if a.stream == last_stream else inter).append(a.start_us - last_end)
        if last_end is None or a.end_us >= last_end:
            last_end, last_stream = a.end_us, a.stream
    mean = (lambda xs: sum(xs) / len(xs) if xs else None)  # noqa: E731
    switch = None if not (intra and inter) else mean(inter) - mean(intra)
    return {"busy_us": busy, "busy_total_us": sum(busy.values()),
            "concurrency": sum(busy.values()) / span if span > 0 else None,
            "delay_mean_us": mean(delays), "delay_p50_us": statistics.median(delays) if delays else None,
            "intra_mean_us": mean(intra), "inter_mean_us": mean(inter), "switch_us": switch,
            "activities": len(acts)}


def stream_mapping(result: dict[str, Any], acts: list[Activity]) -> tuple[dict[Any, int], float]:
    """Profiler stream id -> harness stream, by pairing the reported kernels with the trace's.

    The reported kernel timeline, moved onto the profiler clock, is sorted by start like the
    trace's activities and paired in order; each profiler stream goes to the harness stream most
    of its activities pair with. Returns the mapping and the fraction of pairs that agree.
    """
    offset = result["timing"]["profiler"]["clock_offset_ns"]
    origin = result["timeline_origin_ns"]
    ours = sorted(((origin + row[5] + offset) / 1e3, (origin + row[6] + offset) / 1e3, int(row[1]))
                  for row in result["timeline"])
    theirs = sorted(acts, key=lambda a: (a.start_us, a.end_us))
    votes: dict[Any, Counter[int]] = defaultdict(Counter)
    for a, o in zip(theirs, ours, strict=False):
        votes[a.stream][o[2]] += 1
    mapping = {s: c.most_common(1)[0][0] for s, c in votes.items()}
    agree = sum(c[mapping[s]] for s, c in votes.items())
    return mapping, agree / max(1, min(len(ours), len(theirs)))


def cupti_timeline(result: dict[str, Any], trace: dict[str, Any]) -> dict[str, Any]:
    """Attribute CUPTI device activities to the detail pass's event-timed launches.

    The runtime call that launched each activity lies inside exactly one launch's host interval.
    """
    origin = result["timeline_origin_ns"]
    offset = result["timing"]["profiler"]["clock_offset_ns"]
    ours = [M.LaunchRecord(int(it), int(s), str(lab), origin + h0, origin + h1, origin + g0, origin + g1)
            for it, s, lab, h0, h1, g0, g1 in result["event_timeline"]]
    starts = [r.host_start_ns for r in ours]
    runtime = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS and "correlation" in e.get("args", {}):
            runtime[e["args"]["correlation"]] = e
    per_launch: dict[int, list[tuple[float, float, float]]] = {}
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") not in DEVICE_CATS:
            continue
        rt = runtime.get(e.get("args", {}).get("correlation"))
        if rt is None:
            continue
        rt_start = float(rt["ts"]) * 1e3 - offset
        rt_end = (float(rt["ts"]) + float(rt["dur"])) * 1e3 - offset
        k = bisect.bisect_right(starts, rt_start) - 1
        if k < 0 or not (ours[k].host_start_ns <= rt_start <= ours[k].host_end_ns):
            continue  # warm-up, calibration or setup work
        k0 = float(e["ts"]) * 1e3 - offset
        per_launch.setdefault(k, []).append((k0, k0 + float(e["dur"]) * 1e3, rt_end))
    records, matched_ours = [], []
    kernel_intervals: dict[int, list[tuple[float, float]]] = {}
    for k, r in enumerate(ours):
        acts = per_launch.get(k)
        if not acts:
            continue
        g0 = min(x[0] for x in acts)
        g1 = max(x[1] for x in acts)
        records.append(M.LaunchRecord(r.iteration, r.stream, r.label, r.host_start_ns, r.host_end_ns, g0, g1))
        matched_ours.append(r)
        kernel_intervals.setdefault(r.stream, []).extend((x[0], x[1]) for x in acts)
    return {"ours": ours, "matched_ours": matched_ours, "cupti": records,
            "kernel_intervals": kernel_intervals}


def rel(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return (a - b) / abs(b)


def check_reported(result: dict[str, Any], ref: dict[str, Any], mapping: dict[Any, int],
                   agreement: float, tol: float) -> list[dict[str, Any]]:
    """Table 1: the harness's reported kernel figures against the trace's own."""
    rows: list[dict[str, Any]] = []
    m, s = result["metrics"], result["summary"]

    def add(metric: str, ours: float | None, theirs: float | None, unit: str) -> None:
        d = rel(ours, theirs)
        if ours is None and theirs is None:
            verdict = "PASS (both undefined)"
        elif d is None:
            verdict = "FAIL" if (ours is None) != (theirs is None) else "n/a"
        else:
            verdict = "PASS" if abs(d) <= tol else "FAIL"
        rows.append({"metric": metric, "ours": ours, "cupti": theirs, "unit": unit, "diff": d,
                     "verdict": verdict})

    add("device activities", result["timing"]["kernels_recorded"], ref["activities"], "records")
    bijective = len(set(mapping.values())) == len(mapping)
    rows.append({"metric": "profiler streams -> harness streams", "ours": len(set(mapping.values())),
                 "cupti": len(mapping), "unit": f"{agreement * 100:.2f}% of kernels agree", "diff": None,
                 "verdict": "PASS" if bijective and agreement >= 0.99 else "FAIL"})
    back = {v: k for k, v in mapping.items()}
    for ps in m["per_stream"]:
        sid = back.get(ps["stream"])
        add(f"busy stream {ps['stream']}", ps["busy_ms"],
            None if sid is None else ref["busy_us"][sid] / 1e3, "ms")
    reported_total = sum(ps["busy_ms"] or 0.0 for ps in m["per_stream"])
    add("busy total", reported_total, ref["busy_total_us"] / 1e3, "ms")
    add("achieved concurrency", s["achieved_concurrency"], ref["concurrency"], "streams")
    add("launch delay mean (HTA)", s["launch_delay_mean_us"], ref["delay_mean_us"], "us")
    add("launch delay p50 (HTA)", s["launch_delay_p50_us"], ref["delay_p50_us"], "us")
    intra, inter = m["intra_stream_gap_us"], m["inter_stream_gap_us"]
    add("intra-stream idle gap mean", intra and intra["mean"], ref["intra_mean_us"], "us")
    add("inter-stream idle gap mean", inter and inter["mean"], ref["inter_mean_us"], "us")
    add("switch overhead", s["switch_overhead_us"], ref["switch_us"], "us")
    return rows


def events_vs_cupti(tl: dict[str, Any], tol: float) -> list[dict[str, Any]]:
    """Table 2: the detail pass's CUDA-event timings against CUPTI, launch by launch."""
    ours, cupti = tl["matched_ours"], tl["cupti"]
    rows: list[dict[str, Any]] = []

    def add(metric: str, a: float | None, b: float | None, unit: str) -> None:
        d = rel(a, b)
        verdict = "-" if d is None else ("agrees" if abs(d) <= tol else "differs")
        rows.append({"metric": metric, "ours": a, "cupti": b, "unit": unit, "diff": d, "verdict": verdict})

    ours_busy = M.per_stream_busy_ns(ours)
    for st in sorted(ours_busy):
        add(f"occupied (events) vs busy (CUPTI), stream {st}", ours_busy[st] / 1e6,
            M.union_length(tl["kernel_intervals"].get(st, [])) / 1e6, "ms")
    # launch delay where events can measure it (start event after the launch call returned)
    pairs = [(o.gpu_start_ns - o.host_end_ns, c.gpu_start_ns - c.host_end_ns)
             for o, c in zip(ours, cupti, strict=True) if o.gpu_start_ns >= o.host_end_ns]
    if pairs:
        add("launch delay mean, launches events can time", statistics.fmean(p[0] for p in pairs) / 1e3,
            statistics.fmean(p[1] for p in pairs) / 1e3, "us")
    rows.append({"metric": "launches events can time", "ours": len(pairs), "cupti": len(cupti),
                 "unit": "launches", "diff": None, "verdict": "-"})
    kernels = [(a, b) for iv in tl["kernel_intervals"].values() for a, b in iv]
    span = max(b for _, b in kernels) - min(a for a, _ in kernels) if kernels else 0.0
    kernel_conc = (sum(M.union_length(iv) for iv in tl["kernel_intervals"].values()) / span
                   if span > 0 else None)
    add("achieved concurrency", M.achieved_concurrency(ours), kernel_conc, "streams")
    dur = [(o.gpu_end_ns - o.gpu_start_ns) - (c.gpu_end_ns - c.gpu_start_ns) for o, c in zip(ours, cupti, strict=True)]
    rows.append({"metric": "event interval minus kernel span, median", "ours": statistics.median(dur) / 1e3 if dur else None,
                 "cupti": None, "unit": "us", "diff": None, "verdict": "-"})
    return rows


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def print_table(title: str, rows: list[dict[str, Any]], ours_label: str) -> str:
    header = ["metric", ours_label, "CUPTI (trace)", "unit", "diff", "verdict"]
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
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--keep-traces", action="store_true", help="keep the profiler traces in --out")
    ap.add_argument("--out", type=Path, default=Path("hwqueue-crosscheck"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"tolerance": args.tolerance, "workloads": {}}
    failed = False
    texts = []
    for name in [w for w in args.workloads.split(",") if w]:
        trace_path = args.out / f"{name}.trace.json"
        cfg = QueueRunConfig(workload=name, streams=args.streams, iterations=args.iterations,
                             warmup=args.warmup, device=args.device, keep_timeline=True,
                             detail_iterations=args.iterations, profiler_trace=str(trace_path))
        result = run_queue(cfg)
        if result["timing"]["kernel_source"] != "cupti":
            print(f"{name}: no kernel timestamps: {result['timing']['kernel_source_reason']}")
            return 2
        trace = json.loads(trace_path.read_text())
        if not args.keep_traces:
            trace_path.unlink()  # large; the figures below are what we keep
        acts = window_activities(trace)
        ref = reference_figures(acts)
        mapping, agreement = stream_mapping(result, acts)
        t1 = check_reported(result, ref, mapping, agreement, args.tolerance)
        prof = result["timing"]["profiler"]
        title = (f"{name} x{args.streams} streams, {args.iterations} detail iterations on "
                 f"{result['platform'].get('device_name')}: reported figures vs the raw trace "
                 f"({ref['activities']} device activities; profiler clock offset +/- "
                 f"{prof['clock_offset_uncertainty_us']:.1f} us)")
        texts.append(print_table(title, t1, "reported"))
        tl = cupti_timeline(result, trace)
        t2 = events_vs_cupti(tl, args.tolerance)
        title2 = (f"{name}: the same pass timed by CUDA events vs CUPTI, {len(tl['cupti'])}/"
                  f"{len(tl['ours'])} launches matched (information: events measure stream occupancy)")
        texts.append(print_table(title2, t2, "events"))
        failed |= any(r["verdict"] == "FAIL" for r in t1)
        passes = result["timing"]["passes"]
        summary["workloads"][name] = {
            "reported_vs_trace": t1, "events_vs_cupti": t2, "stream_mapping": {str(k): v for k, v in mapping.items()},
            "summary": result["summary"], "summary_source": result["summary_source"],
            "detail_relative_throughput": passes.get("detail_relative_throughput"),
        }
    (args.out / "crosscheck.json").write_text(json.dumps(summary, indent=2, default=str))
    (args.out / "crosscheck.md").write_text("\n\n".join(texts) + "\n")
    print("RESULT", "FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
