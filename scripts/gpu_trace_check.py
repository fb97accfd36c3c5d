#!/usr/bin/env python3
"""GPU-machine validation of the ``cuda`` probe set (run as root on the GPU box).

Unpacks bpftrace from the Debian packages carried in ``.bt/`` (see
``/work/shared/scripts/bpftrace-debs.sh``), mounts tracefs if needed, then with a real PyTorch
multi-stream workload measures: launches issued (by construction and by the torch profiler) vs
events counted, per-launch cost with and without the tracer, the launch-call histogram
(``cuda_calls``), launch -> GPU-start (CUPTI join) and lost events at the highest launch rate.

Usage:  python3 scripts/gpu_trace_check.py OUT_DIR [PHASE,PHASE...]   (default: every phase)
"""

from __future__ import annotations

import functools
import glob
import gzip
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "gpu-trace-out")
ONLY = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None
OUT.mkdir(parents=True, exist_ok=True)
RESULTS: dict = {"date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}


def save() -> None:
    (OUT / "gpu_trace_results.json").write_text(json.dumps(RESULTS, indent=1, default=str))


def setup_bpftrace() -> None:
    """dpkg -x the carried packages into /tmp/bt and point aorta-tui at that bpftrace."""
    debs = sorted(glob.glob(".bt/*.deb"))
    if not debs and not os.environ.get("AORTA_TUI_BPFTRACE"):
        raise SystemExit("no .bt/*.deb: run `bash /work/shared/scripts/bpftrace-debs.sh .bt` first")
    for d in debs:
        subprocess.run(["dpkg", "-x", d, "/tmp/bt"], check=True)
    if subprocess.run(["mountpoint", "-q", "/sys/kernel/tracing"]).returncode != 0:
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], check=False)
    libs = "/tmp/bt/usr/lib/x86_64-linux-gnu:/tmp/bt/lib/x86_64-linux-gnu"
    os.environ["LD_LIBRARY_PATH"] = libs + (":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else "")
    os.environ.setdefault("AORTA_TUI_BPFTRACE", "/tmp/bt/usr/bin/bpftrace")


def phase(name):
    def deco(fn):
        @functools.wraps(fn)
        def run(*a, **k):
            t = time.time()
            try:
                RESULTS[name] = fn(*a, **k)
            except Exception as exc:
                RESULTS[name] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-2000:]}
            RESULTS.setdefault("phase_wall_s", {})[name] = round(time.time() - t, 2)
            print(f"[{name}] {time.time() - t:.1f}s: {json.dumps(RESULTS[name], default=str)[:600]}", flush=True)
            save()
            return RESULTS[name]
        return run
    return deco


