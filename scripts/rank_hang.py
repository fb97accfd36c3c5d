#!/usr/bin/env python3
"""A torch.distributed rank program with one deliberately late rank (a hang reproducer).

Every rank joins the group and does one warm-up all-reduce (so the group is known to work);
then ``--hang-rank`` sleeps ``--sleep`` seconds before the second all-reduce while the others
wait inside it. With a collective timeout (``--timeout``) shorter than the sleep, the waiting
ranks' collective times out (NCCL: the watchdog's "Watchdog caught collective operation
timeout"; gloo: a RuntimeError from the blocked recv); with a hang detector watching, the
silence of the whole job is seen first. Backend: gloo on CPU, NCCL when CUDA is available,
chosen at run time (``--backend`` overrides).

    python -m torch.distributed.run --standalone --nproc_per_node=2 \\
        scripts/rank_hang.py --hang-rank 1 --sleep 60 --timeout 20

``AORTA_RANK_HANG_SKIP=1`` in the environment skips the sleep: the control cell of
``recipes/torchrun_hang_probe.yaml`` (the ``rank_hang_skip`` mitigation) sets it, so the same
command line serves the hanging and the healthy cell.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

SKIP_ENV = "AORTA_RANK_HANG_SKIP"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hang-rank", type=int, default=-1, help="rank that sleeps before the collective (-1: none)")
    p.add_argument("--sleep", type=float, default=0.0, help="seconds the hanging rank sleeps")
    p.add_argument("--timeout", type=float, default=20.0,
                   help="collective timeout in seconds (init_process_group(timeout=...))")
    p.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto",
                   help="auto: nccl when CUDA is available, else gloo")
    p.add_argument("--elements", type=int, default=1024, help="all-reduce size (float32 elements)")
    args = p.parse_args(argv)
    if args.sleep < 0 or args.timeout <= 0 or args.elements < 1:
        p.error("--sleep must be >= 0, --timeout > 0 and --elements >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        print("rank_hang.py: RANK/WORLD_SIZE are not set; start it with "
              "`python -m torch.distributed.run --nproc_per_node=2 scripts/rank_hang.py ...`",
              file=sys.stderr)
        return 2
    import torch
    import torch.distributed as dist

    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.ones(args.elements, device=device)
    dist.all_reduce(t)  # warm-up: every rank is connected
    print(f"rank {rank}/{world}: {backend} group ready on {device}, timeout {args.timeout:g} s", flush=True)

    late = rank == args.hang_rank and os.environ.get(SKIP_ENV, "") not in ("1", "true", "yes")
    if late and args.sleep > 0:
        print(f"rank {rank}: sleeping {args.sleep:g} s before the all-reduce", flush=True)
        time.sleep(args.sleep)
    t = torch.full((args.elements,), float(rank + 1), device=device)
    dist.all_reduce(t)
    if backend == "nccl":
        torch.cuda.synchronize(device)
    want = world * (world + 1) / 2
    got = float(t[0].item())
    if got != want:
        print(f"rank {rank}: all-reduce gave {got}, expected {want}", file=sys.stderr, flush=True)
        return 1
    print(f"rank {rank}: all-reduce ok ({got:g})", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
