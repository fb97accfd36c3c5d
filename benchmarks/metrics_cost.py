#!/usr/bin/env python3
"""What ``--metrics`` costs: tracing throughput with and without it, and the time of a scrape.

Part 1 (root, bpftrace, gcc): the CPU box's timer case of benchmarks/trace_pipeline.py: a
   bpftrace timer probe prints ``--rate-k`` thousand launch records a second (``--records`` in
   all), each counted in the kernel, through the real ``TraceSession`` (runner, parser,
   statistics). Runs alternate without and with the exporter (``TraceMetrics`` fed by every
   snapshot, its server up, a scraper reading /metrics every second), ``--repeats`` each, so
   machine load falls on both. Prints received/sent (the exact counts must hold in both),
   received events/s of each and the ratio with/without (median of the runs).
Part 2 (anywhere): one scrape of 1,000 series (16-key histograms, as a busy trace exports):
   the HTTP GET of /metrics through the real server, median and max of ``--scrapes``.

Usage: python benchmarks/metrics_cost.py [--rate-k K] [--records N] [--repeats R] [--scrapes S]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.trace_pipeline import _fast_libcuda, _launch_id, _launch_summary, generator_text  # noqa: E402


def _scraper(url: str, stop: threading.Event, seen: list[int]) -> None:
    while not stop.wait(1.0):
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                seen.append(len(r.read()))
        except OSError:
            seen.append(-1)


def timer_run(per_ms: int, total: int, lib: Path, metrics: bool) -> dict[str, Any]:
    from aorta_tui.metrics.server import serve
    from aorta_tui.metrics.trace_metrics import TraceMetrics
    from aorta_tui.trace import program as program_mod
    from aorta_tui.trace.session import TraceSession

    real_render = program_mod.render

    def render(*args: Any, **kw: Any) -> Any:
        prog = real_render(*args, **kw)
        prog.text = generator_text(_launch_id(prog), per_ms, total)
        return prog

    exporter = TraceMetrics(mode="events", probe_sets=["cuda"]) if metrics else None
    server = serve("127.0.0.1:0", public=False, collectors=[exporter]) if exporter else None
    stop, scrapes = threading.Event(), []
    scraper = threading.Thread(target=_scraper, args=(server.address.url, stop, scrapes)) if server else None
    seconds = total / (per_ms * 990) + 0.5
    program_mod.render = render
    try:
        s = TraceSession(["cuda"], command=["sleep", f"{seconds:.2f}"], mode="events", calibrate=False,
                         library_paths={"cuda": str(lib)}, device_timestamps="off",
                         on_event=exporter.on_event if exporter else None)
        if scraper:
            scraper.start()
        with s:
            if exporter:
                exporter.attach(s)
            s.wait_target(timeout=600)
    finally:
        program_mod.render = real_render
        stop.set()
        if scraper:
            scraper.join()
        if server:
            server.stop()
    return {"metrics": metrics, "scrapes": len(scrapes), "failed_scrapes": scrapes.count(-1), **_launch_summary(s)}


def throughput_part(rate_k: int, total: int, repeats: int) -> None:
    if os.geteuid() != 0 or shutil.which("gcc") is None or shutil.which("bpftrace") is None:
        print("part 1 skipped: needs root, bpftrace and gcc")
        return
    tmp = Path(tempfile.mkdtemp(prefix="aorta-metrics-cost-"))
    lib = _fast_libcuda(tmp)
    rates: dict[bool, list[float]] = {False: [], True: []}
    exact = True
    for _ in range(repeats):
        for with_metrics in (False, True):
            r = timer_run(rate_k, total, lib, with_metrics)
            exact &= r["received"] == r["sent_by_kernel"] and r["lost"] == 0
            rates[with_metrics].append(r["received_per_s"] or 0.0)
            print(f"  {'with' if with_metrics else 'without':>7} --metrics: received {r['received']} of "
                  f"{r['sent_by_kernel']} sent (lost {r['lost']}) at {(r['received_per_s'] or 0) / 1e3:.1f}k/s"
                  + (f", {r['scrapes']} scrapes ({r['failed_scrapes']} failed)" if with_metrics else ""),
                  flush=True)
    without, with_ = statistics.median(rates[False]), statistics.median(rates[True])
    print(f"timer case, {rate_k}k records/s asked, {total} per run, {repeats} runs each: median "
          f"{without / 1e3:.1f}k/s without, {with_ / 1e3:.1f}k/s with --metrics and a 1 s scrape: "
          f"ratio {with_ / without:.3f} (events/s change {100 * (with_ / without - 1):+.1f} %); "
          f"exact counts held in every run: {exact}")
    shutil.rmtree(tmp, ignore_errors=True)


class _StubSession:
    """Per-key histograms of a busy trace: 16 keys, values spread over four decades."""

    pid, child_pid, device, lost_reported = 4242, None, None, 0

    def __init__(self) -> None:
        import numpy as np

        from aorta_tui.trace.hdr import LogLinearHistogram

        rng = np.random.default_rng(1)
        self.rows = []
        for k in range(16):
            h = LogLinearHistogram()
            h.add_array(rng.lognormal(9 + k / 8, 1.2, 5000).astype(np.int64))
            self.rows.append((hex(0x7F0000 + k), h.total, dict(h.counts), h.sum))

    def histograms_by_key(self, name: str) -> tuple[str, list[Any]]:
        return "duration", self.rows


def scrape_part(scrapes: int) -> None:
    from aorta_tui.core.events import HistogramSnapshot
    from aorta_tui.metrics.server import serve
    from aorta_tui.metrics.trace_metrics import TraceMetrics

    exporter = TraceMetrics(mode="events", probe_sets=["cuda"])
    exporter.attach(_StubSession())
    n_metrics = 0
    server = serve("127.0.0.1:0", public=False, collectors=[exporter])
    try:
        def series() -> int:
            with urllib.request.urlopen(server.address.url, timeout=10) as r:
                return sum(1 for line in r.read().decode().splitlines() if line and not line.startswith("#"))
        while series() < 1000:
            exporter.on_event(HistogramSnapshot("b", probe_set=f"cuda.metric{n_metrics}", measures="x", unit="us",
                                                count=80_000, lost_events=0))
            n_metrics += 1
        count = series()
        times = []
        for _ in range(scrapes):
            t0 = time.perf_counter()
            series()
            times.append((time.perf_counter() - t0) * 1e3)
    finally:
        server.stop()
    print(f"scrape of {count} series ({n_metrics} histograms x 16 keys): median "
          f"{statistics.median(times):.1f} ms, max {max(times):.1f} ms over {scrapes} scrapes")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate-k", type=int, default=50, help="thousand records/s the timer probe prints")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scrapes", type=int, default=50)
    args = ap.parse_args()
    print(f"metrics_cost {time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs")
    throughput_part(args.rate_k, args.records, args.repeats)
    scrape_part(args.scrapes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
