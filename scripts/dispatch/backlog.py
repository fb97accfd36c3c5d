"""Ground truth for launch->start: one sleep kernel of measured length L, then N tiny kernels.

Every tiny kernel queues behind the sleep on the same stream, so its launch->start delay is at
least L minus how long after the sleep's launch it was launched. Prints one JSON line on stdout:
the measured L (CUDA events, median of 5 after warm-up), the stream handle, and the
CLOCK_MONOTONIC time just before the measured section (records before it are warm-up).

    python3 backlog.py [--tiny 100] [--sleep-ms 10] [--no-backlog]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", type=int, default=100)
    ap.add_argument("--sleep-ms", type=float, default=10.0)
    ap.add_argument("--no-backlog", action="store_true",
                    help="synchronise after every tiny kernel: no queue, single-digit-us delays")
    a = ap.parse_args()
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
        lengths = []
        for _ in range(6):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record(s)
            torch.cuda._sleep(cycles)
            e1.record(s)
            s.synchronize()
            lengths.append(e0.elapsed_time(e1) * 1e6)  # ns
        L = statistics.median(lengths[1:])
        marker = time.monotonic_ns()
        if a.no_backlog:
            for _ in range(a.tiny):
                x.add_(1)
                s.synchronize()
        else:
            torch.cuda._sleep(cycles)
            for _ in range(a.tiny):
                x.add_(1)
            s.synchronize()
        end = time.monotonic_ns()
    print(json.dumps({"sleep_ns": L, "sleep_lengths_ns": lengths, "stream": s.cuda_stream,
                      "marker_ns": marker, "end_ns": end, "tiny": a.tiny,
                      "backlog": not a.no_backlog}), flush=True)


if __name__ == "__main__":
    main()