def main() -> None:
    setup_bpftrace()
    import torch

    from aorta_tui.trace.capability import trace_info
    from aorta_tui.trace.session import TraceSession

    dev = torch.device("cuda")
    RESULTS["machine"] = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "driver": subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True).stdout.strip(),
        "kernel": os.uname().release,
        "cpu_count": os.cpu_count(),
    }
    RESULTS["trace_info"] = trace_info()
    save()
    n_streams, per_stream = 4, 5000
    loop_n = 50000
    streams = [torch.cuda.Stream() for _ in range(n_streams)]
    bufs = [torch.zeros(256, device=dev) for _ in range(n_streams)]
    a = torch.zeros(256, device=dev)

    def loop(n: int) -> float:
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            a.add_(1.0)
        torch.cuda.synchronize()
        return (time.perf_counter() - t) / n * 1e6

    def multi(k: int) -> int:
        for _ in range(k):
            for s, b in zip(streams, bufs, strict=False):
                with torch.cuda.stream(s):
                    b.add_(1.0)
        torch.cuda.synchronize()
        return k * n_streams

    # warm up: CUDA context, kernels, caching allocator
    loop(2000)
    multi(200)

    @phase("baseline_no_tracer")
    def baseline():
        return {"us_per_launch_runs": [loop(loop_n) for _ in range(3)], "launches_per_run": loop_n}

    @phase("profiler_count")
    def profiler_count():
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            issued = multi(2000)
        kernels = sum(e.count for e in prof.key_averages() if e.device_type.name == "CUDA")
        return {"issued_by_construction": issued, "kernels_seen_by_profiler": kernels}

    def traced(probes, mode, body, **kw):
        t = time.perf_counter()
        s = TraceSession(probes, pid=os.getpid(), mode=mode, interval_s=0.5, **kw)
        s.start()
        attach_s = time.perf_counter() - t
        try:
            extra = body()
        finally:
            s.stop()
        r = s.result().to_json()
        return r, extra, attach_s

    def launch_metric(r, set_name, metric):
        m = r["probe_sets"][set_name]["metrics"][metric]
        return {k: m[k] for k in ("count", "records_sent_by_kernel", "records_received", "lost_events",
                                  "events_per_s")} | {
            "percentiles_us": m["histogram"]["percentiles"],
            "percentile_method": m["histogram"]["percentile_method"],
            "histogram_measures": m["histogram_measures"],
            "buckets_us": m["histogram"]["buckets"],
            "breakdown": m["breakdown"]}

    @phase("cuda_events")
    def cuda_events():
        def body():
            issued = multi(per_stream)
            us = loop(loop_n)
            return {"issued": issued + loop_n, "multi_stream_issued": issued, "us_per_launch_loop": us}
        r, extra, attach = traced(["cuda"], "events", body)
        return {"attach_s": attach, **extra, "uprobes": r["uprobes"],
                "launch": launch_metric(r, "cuda", "launch"),
                "observer_cost": r["probe_sets"]["cuda"]["observer_cost"],
                "lost_reported_by_bpftrace": r["lost_events_reported_by_bpftrace"],
                "malformed": r["malformed_lines"], "warnings": r["warnings"], "drained": r["drained_before_stop"],
                "calibration": r["calibration"]}

    @phase("cuda_aggregate")
    def cuda_aggregate():
        def body():
            issued = multi(per_stream)
            us = loop(loop_n)
            return {"issued": issued + loop_n, "us_per_launch_loop": us}
        r, extra, attach = traced(["cuda"], "aggregate", body)
        m = r["probe_sets"]["cuda"]["metrics"]["launch"]
        return {**extra, "count": m["count"], "breakdown": m["breakdown"], "lost": m["lost_events"]}

    @phase("cuda_calls_events")
    def cuda_calls():
        def body():
            issued = multi(per_stream)
            us = loop(loop_n)
            return {"issued": issued + loop_n, "us_per_launch_loop": us}
        r, extra, attach = traced(["cuda_calls"], "events", body)
        return {**extra, "uprobes": r["uprobes"], "launch_call": launch_metric(r, "cuda_calls", "launch_call"),
                "observer_cost": r["probe_sets"]["cuda_calls"]["observer_cost"]}

    @phase("cupti_join")
    def cupti():
        import numpy as np
        from torch.profiler import ProfilerActivity, profile

        from aorta_tui.trace import cupti_join
        raw = OUT / "join_raw.jsonl.gz"
        trace_path = Path("/tmp/prof_trace.json")
        def body():
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                issued = multi(1000)
            prof.export_chrome_trace(str(trace_path))
            return {"issued": issued}
        # the profiler starts inside the traced window: launches are counted in both
        r, extra, _ = traced(["cuda"], "events", body, raw_path=raw)
        ts, st = [], []
        with gzip.open(raw, "rt") as fh:
            for ln in fh:
                rec = json.loads(ln)
                if rec["metric"] == "launch":
                    ts.append(rec["ts_ns"])
                    st.append(rec["key"])
        launches, kernels = cupti_join.load_profiler_trace(trace_path)
        j = cupti_join.join(np.array(ts, dtype=np.int64), np.array(st, dtype=np.int64), launches, kernels)
        raw.unlink(missing_ok=True)
        return {**extra, **j}

    import threading

    def worker(s, b, n):
        with torch.cuda.stream(s):
            for _ in range(n):
                b.add_(1.0)

    def run_threads(n: int = 40000) -> dict:
        # several Python threads, each on its own stream, to push the launch rate up
        th = [threading.Thread(target=worker, args=(s, b, n)) for s, b in zip(streams, bufs, strict=True)]
        t = time.perf_counter()
        for x in th:
            x.start()
        for x in th:
            x.join()
        torch.cuda.synchronize()
        return {"issued": n * len(th), "launches_per_s": n * len(th) / (time.perf_counter() - t)}

    @phase("max_rate_no_tracer")
    def max_rate_base():
        return run_threads()

    @phase("max_rate_threads")
    def max_rate():
        r, extra, _ = traced(["cuda"], "events", run_threads)
        m = r["probe_sets"]["cuda"]["metrics"]["launch"]
        return {**extra, "count": m["count"], "sent": m["records_sent_by_kernel"],
                "lost": m["lost_events"], "lost_reported_by_bpftrace": r["lost_events_reported_by_bpftrace"]}

    @phase("cli_other_process")
    def cli_phase():
        # the tracer in its own process (aorta-tui trace queue --pid): no GIL shared with the workload
        out = OUT / "cli_result.json"
        p = subprocess.Popen([sys.executable, "-m", "aorta_tui", "trace", "queue", "--probes", "cuda",
                              "--pid", str(os.getpid()), "-o", str(out)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        t = time.time()
        line = ""
        while "tracing" not in line and time.time() - t < 90 and p.poll() is None:
            line = p.stderr.readline()
        if "tracing" not in line:
            p.kill()
            return {"error": "CLI did not start tracing", "stderr": line + p.stderr.read()[-2000:]}
        us = loop(loop_n)
        issued = multi(2500) + loop_n
        p.send_signal(2)
        p.wait(timeout=60)
        r = json.loads(out.read_text())
        m = r["probe_sets"]["cuda"]["metrics"]["launch"]
        return {"exit_code": p.returncode, "issued": issued, "us_per_launch_loop": us, "count": m["count"],
                "sent": m["records_sent_by_kernel"], "lost": m["lost_events"],
                "streams": {k: v["count"] for k, v in m["breakdown"].items()},
                "observer_cost": r["probe_sets"]["cuda"]["observer_cost"]}

    @phase("after_baseline")
    def after():
        return {"us_per_launch_runs": [loop(loop_n) for _ in range(3)]}

    @phase("leftovers")
    def leftovers():
        ps = subprocess.run(["pgrep", "-x", "bpftrace"], capture_output=True, text=True).stdout.split()
        ue = Path("/sys/kernel/tracing/uprobe_events")
        return {"bpftrace_processes": ps, "uprobe_events": ue.read_text() if ue.exists() else None}

    for fn in (baseline, profiler_count, cuda_events, cuda_aggregate, cuda_calls, cupti, max_rate_base,
               max_rate, cli_phase, after, leftovers):
        if ONLY is None or fn.__name__ in ONLY:
            fn()


if __name__ == "__main__":
    main()
