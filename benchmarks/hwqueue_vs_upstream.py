#!/usr/bin/env python3
"""Throughput of aorta-tui's queue harness vs amd-aorta 0.3.0's, and our harness overhead.

Part 1 runs each workload at N streams with our harness (this process) and with upstream's
``StreamHarness`` (one subprocess, upstream importable from ``--upstream-site``), and prints
both throughputs in the same base unit and their ratio (ours / upstream). The two projects
implement the workloads independently with the same nominal sizes; ``tiny_kernel_stress`` is
run with ``order=per_stream`` to issue in upstream's order.

Part 0 (``--all``) first runs every one of the fifteen workloads once at N streams (short) and
prints a table of the main figures, so a GPU session shows them all working.

Part 2 measures our harness's overhead: the same workload instance's launches issued by a
hand-written loop (one stream context per run of launches on a stream, as upstream writes it,
the waits it needs, per-iteration sync, no timing) against the
harness's default run, whose throughput comes from its measure pass (one end marker per stream
per iteration), and against ``--timing events`` (two events and two clock reads per launch).
Each repetition is a fresh process that runs the three in that order (the default run last:
its detail pass uses the profiler, which slows later launches in the same process); the
figure is the median of the per-repetition ratios, with min vs min beside it. Our side of
part 1 runs each workload in a fresh process for the same reason. ``--overhead-reps 0`` skips it.

Part 3 (the launch floor): ``tiny_kernel_stress`` at N streams in upstream's order, with and
without ``--graph``, alternating, each run a fresh process. Every run measures, in its own
process, the bare eager loop and the graph replay of its own launches (``floor`` in the result)
and divides its per-launch cost by them; the table gives both ratios, the per-kernel host and
wall cost, and upstream's per-kernel cost from part 1 (its wall over the kernels it issued).
Targets (issue 20): <= 1.1x the eager floor without --graph, <= 1.2x the replay floor with it.

Upstream is imported from ``--upstream-site`` (``pip install --no-deps --target DIR
amd_aorta-0.3.0-py3-none-any.whl``: its harness needs nothing beyond torch).

    python benchmarks/hwqueue_vs_upstream.py --upstream-site /tmp/site --out /tmp/bench
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

UNIT_SCALE = {"TFLOP/s": 1e12, "TFLOPS": 1e12, "GFLOP/s": 1e9, "GFLOPS": 1e9,
              "tokens/s": 1.0, "tokens/sec": 1.0}
BASE_UNIT = {"TFLOP/s": "FLOP/s", "TFLOPS": "FLOP/s", "GFLOP/s": "FLOP/s", "GFLOPS": "FLOP/s",
             "tokens/s": "tokens/s", "tokens/sec": "tokens/s"}
PARAMS = {"tiny_kernel_stress": {"order": "per_stream"}}

UPSTREAM_CODE = r"""
import json, sys
from aorta.hw_queue_eval.core.harness import HarnessConfig, StreamHarness
from aorta.hw_queue_eval.workloads.registry import get_workload
names, streams, iters, warm = sys.argv[1].split(","), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for name in names:
    try:
        h = StreamHarness(HarnessConfig(stream_count=streams, warmup_iterations=warm,
                                        measurement_iterations=iters, use_multi_gpu=False,
                                        device="cuda:0"))
        r = h.run_workload(get_workload(name, use_multi_gpu=False))
        out = {"workload": name, "throughput": r.throughput, "unit": r.throughput_unit,
               "total_time_ms": r.total_time_ms}
    except Exception as exc:
        out = {"workload": name, "error": f"{type(exc).__name__}: {exc}"}
    print("UPSTREAM_RESULT " + json.dumps(out), flush=True)
