#!/usr/bin/env python3
"""Trace pipeline speed: 1M recorded event lines through parser + statistics, against upstream.

Part 1 (always): the same 500k amdgpu jobs (submit -> dispatch on 4 rings) are written in
   * our record format (one ``@R`` line per job: submit time, pid, job, wait; plus heartbeats),
     1M jobs -> 1M lines, parsed in the reader's batches and folded into the statistics;
   * amd-aorta 0.3.0's format (``SUBMIT|ts|pid|comm|ring|fence`` and ``DISPATCH|...``: two lines
     per job), 1M lines, parsed and paired by upstream's own ``BPFQueueTracer`` code, run with
     upstream's interpreter (/tmp/upstream/bin/python) in a subprocess.
   Both print lines/s and jobs/s; the ratio is measured in the same run.
Part 2 (root with bpftrace and gcc): aggregate mode is exact at any rate: a C program issues
   ioctls as fast as it can, traced by the ``ioctl`` probe set in aggregate and events modes;
   the counts are compared with the number issued.

Part 3 (``--live``/``--live-only``; root, bpftrace, gcc): the live events-mode path at known
   rates: a bpftrace timer probe prints N launch records (``--records``) at each rate of
   ``--rates-k`` (thousands/s), each counted in the kernel (``@sent``), through the real
   ``TraceSession`` (runner, parser, statistics, lost count = sent - received), ``before`` (the
   pipeline until 2026-12-01: line-buffered bpftrace stdout, 64-page perf buffers, every field a
   printf argument) and ``after``, alternated at every rate. Prints received/sent, lost and the
   highest rate with 0 lost per variant.
Part 4 (same): real uprobes: benchmarks/launch_rate.c calls a fake libcuda's cuLaunchKernel as
   fast as it can from 1 and 2 threads, traced by the ``cuda`` set, before and after.

Usage: python benchmarks/trace_pipeline.py [--lines N] [--no-kernel] [--live | --live-only] [--json F]
Exit 3 when upstream is not installed (the comparison is the point).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

UPSTREAM_PY = Path("/tmp/upstream/bin/python")
UPSTREAM_PKG = Path("/tmp/upstream/lib/python3.11/site-packages/aorta/hw_queue_eval/core/ebpf_tracer.py")
RINGS = ["gfx_0.0.0", "comp_1.0.0", "comp_1.1.0", "sdma0"]


def make_jobs(n: int, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    submit = 10_000_000_000 + np.cumsum(rng.integers(500, 5000, n))
    wait = rng.lognormal(9.5, 0.8, n).astype(np.int64) + 1
    return {"submit": submit, "wait": wait, "ring": rng.integers(0, len(RINGS), n),
            "job": np.arange(n) + 0x100000}


def ours_lines(jobs: dict[str, np.ndarray], mid: int = 1) -> list[str]:
    out = []
    for i, (ts, w, r, j) in enumerate(zip(jobs["submit"].tolist(), jobs["wait"].tolist(),
                                          jobs["ring"].tolist(), jobs["job"].tolist(), strict=True)):
        out.append(f"@R {mid} {ts} 4242 4243 {j} {w} 1 {RINGS[r]}\n")
        if i % 2000 == 1999:
            out.append(f"@H {ts}\n")
    return out


def upstream_lines(jobs: dict[str, np.ndarray]) -> list[str]:
    out = []
    for ts, w, r, j in zip(jobs["submit"].tolist(), jobs["wait"].tolist(), jobs["ring"].tolist(),
                           jobs["job"].tolist(), strict=True):
        out.append(f"SUBMIT|{ts}|4242|python|{r}|{j}\n")
        out.append(f"DISPATCH|{ts + w}|0|kworker|{r}|{j}\n")
    return out


def run_ours(lines: list[str], batch: int = 20_000) -> dict:
    from aorta_tui.trace import probes
    from aorta_tui.trace.parser import RecordParser
    from aorta_tui.trace.stream_stats import MetricStats, split_batch

    metric = probes.get("amdgpu").metric("cs_to_run")
    t = time.perf_counter()
    parser = RecordParser()
    stats = {1: MetricStats(metric)}
    for i in range(0, len(lines), batch):
        split_batch(parser.feed(lines[i : i + batch]), stats)
    summary = stats[1].summary(wall_s=1.0)
    dt = time.perf_counter() - t
    return {"seconds": dt, "jobs": summary.count, "p99_us": summary.histogram.percentiles["p99"],
            "rings": len(summary.breakdown), "malformed": parser.malformed_total}


UPSTREAM_RUNNER = r"""
import importlib.util, json, sys, time
from pathlib import Path
# load the module by path: the package's __init__ imports torch, which the parser does not need
spec = importlib.util.spec_from_file_location("upstream_ebpf_tracer", sys.argv[3])
mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mod
spec.loader.exec_module(mod)
BPFQueueTracer = mod.BPFQueueTracer
t = time.perf_counter()
tr = BPFQueueTracer(target_pid=None, sudo=False, output_dir=Path(sys.argv[2]))
tr._output_path = Path(sys.argv[1])
events = tr._parse_output()
m = tr._compute_metrics(events, 10**9)
d = m.to_dict()
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "jobs": len(m.submission_to_dispatch_us), "p99_us": d["p99_submit_to_dispatch_us"]}))
"""


def run_upstream(lines: list[str], tmp: Path) -> dict:
    path = tmp / "upstream_lines.log"
    path.write_text("".join(lines))
    r = subprocess.run([str(UPSTREAM_PY), "-c", UPSTREAM_RUNNER, str(path), str(tmp), str(UPSTREAM_PKG)],
                       capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        raise SystemExit(f"upstream run failed: {r.stderr[-500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def kernel_part(n: int) -> dict | str:
    if os.geteuid() != 0 or shutil.which("gcc") is None:
        return "skipped: needs root, bpftrace and gcc"
    from aorta_tui.trace.session import TraceSession

    here = Path(__file__).resolve().parents[1] / "tests" / "trace" / "fakelib" / "driver.c"
    tmp = Path(tempfile.mkdtemp(prefix="aorta-bench-"))
    drv = tmp / "driver"
    subprocess.run(["gcc", "-O2", "-o", str(drv), str(here), "-ldl"], check=True)
    out = {}
    for mode in ("aggregate", "events"):
        s = TraceSession(["ioctl"], command=[str(drv), "ioctl", "-", str(n), "0", "0"], mode=mode,
                         calibrate=False)
        t = time.perf_counter()
        with s:
            s.wait(timeout=600)
        dt = time.perf_counter() - t
        m = s.result().to_json()["probe_sets"]["ioctl"]["metrics"]["ioctl"]
        counted = m["breakdown"].get(str(0x541B), {}).get("count", 0)
        out[mode] = {"issued": n, "counted": counted, "exact": counted == n,
                     "rate_per_s": n / dt, "lost_events": m["lost_events"],
                     "sent_by_kernel": m["records_sent_by_kernel"]}
    shutil.rmtree(tmp, ignore_errors=True)
    return out


# -- part 3 and 4: the live events-mode pipeline, before and after ------------------------------
LAUNCH_RATE_C = Path(__file__).resolve().parent / "launch_rate.c"
# "before": the events pipeline as it was until 2026-12-01 (bpftrace's default line-buffered
# stdout, one write per record; 64-page perf buffers; every record field a printf argument)
VARIANTS = ("before", "after")


@contextlib.contextmanager
def pipeline_variant(name: str) -> Iterator[None]:
    """Run the real session as it is (``after``) or as it was (``before``)."""
    from aorta_tui.trace import program, runner

    if name == "after":
        yield
        return
    saved = (runner.BpftraceRunner.output_buffering, runner.BpftraceRunner.perf_rb_pages,
             program.FLUSH_PAD, program._printf_field)
    runner.BpftraceRunner.output_buffering = "line"
    runner.BpftraceRunner.perf_rb_pages = None
    program.FLUSH_PAD = ""
    program._printf_field = lambda tok: ("%lld", [f"(int64)({tok})"])
    try:
        yield
    finally:
        (runner.BpftraceRunner.output_buffering, runner.BpftraceRunner.perf_rb_pages,
         program.FLUSH_PAD, program._printf_field) = saved


def generator_text(mid: int, per_ms: int, total: int) -> str:
    """A bpftrace program that prints ``per_ms`` launch records every millisecond (one timer
    probe, so no traced thread pays the per-record kernel cost) until ``total``, each counted in
    the kernel in ``@sent`` exactly as the real probes count theirs, in the record format and
    with the heartbeat of :func:`aorta_tui.trace.program.render` (before or after)."""
    from aorta_tui.trace import probes, program

    rec = program._expand_emit(["launch", "nsecs", "16", "0", "5"], mid, probes.get("cuda").metric("launch"),
                               "events")
    return "\n".join([
        "BEGIN { @sent[0] = count(); @n = 0; }",
        f"interval:ms:1 /@n < {total}/ {{ $i = 0; while ($i < {per_ms}) {{ {rec} $i++; }} @n = @n + {per_ms}; }}",
        f'interval:ms:200 {{ printf("@H %lld\\n", nsecs); print(@sent); {program.FLUSH_PAD} }}',
        f'END {{ printf("@H %lld\\n", nsecs); print(@sent); clear(@sent); {program.FLUSH_PAD} }}', ""])


def _fast_libcuda(tmp: Path) -> Path:
    lib = tmp / "fast" / "libcuda.so.1"
    lib.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["gcc", "-O0", "-DFAKE_LIBCUDA", "-shared", "-fPIC", "-o", str(lib), str(LAUNCH_RATE_C)],
                   check=True, capture_output=True)
    return lib


def _launch_id(prog: Any) -> int:
    return next(mid for mid, (ps, m) in prog.metric_ids.items() if ps == "cuda" and m.name == "launch")


def _launch_summary(s: Any) -> dict[str, Any]:
    r = s.result().to_json()
    m = r["probe_sets"]["cuda"]["metrics"]["launch"]
    st = s._stats[_launch_id(s.program)]
    span = (st.last_ts - st.first_ts) / 1e9 if st.first_ts is not None and st.last_ts > st.first_ts else None
    return {"sent_by_kernel": m["records_sent_by_kernel"], "received": m["records_received"],
            "lost": m["lost_events"], "bpftrace_reported_lost": r["lost_events_reported_by_bpftrace"],
            "received_per_s": m["records_received"] / span if span else None,
            "drained": r["drained_before_stop"]}


def generator_run(variant: str, per_ms: int, total: int, lib: Path) -> dict[str, Any]:
    """The generator's records through the real session: runner, parser, statistics, lost count."""
    from aorta_tui.trace import program as program_mod
    from aorta_tui.trace.session import TraceSession

    real_render = program_mod.render

    def render(*args: Any, **kw: Any) -> Any:
        prog = real_render(*args, **kw)
        prog.text = generator_text(_launch_id(prog), per_ms, total)
        return prog

    seconds = total / (per_ms * 990) + 0.5  # the 1 ms timer ticks ~990 times a second here
    with pipeline_variant(variant):
        program_mod.render = render
        try:
            s = TraceSession(["cuda"], command=["sleep", f"{seconds:.2f}"], mode="events", calibrate=False,
                             library_paths={"cuda": str(lib)}, device_timestamps="off")
            with s:
                s.wait_target(timeout=600)
        finally:
            program_mod.render = real_render
    return {"variant": variant, "asked_per_s": per_ms * 1000, **_launch_summary(s)}


