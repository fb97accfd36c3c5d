"""Ground truth for launch->start: one sleep kernel of measured length L, then N tiny kernels.

Every tiny kernel queues behind the sleep on the same stream, so its launch->start delay is at
least L minus how long after the sleep's launch it was launched. Prints one JSON line on stdout:
the measured L (CUDA events, median of 5 after warm-up), the stream handle, and the
CLOCK_MONOTONIC time just before the measured section (records before it are warm-up).

How L is measured matters (issue 24 item 3). ``e0.record(); _sleep(); e1.record()`` on an idle
GPU timestamps e0 as soon as the GPU reads it, while the host is still inside the sleep
kernel's launch call: e1 - e0 is then the kernel *plus its launch latency* (6-9 us on the H200,
the no-backlog figure), and the bound L - offset was too high by that much: the first tiny
kernels after the sleep, the only ones with no earlier tiny kernel in front of them, "started
before the bound" by ~5 us (later kernels also wait for their predecessors, and that margin
cleared it). That is the model's error, not the clocks': a device clock 5 us early would also
have put the no-backlog figure 5 us below torch.profiler's, and it read 1.7 us above it (the
uprobe's cost); the CUPTI/CLOCK_MONOTONIC bracket is ±0.5 us. So L is now timed with the GPU
kept busy (a short sleep kernel first): e0,
the sleep and e1 are all queued before the GPU reaches them, e0 is stamped when the busy kernel
ends and the sleep starts right after it. ``sleep_ns_idle_start`` keeps the old way's figure,
so the difference (the launch latency it included) is printed beside it.

    python3 backlog.py [--tiny 100] [--sleep-ms 10] [--no-backlog [--profile]]

``--profile`` (with ``--no-backlog``, untraced): the reference for the tool's no-backlog figure
(issue 24 item 3): the same loop inside torch.profiler, whose own CUPTI records give each tiny
kernel's start minus its ``cudaLaunchKernel`` call's start (``profiler_launch_to_start_ns``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", type=int, default=100)
    ap.add_argument("--sleep-ms", type=float, default=10.0)
    ap.add_argument("--no-backlog", action="store_true",
                    help="synchronise after every tiny kernel: no queue, single-digit-us delays")
    ap.add_argument("--profile", action="store_true",
                    help="with --no-backlog: time the loop with torch.profiler (the reference)")
    a = ap.parse_args()
    prof_delays: list[float] | None = None
    s = torch.cuda.Stream()
    x = torch.zeros(1024, device="cuda")
    with torch.cuda.stream(s):
        # warm-up: load every kernel (lazy module loading) and ramp the SM clock
        for _ in range(200):
            x.add_(1)
        torch.cuda._sleep(1000)
        s.synchronize()
        clock_hz = 1.98e9  # a guess only for the cycle count; L is measured below
        cycles = int(a.sleep_ms * 1e-3 * clock_hz)
        busy_cycles = int(0.5e-3 * clock_hz)  # ~0.5 ms: the host queues e0, sleep, e1 meanwhile

        def timed(busy_first: bool) -> float:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if busy_first:
                torch.cuda._sleep(busy_cycles)
            e0.record(s)
            torch.cuda._sleep(cycles)
            e1.record(s)
            s.synchronize()
            return e0.elapsed_time(e1) * 1e6  # ns

        lengths = [timed(True) for _ in range(6)]
        idle_lengths = [timed(False) for _ in range(6)]
        L = statistics.median(lengths[1:])
        L_idle = statistics.median(idle_lengths[1:])
        marker = time.monotonic_ns()
        if a.no_backlog:
            prof_ctx = _profiler() if a.profile else contextlib.nullcontext()
            with prof_ctx as prof:
                for _ in range(a.tiny):
                    x.add_(1)
                    s.synchronize()
            if prof is not None:
                prof_delays = _profiler_delays(prof)
        else:
            torch.cuda._sleep(cycles)
            for _ in range(a.tiny):
                x.add_(1)
            s.synchronize()
        end = time.monotonic_ns()
    print(json.dumps({"sleep_ns": L, "sleep_lengths_ns": lengths, "sleep_ns_idle_start": L_idle,
                      "sleep_lengths_idle_start_ns": idle_lengths, "stream": s.cuda_stream,
                      "marker_ns": marker, "end_ns": end, "tiny": a.tiny,
                      "backlog": not a.no_backlog, "profiler_launch_to_start_ns": prof_delays}), flush=True)


def _profiler():  # noqa: ANN202 - torch.profiler.profile
    from torch.profiler import ProfilerActivity, profile

    return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])


LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")


def _profiler_delays(prof) -> list[float]:  # noqa: ANN001
    """Kernel start minus its launch call's start, from the profiler's own trace (correlation id)."""
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as fh:
            events = json.load(fh).get("traceEvents", [])
    finally:
        os.unlink(path)
    return delays_from_trace(events)


def delays_from_trace(events: object) -> list[float]:
    """ns from each launch call's start to its kernel's start, paired by correlation id, from a
    Chrome trace's events (kineto: ts in us); anything malformed is skipped."""
    if not isinstance(events, list):
        return []

    def args(e: dict) -> dict:
        a = e.get("args")
        return a if isinstance(a, dict) else {}

    calls = {args(e)["correlation"]: e["ts"] for e in events if isinstance(e, dict)
             and e.get("name") in LAUNCH_CALLS and isinstance(args(e).get("correlation"), int)
             and isinstance(e.get("ts"), (int, float))}
    return [(e["ts"] - calls[args(e)["correlation"]]) * 1000.0 for e in events if isinstance(e, dict)
            and e.get("cat") == "kernel" and isinstance(args(e).get("correlation"), int)
            and args(e)["correlation"] in calls
            and isinstance(e.get("ts"), (int, float))]


if __name__ == "__main__":
    main()