"""


def run_upstream(site: str, names: list[str], streams: int, iters: int, warm: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=site + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", UPSTREAM_CODE, ",".join(names), str(streams),
                           str(iters), str(warm)], env=env, capture_output=True, text=True,
                          timeout=600)
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith("UPSTREAM_RESULT "):
            d = json.loads(line.split(" ", 1)[1])
            out[d["workload"]] = d
    if not out:
        out["_error"] = (proc.stderr or proc.stdout)[-2000:]
    return out


def hand_loop_wall(name: str, streams: int, iters: int, warm: int, params: dict[str, Any]) -> float:
    """Issue the workload's launches with no instrumentation; seconds for ``iters`` iterations."""
    import torch

    from aorta_tui.hwqueue.workloads import workload_class
    from aorta_tui.hwqueue.workloads.base import QueueWorkloadContext

    wl = workload_class(name)(params)
    ctx = QueueWorkloadContext(torch=torch, dtype=torch.float32, stream_devices=["cuda:0"] * streams,
                          backend="cuda")
    wl.setup(ctx)
    ss = [torch.cuda.Stream() for _ in range(streams)]
    plans = [wl.iteration(i) for i in range(warm + iters)]
    needed = {w for plan in plans for la in plan for w in la.waits}

    def one(plan: list[Any]) -> None:
        # as upstream writes it: one `with torch.cuda.stream(s)` block per run of launches on a
        # stream, an event only where a later launch waits on this one
        done: dict[int, Any] = {}
        j, n = 0, len(plan)
        while j < n:
            s = ss[plan[j].stream]
            with torch.cuda.stream(s):
                while j < n and ss[plan[j].stream] is s:
                    la = plan[j]
                    for w in la.waits:
                        s.wait_event(done[w])
                    la.fn()
                    if j in needed:
                        done[j] = torch.cuda.Event()
                        done[j].record(s)
                    j += 1
        torch.cuda.synchronize()

    for plan in plans[:warm]:
        one(plan)
    t0 = time.perf_counter()
    for plan in plans[warm:]:
        one(plan)
    wall = time.perf_counter() - t0
    wl.cleanup()
    return wall


def harness_wall(name: str, streams: int, iters: int, warm: int, params: dict[str, Any],
                 timing: str = "auto", detail_iterations: int = 20) -> dict[str, Any]:
    from aorta_tui.hwqueue.harness import QueueRunConfig
    from aorta_tui.hwqueue.run import run_queue

    return run_queue(QueueRunConfig(workload=name, streams=streams, iterations=iters, warmup=warm,
                                    device="cuda", params=dict(params), timing=timing,
                                    detail_iterations=detail_iterations))


def overhead_child(name: str, streams: int, iters: int, warm: int) -> None:
    """One overhead repetition in a fresh process: the profiler-free runs first, the default run
    last, because its detail pass uses the profiler, which may slow later launches in the same
    process (benchmarks/profiler_after_effect.py)."""
    params = PARAMS.get(name, {})
    out = {"hand_s": hand_loop_wall(name, streams, iters, warm, params),
           "events_s": harness_wall(name, streams, iters, warm, params, timing="events")["metrics"]["wall_s"],
           "harness_s": harness_wall(name, streams, iters, warm, params,
                                     detail_iterations=1)["metrics"]["wall_s"]}
    print("CHILD_RESULT " + json.dumps(out), flush=True)


def overhead_in_child(name: str, args: argparse.Namespace) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, "--overhead-child", name, "--streams", str(args.streams),
                           "--iterations", str(args.iterations), "--warmup", str(args.warmup)],
                          capture_output=True, text=True, timeout=600)
    for line in proc.stdout.splitlines():
        if line.startswith("CHILD_RESULT "):
            return json.loads(line.split(" ", 1)[1])
    raise RuntimeError(f"overhead child for {name} failed: {(proc.stderr or proc.stdout)[-1500:]}")


