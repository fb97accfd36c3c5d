"""A program to watch live: for --seconds, a sleep kernel of ~--sleep-ms then --tiny small kernels
queued behind it on one stream, again and again (launch->start grows with the backlog).

    python3 bursts.py --seconds 20 --sleep-ms 5 --tiny 200
"""

from __future__ import annotations

import argparse
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--sleep-ms", type=float, default=5.0)
    ap.add_argument("--tiny", type=int, default=200)
    a = ap.parse_args()
    s = torch.cuda.Stream()
    x = torch.zeros(1024, device="cuda")
    cycles = int(a.sleep_ms * 1e-3 * 1.98e9)
    end = time.monotonic() + a.seconds
    with torch.cuda.stream(s):
        while time.monotonic() < end:
            torch.cuda._sleep(cycles)
            for _ in range(a.tiny):
                x.add_(1)
            s.synchronize()
            time.sleep(0.05)


if __name__ == "__main__":
    main()
