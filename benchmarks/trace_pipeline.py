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

Usage: python benchmarks/trace_pipeline.py [--lines N] [--no-kernel]
Exit 3 when upstream is not installed (the comparison is the point).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
    from aorta_tui.trace.stats import MetricStats, split_batch

    metric = probes.get("amdgpu").metric("cs_to_run")
    t = time.perf_counter()
    parser = RecordParser()
    stats = {1: MetricStats(metric)}
    for i in range(0, len(lines), batch):
        split_batch(parser.feed(lines[i : i + batch]), stats)
    summary = stats[1].summary(wall_s=1.0)
    dt = time.perf_counter() - t
    return {"seconds": dt, "jobs": summary["count"], "p99_us": summary["histogram"]["percentiles"]["p99"],
            "rings": len(summary["breakdown"]), "malformed": parser.malformed_total}


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
        m = s.result()["probe_sets"]["ioctl"]["metrics"]["ioctl"]
        counted = m["breakdown"].get(str(0x541B), {}).get("count", 0)
        out[mode] = {"issued": n, "counted": counted, "exact": counted == n,
                     "rate_per_s": n / dt, "lost_events": m["lost_events"],
                     "sent_by_kernel": m["records_sent_by_kernel"]}
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--kernel-ioctls", type=int, default=300_000)
    ap.add_argument("--no-kernel", action="store_true")
    a = ap.parse_args()
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