def isolated_run(name: str, streams: int, iters: int, warm: int, detail_iterations: int,
                 params: dict[str, Any], device: str = "cuda") -> dict[str, Any]:
    """Our harness's default run of ``name`` in a fresh process (the same path as `queue sweep`)."""
    from aorta_tui.hwqueue.harness import QueueRunConfig
    from aorta_tui.hwqueue.repeat import run_isolated

    return run_isolated(QueueRunConfig(workload=name, streams=streams, iterations=iters, warmup=warm,
                                       device=device, params=dict(params),
                                       detail_iterations=detail_iterations), name)


def workload_class(name: str) -> Any:
    from aorta_tui.hwqueue.workloads import workload_class as find

    return find(name)


def floor_runs(args: argparse.Namespace, upstream_rounds: list[dict[str, Any]]) -> str:
    """Part 3: tiny_kernel_stress with and without --graph against its in-process floors."""
    from aorta_tui.hwqueue.harness import QueueRunConfig
    from aorta_tui.hwqueue.repeat import run_isolated

    name = "tiny_kernel_stress"
    params = PARAMS.get(name, {})
    runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    errors: list[str] = []
    for rnd in range(args.floor_reps):
        for graph in (False, True):  # alternating, so drift of the machine hits both alike
            cfg = QueueRunConfig(workload=name, streams=args.streams, iterations=args.iterations,
                                 warmup=args.warmup, device=args.device, params=dict(params),
                                 graph=graph, detail_iterations=1)
            try:
                r = run_isolated(cfg, f"{name} graph={graph}")
            except Exception as exc:  # recorded and shown; the other runs still go
                errors.append(f"graph={graph}: {type(exc).__name__}: {str(exc).strip()[:500]}")
                print(f"floor round {rnd + 1} graph={graph}: {errors[-1]}", flush=True)
                continue
            runs[graph].append({"summary": r["summary"], "floor": r["floor"], "graph": r["graph"]})
            print(f"floor round {rnd + 1} graph={graph}: {r['summary']['eager_floor_ratio']} "
                  f"{r['summary']['graph_floor_ratio']}", flush=True)
    (args.out / "floor.json").write_text(json.dumps(
        {"eager": runs[False], "graph": runs[True], "errors": errors}, indent=2, default=str))
    kernels = 4 * 100 * args.streams  # upstream's tiny op: mul, add, abs, clamp; 100 per stream
    up = [u[name]["total_time_ms"] / 1e3 / (args.iterations * kernels) * 1e6
          for u in upstream_rounds if "total_time_ms" in u.get(name, {})]
    rows = []
    med = lambda xs: "n/a" if not xs else f"{statistics.median(xs):.4g}"  # noqa: E731
    for graph in (False, True):
        rs = runs[graph]
        num = lambda key, rs=rs: [r["summary"][key] for r in rs  # noqa: E731
                                  if isinstance(r["summary"].get(key), (int, float))]
        fl = lambda key, rs=rs: [r["floor"][key] for r in rs  # noqa: E731
                                 if isinstance(r["floor"].get(key), (int, float))]
        target = "<= 1.2x graph floor" if graph else "<= 1.1x eager floor"
        rows.append(["--graph" if graph else "eager", med(num("cost_us_per_kernel")),
                     med(num("host_us_per_kernel")), med(fl("eager_us_per_kernel")),
                     med(fl("graph_us_per_kernel")), med(num("eager_floor_ratio")),
                     med(num("graph_floor_ratio")), target])
    rows.append(["upstream 0.3.0 (part 1)", med(up), "-", "-", "-", "-", "-", "-"])
    return (f"\n\n{name} x{args.streams} streams ({params or 'defaults'}), {args.iterations} "
            f"iterations, median of {args.floor_reps} alternating fresh-process runs per mode; "
            "floors measured inside each run\n\n"
            + table(["mode", "us/kernel (wall)", "host us/kernel", "eager floor us/kernel",
                     "graph floor us/kernel", "x eager floor", "x graph floor", "target"], rows)
            + "\n" + "".join(f"error: {e}\n" for e in errors))


