"""A launch-bound (or kernel-bound) loop over several streams, for exact counts and cost.

    python3 launch_loop.py --launches 200000 --streams 4 [--kernel tiny|matmul]

Prints one JSON line: launches issued per stream handle, host time spent issuing them (the loop
without the final synchronise), and the wall time. The same program runs untraced and traced.
"""

from __future__ import annotations

import argparse
import json
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=200_000)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--kernel", choices=["tiny", "matmul"], default="tiny")
    ap.add_argument("--warmup", type=int, default=2000)
    a = ap.parse_args()
    streams = [torch.cuda.Stream() for _ in range(a.streams)]
    if a.kernel == "tiny":
        bufs = [torch.zeros(256, device="cuda") for _ in streams]
        outs = bufs
    else:  # ~0.3 ms of fp32 work per launch: the GPU, not the host, sets the pace
        bufs = [torch.randn(2048, 2048, device="cuda") for _ in streams]
        outs = [torch.empty_like(b) for b in bufs]

    def step(b: torch.Tensor, o: torch.Tensor) -> None:
        if a.kernel == "tiny":
            b.add_(1)
        else:
            torch.mm(b, b, out=o)
    for s, b, o in zip(streams, bufs, outs, strict=True):
        with torch.cuda.stream(s):
            for _ in range(a.warmup // a.streams):
                step(b, o)
    torch.cuda.synchronize()
    per = a.launches // a.streams
    t0 = time.perf_counter_ns()
    w0 = time.monotonic_ns()
    for _ in range(per):
        for s, b, o in zip(streams, bufs, outs, strict=True):
            with torch.cuda.stream(s):
                step(b, o)
    t1 = time.perf_counter_ns()
    torch.cuda.synchronize()
    t2 = time.perf_counter_ns()
    launches_per_step = 1
    print(json.dumps({
        "streams": {hex(s.cuda_stream): per * launches_per_step for s in streams},
        "measured_launches": per * a.streams * launches_per_step,
        "warmup_launches": (a.warmup // a.streams) * a.streams * launches_per_step,
        "issue_ns": t1 - t0, "wall_ns": t2 - t0, "start_mono_ns": w0,
        "host_ns_per_launch": (t1 - t0) / (per * a.streams * launches_per_step),
    }), flush=True)


if __name__ == "__main__":
    main()
