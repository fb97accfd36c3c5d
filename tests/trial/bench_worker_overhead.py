"""Per-trial cost of the worker + classifier for `true` (a script, not a test).

    .venv/bin/python tests/trial/bench_worker_overhead.py [N]

Prints milliseconds per trial for: the cheapest spawn (os.posix_spawn + waitpid), a plain
subprocess.run (what a simple runner pays), run_process alone, and run_process + classify; and the difference to the
floor. The figures depend on the machine; compare the ratios, not the absolute numbers.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aorta_tui.classify import classify
from aorta_tui.trial.supervisor import ProcessSpec, run_process


def per_trial_ms(fns: dict[str, object], n: int, rounds: int = 9) -> dict[str, float]:
    """Median over ``rounds`` of ms/trial; the variants take turns, so load from other
    processes on the machine hits them alike."""
    per_round = max(1, n // rounds)
    runs: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()  # type: ignore[operator]  # warm up
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(per_round):
                fn()  # type: ignore[operator]
            runs[name].append((time.perf_counter() - t0) / per_round * 1000)
    return {name: statistics.median(v) for name, v in runs.items()}


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    tmp = Path(tempfile.mkdtemp(prefix="aorta-bench-"))
    env = {"PATH": os.environ["PATH"]}
    spec = ProcessSpec(["true"], env, tmp, tmp / "stdout.log", tmp / "stderr.log")

    def bare() -> None:
        subprocess.run(["true"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    true_path = subprocess.run(["which", "true"], capture_output=True, text=True).stdout.strip()

    def spawn() -> None:
        pid = os.posix_spawn(true_path, ["true"], env)
        os.waitpid(pid, 0)

    def worker() -> None:
        run_process(spec)

    def worker_and_classify() -> None:
        out = run_process(spec)
        classify(out, stdout_path=spec.stdout_path, stderr_path=spec.stderr_path)

    ms = per_trial_ms(
        {"spawn": spawn, "bare": bare, "worker": worker, "both": worker_and_classify}, n
    )
    spawn_floor, floor, w, wc = ms["spawn"], ms["bare"], ms["worker"], ms["both"]
    print(f"trials per figure: {n} (median of 9 interleaved batches), python {sys.version.split()[0]}")
    print(f"os.posix_spawn + waitpid       {spawn_floor:7.3f} ms/trial")
    print(f"bare subprocess.run(['true'])  {floor:7.3f} ms/trial")
    print(f"run_process                    {w:7.3f} ms/trial  (+{w - floor:.3f} over bare)")
    print(f"run_process + classify         {wc:7.3f} ms/trial  (+{wc - floor:.3f} over bare)")
    print(f"worker+classify over posix_spawn floor: +{wc - spawn_floor:.3f} ms/trial")


if __name__ == "__main__":
    main()
