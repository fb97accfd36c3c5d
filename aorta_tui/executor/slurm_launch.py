"""A distributed trial's launcher inside its Slurm job: ``srun torchrun`` across the job's nodes.

``python -m aorta_tui.executor.slurm_launch --nodes N --nproc-per-node K -- -m MODULE ARGS...``
is the trial's command when the recipe asks for ``executor: {kind: slurm, nodes, gpus_per_node}``
(``executor.torchrun_argv`` builds it). It runs on the job's first node, as the trial's process
(supervised by ``slurm_job`` like any trial, in the trial's environment), and:

1. reads the job's nodes (``scontrol show hostnames $SLURM_JOB_NODELIST``): the rendezvous is
   on the first of them, which is this node (Slurm runs the batch script there);
2. takes a free TCP port here for torchrun's c10d store;
3. replaces itself (``exec``: same pid, same process group, so the supervisor's timeout and
   cancel still reach it) with ``srun --nodes N --ntasks-per-node 1 python -m
   torch.distributed.run --nnodes N --nproc-per-node K --rdzv-backend c10d ...``. srun starts one
   torchrun agent per node with its own environment (``--export=ALL``: the trial's, set at
   process creation here, plus each node's ``SLURM_*``), and the agents start K ranks each.

A job whose node list cannot be read, or that has fewer nodes than asked, ends with exit 3 and
one line on stderr saying why (the trial is recorded as an error with that line).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence

from aorta_tui.core import spawn_gate

EXIT_ENVIRONMENT = 3  # core/errors.py's environment problem; the trial's stderr says which


class LaunchError(Exception):
    pass


def job_hosts(environ: Mapping[str, str]) -> list[str]:
    """The job's nodes in Slurm's order (the batch script runs on the first)."""
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not nodelist:
        raise LaunchError("SLURM_JOB_NODELIST is not set: this launcher runs inside a Slurm job")
    try:
        proc = spawn_gate.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                              text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"scontrol show hostnames {nodelist} failed: {exc}") from None
    hosts = [h.strip() for h in proc.stdout.splitlines() if h.strip()]
    if proc.returncode != 0 or not hosts:
        raise LaunchError(f"scontrol show hostnames {nodelist} gave no hosts "
                          f"({(proc.stderr.strip().splitlines() or ['no output'])[-1]})")
    return hosts


def free_port() -> int:
    """A TCP port free on this node now (torchrun's c10d store binds it moments later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def srun_argv(*, nodes: int, nproc_per_node: int, host: str, port: int, rdzv_id: str,
              worker: Sequence[str], python: str = sys.executable) -> list[str]:
    """``srun`` one torchrun agent per node, rendezvous at ``host:port``."""
    return ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1",
            "--kill-on-bad-exit=1", "--export=ALL", "--overlap",
            python, "-m", "torch.distributed.run", f"--nnodes={nodes}",
            f"--nproc-per-node={nproc_per_node}", "--rdzv-backend=c10d",
            f"--rdzv-endpoint={host}:{port}", f"--rdzv-id={rdzv_id}", *worker]


def parse_args(argv: Sequence[str]) -> tuple[int, int, list[str]]:
    """``--nodes N --nproc-per-node K -- WORKER...`` (built by the engine, checked anyway)."""
    args = list(argv)
    if "--" not in args:
        raise LaunchError("usage: slurm_launch --nodes N --nproc-per-node K -- -m MODULE ARGS")
    head, worker = args[:args.index("--")], args[args.index("--") + 1:]
    opts = dict(a.split("=", 1) for a in head if a.startswith("--") and "=" in a)
    try:
        nodes, per_node = int(opts["--nodes"]), int(opts["--nproc-per-node"])
    except (KeyError, ValueError):
        raise LaunchError(f"bad launcher options {head!r}") from None
    if nodes < 1 or per_node < 1 or not worker:
        raise LaunchError(f"bad launcher options {head!r} -- {worker!r}")
    return nodes, per_node, worker


def main(argv: Sequence[str], environ: Mapping[str, str] = os.environ) -> int:
    try:
        nodes, per_node, worker = parse_args(argv)
        hosts = job_hosts(environ)
        if len(hosts) < nodes:
            raise LaunchError(f"the job has {len(hosts)} node(s) ({', '.join(hosts)}) and the trial "
                              f"asks for {nodes}")
    except LaunchError as exc:
        print(f"aorta-tui slurm launcher: {exc}", file=sys.stderr, flush=True)
        return EXIT_ENVIRONMENT
    job = environ.get("SLURM_JOB_ID", "aorta")
    cmd = srun_argv(nodes=nodes, nproc_per_node=per_node, host=hosts[0], port=free_port(),
                    rdzv_id=f"aorta-{job}", worker=worker)
    print(f"aorta-tui slurm launcher: {nodes} node(s) x {per_node} rank(s), rendezvous "
          f"{hosts[0]} (job {job}): {' '.join(cmd[:8])} ...", file=sys.stderr, flush=True)
    try:
        os.execvp(cmd[0], cmd)  # this process becomes srun: same pid and process group
    except OSError as exc:
        print(f"aorta-tui slurm launcher: cannot run srun: {exc}", file=sys.stderr, flush=True)
    return EXIT_ENVIRONMENT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
