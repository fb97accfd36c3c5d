"""Is bpftrace's ``nsecs`` the clock programs read as CLOCK_MONOTONIC? Measured, not assumed.

Calls libc's ``labs(x)`` with x = time.monotonic_ns() N times while bpftrace prints ``nsecs`` and
``arg0`` at each call: the difference is (bpftrace clock - CLOCK_MONOTONIC) + the uprobe's own
latency. Prints its quantiles as one JSON line.

    sudo python3 clock_check.py BPFTRACE [N]
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def main() -> None:
    bpftrace, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    libc_path = ctypes.util.find_library("c")
    libc = ctypes.CDLL(libc_path)
    libc.labs.argtypes = [ctypes.c_long]
    import os

    maps = Path(f"/proc/{os.getpid()}/maps").read_text()
    path = next(ln.split()[-1] for ln in maps.splitlines() if "libc.so" in ln or "libc-" in ln)
    prog = f'uprobe:{path}:labs /pid == {os.getpid()}/ {{ printf("%llu %llu\\n", nsecs, arg0); }}'
    bt = subprocess.Popen([bpftrace, "-e", prog], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    time.sleep(3)  # attach
    for _ in range(n):
        libc.labs(time.monotonic_ns())
        time.sleep(0.0002)
    time.sleep(1)
    bt.terminate()
    out, _ = bt.communicate(timeout=10)
    pairs = [tuple(map(int, ln.split())) for ln in out.splitlines() if ln.count(" ") == 1 and ln.split()[0].isdigit()]
    d = np.array([a - b for a, b in pairs])
    print(json.dumps({"n": len(d), "p1": float(np.percentile(d, 1)) if len(d) else None,
                      "p50": float(np.median(d)) if len(d) else None,
                      "p99": float(np.percentile(d, 99)) if len(d) else None,
                      "min": int(d.min()) if len(d) else None}))


if __name__ == "__main__":
    main()