def run_all(args: argparse.Namespace) -> str:
    from aorta_tui.hwqueue.workloads import WORKLOADS

    rows, record = [], {}
    for name in WORKLOADS:
        t = time.perf_counter()
        try:
            r = isolated_run(name, args.streams, args.all_iterations, 2, 20, {})
        except Exception as exc:  # keep going: the table says which one failed and why
            record[name] = {"error": f"{type(exc).__name__}: {exc}"}
            rows.append([name, "ERROR", str(exc)[:70], "", "", "", "", ""])
            print(f"{name}: ERROR {exc}", flush=True)
            continue
        s, m = r["summary"], r["metrics"]
        record[name] = {"summary": s, "unavailable": r["unavailable"], "per_stream": m["per_stream"],
                        "memory": m["memory"], "launch_delay_unmeasurable": m["launch_delay_unmeasurable"],
                        "seconds": time.perf_counter() - t}
        f = lambda v: "n/a" if v is None else f"{v:.4g}"  # noqa: E731
        rows.append([name, f"{f(s['throughput'])} {r['workload']['throughput_unit']}", f(s["latency_p50_ms"]),
                     f(s["latency_p99_ms"]), f(s["achieved_concurrency"]), f(s["launch_delay_mean_us"]),
                     f(s["switch_overhead_us"]), f(s["queue_depth_max"])])
        print(f"{name}: {rows[-1][1:]}", flush=True)
    (args.out / "all_workloads.json").write_text(json.dumps(record, indent=2, default=str))
    return (f"all workloads at {args.streams} streams, {args.all_iterations} iterations\n\n"
            + table(["workload", "throughput", "p50 ms", "p99 ms", "concurrency", "launch delay us",
                     "switch us", "max depth"], rows) + "\n\n")


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                      *map(line, rows)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="hetero_kernels,tiny_kernel_stress,moe,large_gemm_only,continuous_batch")
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--overhead-workloads", default="hetero_kernels,tiny_kernel_stress,large_gemm_only")
    ap.add_argument("--overhead-reps", type=int, default=7, help="0 skips part 2")
    ap.add_argument("--floor-reps", type=int, default=3, help="part 3 rounds (0 skips it)")
    ap.add_argument("--throughput-reps", type=int, default=3)
    ap.add_argument("--upstream-site", default="/tmp/site")
    ap.add_argument("--device", default="cuda", help="our side's device (cpu: a dry run; upstream "
                    "then fails and says so, --graph runs are refused)")
    ap.add_argument("--out", type=Path, default=Path("hwqueue-bench"))
    ap.add_argument("--all", action="store_true", help="first run all fifteen workloads (short)")
    ap.add_argument("--all-iterations", type=int, default=10)
    ap.add_argument("--overhead-child", metavar="WORKLOAD", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.overhead_child:
        overhead_child(args.overhead_child, args.streams, args.iterations, args.warmup)
        return 0
    names = [n for n in args.workloads.split(",") if n]
    args.out.mkdir(parents=True, exist_ok=True)
    t0_text = run_all(args) if args.all else ""

    # rounds alternate upstream and ours so that drift of the machine hits both alike
    rounds: list[tuple[dict[str, Any], dict[str, float]]] = []
    units: dict[str, str] = {}
    record: dict[str, Any] = {"upstream": [], "ours": [], "overhead": {}}
    for rnd in range(args.throughput_reps):
        upstream = run_upstream(args.upstream_site, names, args.streams, args.iterations, args.warmup)
        ours_round: dict[str, Any] = {}
        for name in names:
            units[name] = workload_class(name).throughput_unit
            try:  # a failing workload is a row that says so, never the end of the benchmark
                r = isolated_run(name, args.streams, args.iterations, args.warmup, 1,
                                 PARAMS.get(name, {}), args.device)
            except Exception as exc:
                ours_round[name] = f"error: {type(exc).__name__}: {str(exc).strip()[:200]}"
                continue
            ours_round[name] = r["summary"]["throughput"] * UNIT_SCALE[units[name]]
        rounds.append((upstream, ours_round))
        record["upstream"].append(upstream)
        record["ours"].append(ours_round)
        print(f"round {rnd + 1}: ours {ours_round}", flush=True)
    rows = []
    for name in names:
        values = [o[name] for _, o in rounds if isinstance(o.get(name), float)]
        if not values:
            rows.append([name, BASE_UNIT[units[name]], str(rounds[0][1].get(name))[:60], "-", "-"])
            continue
        ours = statistics.median(values)
        theirs_all = [u[name]["throughput"] * UNIT_SCALE[u[name]["unit"]] for u, _ in rounds
                      if "throughput" in u.get(name, {}) and u[name].get("unit") in UNIT_SCALE]
        if theirs_all:
            theirs = statistics.median(theirs_all)
            ratio = f"{ours / theirs:.3f}" if theirs > 0 else "-"
            theirs_s = f"{theirs:.4g}"
        else:
            up = rounds[0][0]
            theirs_s, ratio = f"error: {up.get(name, {}).get('error', up.get('_error', 'missing'))[:60]}", "-"
        rows.append([name, BASE_UNIT[units[name]], f"{ours:.4g}", theirs_s, ratio])
        print(f"{name}: ours {ours:.4g}  upstream {theirs_s}  ratio {ratio}", flush=True)
    t1 = table(["workload", "unit", "aorta-tui", "amd-aorta 0.3.0", "ratio"], rows)

    orows = []
    overhead_names = [n for n in args.overhead_workloads.split(",") if n] if args.overhead_reps else []
    for name in overhead_names:
        reps = [overhead_in_child(name, args) for _ in range(args.overhead_reps)]
        record["overhead"][name] = reps
        hand = [r["hand_s"] for r in reps]
        ours = [r["harness_s"] for r in reps]
        per_launch = [r["events_s"] for r in reps]
        # each rep's three runs share a process and a minute of the machine's state: the
        # per-rep ratio removes the drift between reps that dominates on a shared host
        ratio_o = statistics.median(r["harness_s"] / r["hand_s"] for r in reps)
        ratio_e = statistics.median(r["events_s"] / r["hand_s"] for r in reps)
        orows.append([name, "median of per-rep ratios", f"{statistics.median(hand) * 1e3:.2f}",
                      f"{statistics.median(ours) * 1e3:.2f}", f"{(ratio_o - 1) * 100:+.2f}%",
                      f"{statistics.median(per_launch) * 1e3:.2f}", f"{(ratio_e - 1) * 100:+.2f}%"])
        h, o, e = min(hand), min(ours), min(per_launch)
        orows.append([name, "min vs min", f"{h * 1e3:.2f}", f"{o * 1e3:.2f}", f"{(o / h - 1) * 100:+.2f}%",
                      f"{e * 1e3:.2f}", f"{(e / h - 1) * 100:+.2f}%"])
        print(f"overhead {name}: {orows[-2]} {orows[-1]}", flush=True)
    t2 = table(["workload", "estimate", "hand loop ms", "harness (auto: measure pass) ms", "overhead",
                "--timing events ms", "overhead"], orows)
    t1_text = (f"throughput at {args.streams} streams, {args.iterations} iterations, "
               f"per_iteration sync, median of {args.throughput_reps} alternating rounds\n\n{t1}\n\n")
    (args.out / "bench.md").write_text(t0_text + t1_text)  # kept if a later part is cut short
    t3 = floor_runs(args, record["upstream"]) if args.floor_reps else ""
    t2_text = (f"harness overhead ({args.overhead_reps} reps, each a fresh process running the hand "
               f"loop, --timing events and the default run; {args.iterations} iterations; target "
               f"<= 2% for the figures the harness reports as throughput)\n\n{t2}\n"
               if orows else "")
    text = t0_text + t1_text + t2_text + t3
    print(text)
    (args.out / "bench.md").write_text(text)
    (args.out / "bench.json").write_text(json.dumps(record, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
