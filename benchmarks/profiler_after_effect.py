#!/usr/bin/env python3
"""Does a finished torch.profiler session leave CUDA launches slower in the same process?

``--timing auto`` runs its detail pass under the profiler after the measure pass, so one
``queue run`` is unaffected either way; but ``queue sweep`` runs many points in one process,
and a point's measure pass follows the previous point's profiler session. This prints the
hand-written loop's wall time for a host-bound workload before and after one profiler session
(interleaved reference: the same loop, same process, before), and the ratio.

    python benchmarks/profiler_after_effect.py --reps 5 --out /tmp/after.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="tiny_kernel_stress")
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import torch

    from aorta_tui.hwqueue.cupti import ProfilerCapture
    from aorta_tui.hwqueue.workloads import workload_class
    from aorta_tui.hwqueue.workloads.base import QueueWorkloadContext

    wl = workload_class(args.workload)({})
    wl.setup(QueueWorkloadContext(torch=torch, dtype=torch.float32, stream_devices=["cuda:0"] * args.streams,
                             backend="cuda"))
    streams = [torch.cuda.Stream() for _ in range(args.streams)]
    counter = iter(range(10**9))

    def loop() -> float:
        plans = [wl.iteration(next(counter)) for _ in range(args.iterations)]
        t0 = time.perf_counter()
        for plan in plans:
            for la in plan:
                with torch.cuda.stream(streams[la.stream]):
                    la.fn()
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    loop()  # warm-up
    before = [loop() for _ in range(args.reps)]
    with ProfilerCapture(torch) as cap:
        loop()
    cap.trace()
    after = [loop() for _ in range(args.reps)]
    b, a = statistics.median(before), statistics.median(after)
    out: dict[str, Any] = {"workload": args.workload, "streams": args.streams, "before_s": before,
                           "after_s": after, "ratio_after_over_before": a / b,
                           "torch": torch.__version__}
    print(f"{args.workload} x{args.streams}, {args.iterations} iterations, hand-written loop:\n"
          f"  before any profiler session: median {b * 1e3:.2f} ms (min {min(before) * 1e3:.2f})\n"
          f"  after one profiler session:  median {a * 1e3:.2f} ms (min {min(after) * 1e3:.2f})\n"
          f"  ratio after / before: {a / b:.3f}")
    if args.out:
        args.out.write_text(json.dumps(out, indent=2))
    wl.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