def uprobe_run(variant: str, lib: Path, exe: Path, n: int, threads: int) -> dict[str, Any]:
    """Real uprobes: a C loop calls the fake libcuda's cuLaunchKernel as fast as it can."""
    from aorta_tui.trace.session import TraceSession

    with pipeline_variant(variant):
        s = TraceSession(["cuda"], command=[str(exe), str(lib), str(n), str(threads), "0"], mode="events",
                         calibrate=False, library_paths={"cuda": str(lib)}, device_timestamps="off",
                         command_stdout_to_stderr=False)
        with s:
            s.wait_target(timeout=600)
    return {"variant": variant, "threads": threads, "launches": n, **_launch_summary(s)}


def live_part(rates_k: list[int], total: int, uprobe_n: int) -> dict[str, Any] | str:
    if os.geteuid() != 0 or shutil.which("gcc") is None or shutil.which("bpftrace") is None:
        return "skipped: needs root, bpftrace and gcc"
    tmp = Path(tempfile.mkdtemp(prefix="aorta-live-"))
    lib = _fast_libcuda(tmp)
    exe = tmp / "launch_rate"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(exe), str(LAUNCH_RATE_C), "-ldl"], check=True)
    out: dict[str, Any] = {"generator": [], "uprobes": []}
    for k in rates_k:  # variants alternate at every rate, so machine load falls on both
        for v in VARIANTS:
            r = generator_run(v, k, total, lib)
            out["generator"].append(r)
            print(f"  generator {v:>6} {k * 1000 / 1e3:>5.0f}k/s asked: received {r['received']:>8} of "
                  f"{r['sent_by_kernel']:>8} sent (lost {r['lost']}, bpftrace said {r['bpftrace_reported_lost']}) "
                  f"at {(r['received_per_s'] or 0) / 1e3:.0f}k/s", flush=True)
    for v in VARIANTS:
        for threads in (1, 2):
            r = uprobe_run(v, lib, exe, uprobe_n, threads)
            out["uprobes"].append(r)
            print(f"  uprobes   {v:>6} {threads} thread(s): received {r['received']:>8} of {r['sent_by_kernel']:>8} "
                  f"(lost {r['lost']}) at {(r['received_per_s'] or 0) / 1e3:.0f}k launches/s", flush=True)
    for v in VARIANTS:
        clean = [r["asked_per_s"] for r in out["generator"] if r["variant"] == v and r["lost"] == 0
                 and r["received"] == r["sent_by_kernel"]]
        out[f"{v}_sustained_0_lost_per_s"] = max(clean, default=None)
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--kernel-ioctls", type=int, default=300_000)
    ap.add_argument("--no-kernel", action="store_true")
    ap.add_argument("--live", action="store_true", help="also parts 3-4: the live events pipeline, before/after")
    ap.add_argument("--live-only", action="store_true", help="parts 3-4 only (no upstream needed)")
    ap.add_argument("--rates-k", default="50,100,150,200,250,300",
                    help="parts 3: generator rates, thousands of records/s")
    ap.add_argument("--records", type=int, default=1_000_000, help="part 3: records per generator run")
    ap.add_argument("--uprobe-launches", type=int, default=300_000, help="part 4: launches per run")
    ap.add_argument("--json", type=Path, help="write parts 3-4 as JSON here")
    a = ap.parse_args()
    if a.live or a.live_only:
        print(f"part 3: generator records through the real session ({a.records} per run), and part 4: "
              f"uprobes on a fake libcuda; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}", flush=True)
        live = live_part([int(x) // 1 for x in a.rates_k.split(",")], a.records, a.uprobe_launches)
        if isinstance(live, str):
            print(f"live pipeline: {live}")
        else:
            print(f"highest generator rate with 0 lost: before {live['before_sustained_0_lost_per_s']}/s, "
                  f"after {live['after_sustained_0_lost_per_s']}/s (load after: {os.getloadavg()[0]:.1f})")
            if a.json:
                a.json.write_text(json.dumps(live, indent=1) + "\n")
        if a.live_only:
            return 0
    if not UPSTREAM_PY.exists() or not UPSTREAM_PKG.exists():
        print("upstream amd-aorta 0.3.0 is not installed at /tmp/upstream.\n"
              "  install it: python3.11 -m venv /tmp/upstream && /tmp/upstream/bin/pip install amd-aorta==0.3.0",
              file=sys.stderr)
        return 3
    ours_jobs = make_jobs(a.lines)
    up_jobs = {k: v[: a.lines // 2] for k, v in ours_jobs.items()}
    ours = ours_lines(ours_jobs)
    up = upstream_lines(up_jobs)
    with tempfile.TemporaryDirectory() as d:
        r_up = run_upstream(up, Path(d))
    r_ours = run_ours(ours)
    ours_lps = len(ours) / r_ours["seconds"]
    up_lps = len(up) / r_up["seconds"]
    print(f"ours:     {len(ours):>9} lines {r_ours['jobs']:>9} jobs in {r_ours['seconds']:.2f} s = "
          f"{ours_lps / 1e3:8.0f}k lines/s {r_ours['jobs'] / r_ours['seconds'] / 1e3:8.0f}k events/s "
          f"(p99 {r_ours['p99_us']:.1f} us, {r_ours['rings']} rings)")
    print(f"upstream: {len(up):>9} lines {r_up['jobs']:>9} jobs in {r_up['seconds']:.2f} s = "
          f"{up_lps / 1e3:8.0f}k lines/s {r_up['jobs'] / r_up['seconds'] / 1e3:8.0f}k events/s "
          f"(p99 {r_up['p99_us']:.1f} us)")
    print(f"ratio (lines/s): {ours_lps / up_lps:.1f}x; (jobs/s): "
          f"{(r_ours['jobs'] / r_ours['seconds']) / (r_up['jobs'] / r_up['seconds']):.1f}x; "
          f"target >= 200k events/s end to end: {'met' if r_ours['jobs'] / r_ours['seconds'] >= 2e5 else 'NOT met'}")
    if not a.no_kernel:
        k = kernel_part(a.kernel_ioctls)
        if isinstance(k, str):
            print(f"aggregate-mode exactness: {k}")
        else:
            for mode, v in k.items():
                print(f"{mode:>9} mode: {v['counted']}/{v['issued']} ioctls counted at {v['rate_per_s'] / 1e3:.0f}k/s "
                      f"(exact: {v['exact']}, lost: {v['lost_events']}, sent by kernel: {v['sent_by_kernel']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
