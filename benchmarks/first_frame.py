"""The first minute (issue 38): time to the TUI's first frame, and ``aorta-tui --help``.

Measured here, in this run, on this machine, alternating each figure with its reference so that
a change of load hits both alike; each is the median of ``--rounds`` with its min-max range:

1. First frame: from spawning ``python -m aorta_tui`` in a 120x40 pseudo-terminal until the
   Home screen's key line reaches it (tui_stream.py's harness). Reference: a minimal Textual
   app (one Static). Target: <= 0.5 s on a quiet machine, torch installed.
2. ``aorta-tui --help`` to exit. Reference: upstream's ``aorta --help`` where ``amd-aorta`` is
   installed (target <= 0.5x of it), else a minimal typer app of one command (said so).

The script prints the load average: figures from a loaded machine are not the target's.

    .venv/bin/python benchmarks/first_frame.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tui_stream import MINIMAL_APP, PtyRun, child_env  # noqa: E402  (the same pty harness)

MINIMAL_TYPER = ("import typer\napp = typer.Typer()\n@app.command()\ndef main(n: int = 1) -> None:\n"
                 "    '''One command.'''\napp()\n")
TARGET_FIRST_FRAME_S = 0.5
TARGET_HELP_RATIO = 0.5


def frame_s(argv: list[str], marker: bytes, workdir: Path) -> float:
    env = child_env()
    env["AORTA_TUI_OUTPUT"] = str(workdir / "out")
    run = PtyRun(argv, env, workdir)
    try:
        return run.wait_for(marker)
    finally:
        run.quit()


def exit_s(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                   timeout=60)
    return time.perf_counter() - start


def alternate(rounds: int, ours, reference) -> tuple[list[float], list[float]]:  # noqa: ANN001
    a, b = [], []
    for _ in range(rounds):
        a.append(ours())
        b.append(reference())
    return a, b


def show(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s [{min(values):.3f}-{max(values):.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {os.uname().nodename} ({os.cpu_count()} CPUs), load average "
          f"{os.getloadavg()[0]:.1f}, python {sys.version.split()[0]}; {args.rounds} rounds, "
          "alternating; median [min-max]")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        ours, ref = alternate(args.rounds,
                              lambda: frame_s([sys.executable, "-m", "aorta_tui"],
                                              b"trace monitor", workdir),
                              lambda: frame_s([sys.executable, "-c", MINIMAL_APP],
                                              b"minimal-first-frame", workdir))
        verdict = "meets" if statistics.median(ours) <= TARGET_FIRST_FRAME_S else "misses"
        print(f"first frame: aorta-tui {show(ours)} ({verdict} the target <= "
              f"{TARGET_FIRST_FRAME_S} s); minimal Textual app {show(ref)}; ratio "
              f"{statistics.median(ours) / statistics.median(ref):.2f}x")
    upstream = shutil.which("aorta")
    reference = [upstream, "--help"] if upstream else [sys.executable, "-c", MINIMAL_TYPER,
                                                       "--help"]
    ours, ref = alternate(args.rounds, lambda: exit_s([sys.executable, "-m", "aorta_tui", "--help"]),
                          lambda: exit_s(reference))
    ratio = statistics.median(ours) / statistics.median(ref)
    if upstream:
        verdict = "meets" if ratio <= TARGET_HELP_RATIO else "misses"
        print(f"--help: aorta-tui {show(ours)}; upstream `aorta --help` {show(ref)}; ratio "
              f"{ratio:.2f}x ({verdict} the target <= {TARGET_HELP_RATIO}x)")
    else:
        print(f"--help: aorta-tui {show(ours)}; upstream not installed (no `aorta` on PATH), so "
              f"against a one-command typer app {show(ref)}: ratio {ratio:.2f}x (the target, "
              f"<= {TARGET_HELP_RATIO}x upstream, needs amd-aorta installed)")


if __name__ == "__main__":
    main()
