#!/usr/bin/env python3
"""What live submit->dispatch tracing costs the traced program, per launch, and its live lag.

The same program (scripts/dispatch/launch_loop.py) runs, in fresh processes alternated over
``--reps`` rounds, as:

- ``untraced``: the reference, measured in the same run;
- ``collector``: only the CUPTI collector injected (CUDA_INJECTION64_PATH), records drained by
  a reader in this process, no bpftrace (``collector-driver`` / ``collector-runtime``: with
  the launch callbacks of one API layer only, AORTA_CUPTI_DOMAINS=1 / 2);
- ``ebpf``: ``trace queue --probes cuda --device-timestamps off`` (the uprobes alone);
- ``full``: ``trace queue --probes cuda --device-timestamps on`` (what a user runs).

The figure is host time per launch while issuing (the loop without its final synchronise), as
the median over rounds, and the added time against ``untraced`` in the same round. Two loops:
``tiny`` (launch-bound: the host sets the pace) and ``matmul`` (kernel-bound, 1,000 launches
of ~0.3 ms kernels: the queue never fills, so issuing still measures host cost).

``--lag`` also measures how far the live histogram trails the GPU: a program runs bursts of
launches 2 s apart and prints when each burst's kernels finished (CLOCK_MONOTONIC); the lag is
the time until a ``--json-stream`` snapshot first counts them.

    sudo python3 benchmarks/dispatch_overhead.py --reps 3 --out /tmp/dispatch-bench
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOOP = REPO / "scripts" / "dispatch" / "launch_loop.py"
AT = [sys.executable, "-m", "aorta_tui"]


def _program_json(stdout: str) -> dict:
    return json.loads([ln for ln in stdout.splitlines() if ln.startswith("{")][-1])


def run_mode(mode: str, loop_args: list[str], library: Path | None) -> dict:
    prog = [sys.executable, str(LOOP), *loop_args]
    env = dict(os.environ)
    if mode.startswith("collector"):
        from aorta_tui.trace.device.channel import DeviceChannel

        counted = {"bytes": 0}
        ch = DeviceChannel(lambda parsed: counted.__setitem__("bytes", counted["bytes"] + 1))
        ch.start()
        env.update(ch.env(library))
        if mode == "collector-driver":
            env["AORTA_CUPTI_DOMAINS"] = "1"
        elif mode == "collector-runtime":
            env["AORTA_CUPTI_DOMAINS"] = "2"
        try:
            out = subprocess.run(prog, env=env, capture_output=True, text=True, timeout=600, check=True)
        finally:
            ch.stop()
        return _program_json(out.stdout)
    if mode in ("ebpf", "full"):
        dev = "off" if mode == "ebpf" else "on"
        out = subprocess.run([*AT, "trace", "queue", "--probes", "cuda", "--device-timestamps", dev,
                              "--no-calibrate", "--", *prog], capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise SystemExit(f"{mode}: exit {out.returncode}\n{out.stderr[-2000:]}")
        return _program_json(out.stdout)
    out = subprocess.run(prog, capture_output=True, text=True, timeout=600, check=True)
    return _program_json(out.stdout)


def overhead(loop: str, modes: list[str], reps: int, library: Path) -> list[str]:
    args = (["--kernel", "tiny", "--launches", "200000", "--streams", "4"] if loop == "tiny"
            else ["--kernel", "matmul", "--launches", "1000", "--streams", "4", "--warmup", "200"])
    per: dict[str, list[float]] = {m: [] for m in modes}
    added: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(reps):
        base = None
        for m in modes:
            ns = run_mode(m, args, library)["host_ns_per_launch"]
            per[m].append(ns)
            if m == "untraced":
                base = ns
            elif base is not None:
                added[m].append(ns - base)
    rows = [f"| {loop} | {m} | {statistics.median(per[m]) / 1000:.2f} "
            f"({min(per[m]) / 1000:.2f}-{max(per[m]) / 1000:.2f}) | "
            + ("-" if m == "untraced" else f"{statistics.median(added[m]) / 1000:+.2f}") + f" | {len(per[m])} |"
            for m in modes]
    return rows


BURSTS = r"""
import json, sys, time, torch
s = torch.cuda.Stream(); x = torch.zeros(256, device="cuda")
with torch.cuda.stream(s):
    for _ in range(500): x.add_(1)
    s.synchronize()
    for b in range(5):
        time.sleep(2.0)
        for _ in range(20000): x.add_(1)
        s.synchronize()
        print(json.dumps({"burst": b, "done_ns": time.monotonic_ns(), "launches": 500 + 20000 * (b + 1)}), file=sys.stderr, flush=True)
"""


def lag() -> list[str]:
    proc = subprocess.Popen([*AT, "trace", "queue", "--probes", "cuda", "--device-timestamps", "on",
                             "--no-calibrate", "--interval", "0.1", "--json-stream", "--",
                             sys.executable, "-c", BURSTS],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    snaps: list[tuple[int, int]] = []  # (arrival CLOCK_MONOTONIC, launch_to_start count)
    bursts: list[dict] = []

    def read_err() -> None:
        for ln in proc.stderr:
            if ln.startswith('{"burst"'):
                bursts.append(json.loads(ln))

    t = threading.Thread(target=read_err, daemon=True)
    t.start()
    for ln in proc.stdout:
        if '"cuda.launch_to_start"' in ln:
            snaps.append((time.monotonic_ns(), json.loads(ln)["count"]))
    proc.wait()
    t.join(timeout=5)
    rows = []
    for b in bursts:
        seen = [arr for arr, n in snaps if n >= b["launches"]]
        lag_s = (seen[0] - b["done_ns"]) / 1e9 if seen else None
        rows.append(f"| burst {b['burst']} ({b['launches']} launches) | "
                    + ("never seen" if lag_s is None else f"{lag_s:.3f} s") + " |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--modes", default="untraced,collector,collector-driver,collector-runtime,ebpf,full")
    ap.add_argument("--lag", action="store_true")
    a = ap.parse_args()
    from aorta_tui.trace.device.build import build_collector

    library = build_collector().library
    modes = a.modes.split(",")
    lines = [f"dispatch overhead, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, reps={a.reps}", "",
             "| loop | mode | host us per launch, median (range) | added vs untraced, median | rounds |",
             "|---|---|---|---|---|"]
    for loop in ("tiny", "matmul"):
        lines += overhead(loop, modes, a.reps, library)
    if a.lag:
        lines += ["", "| live lag: burst | first snapshot counting it, after the kernels finished |", "|---|---|"]
        lines += lag()
    text = "\n".join(lines)
    print(text)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "dispatch-overhead.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
