"""Sweep overhead: aorta-tui against upstream amd-aorta 0.3.0 in the same run.

Runs one probe recipe (4 cells x N trials of `-- true`) through both tools for two values of
N, fits wall = fixed + per_trial * trials for each, and prints both costs and the ratios. The
per-trial cost is also compared with the raw cost of starting `true` from Python (the floor
any harness pays). Also times `--help` of both.

aorta-tui captures its environment snapshots in background processes while trials run, so
with few, instant trials the run ends when the capture ends: its fixed cost is measured with
the defaults (snapshots on, as upstream captures its own), and its per-trial slope with
`--no-snapshot`, where trials are not hidden behind the capture.

    python benchmarks/sweep_overhead.py [--upstream /path/to/aorta] [--repeat 3] [--trials 4,16,32]

The default's points are 4 cells x 4, 16 and 32 trials (16, 64, 128; issue 23's CPU figure
is the slope through 64 trials and beyond), fitted by least squares.

Targets (issue 2): fixed cost <= 0.4x upstream, per-trial overhead <= 0.3x upstream,
`aorta-tui --help` <= 0.5x `aorta --help`.
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

RECIPE = """\
schema_version: 1
mode: probe
ticket: BENCH
trials: {trials}
mitigation_axis: [none, tf32_off]
diagnostic_axis: [none, xnack]
"""


def find_upstream(explicit: str | None) -> str | None:
    for cand in (explicit, os.environ.get("AORTA_UPSTREAM"), "/tmp/upstream/bin/aorta", shutil.which("aorta")):
        if cand and Path(cand).exists():
            return cand
    return None


def timed(argv: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall


def best_of(repeat: int, fn) -> float:
    return min(fn() for _ in range(repeat))


def fit(points: dict[int, float]) -> tuple[float, float]:
    """Least squares through every point (two points: the line through them). A slope from
    two noisy points moved from 3.6 to 31.9 ms between runs of upstream on the H200."""
    ns, ts = zip(*sorted(points.items()), strict=True)
    mean_n, mean_t = sum(ns) / len(ns), sum(ts) / len(ts)
    per = (sum((n - mean_n) * (t - mean_t) for n, t in zip(ns, ts, strict=True))
           / sum((n - mean_n) ** 2 for n in ns))
    return mean_t - per * mean_n, per


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--upstream", help="path of upstream's `aorta` console script")
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs per point")
    ap.add_argument("--trials", default="4,16,32", help="per-cell trial counts (two or more) to fit the line through")
    args = ap.parse_args()
    upstream = find_upstream(args.upstream)
    if upstream is None:
        print("upstream amd-aorta not found: install it with\n"
              "  python3 -m venv /tmp/upstream && /tmp/upstream/bin/pip install amd-aorta==0.3.0\n"
              "or pass --upstream PATH", file=sys.stderr)
        return 3
    script = shutil.which("aorta-tui") or str(Path(sys.executable).with_name("aorta-tui"))
    ours = [script] if Path(script).exists() else [sys.executable, "-m", "aorta_tui"]
    counts = [int(x) for x in args.trials.split(",")]
    work = Path(tempfile.mkdtemp(prefix="aorta-bench-"))
    results: dict[str, dict[int, float]] = {"aorta-tui": {}, "aorta-tui --no-snapshot": {}, "upstream": {}}
    try:
        for n in counts:
            recipe = work / f"r{n}.yaml"
            recipe.write_text(RECIPE.format(trials=n))
            total = 4 * n

            def run_ours(recipe: Path = recipe, *extra: str) -> float:
                out = Path(tempfile.mkdtemp(dir=work))
                return timed([*ours, "--batch", str(recipe), "--output", str(out), *extra, "--", "true"], work)

            def run_up(recipe: Path = recipe) -> float:
                out = Path(tempfile.mkdtemp(dir=work))
                return timed([upstream, "sweep", "run", "--recipe", str(recipe), "--output", str(out),
                              "--", "true"], work)

            results["aorta-tui"][total] = best_of(args.repeat, run_ours)
            results["aorta-tui --no-snapshot"][total] = best_of(
                args.repeat, lambda recipe=recipe: run_ours(recipe, "--no-snapshot"))
            results["upstream"][total] = best_of(args.repeat, run_up)

        def spawn_true() -> float:
            t0 = time.perf_counter()
            for _ in range(50):
                subprocess.run(["true"])
            return (time.perf_counter() - t0) / 50

        raw = best_of(args.repeat, spawn_true)
        help_ours = best_of(max(5, args.repeat), lambda: timed([*ours, "--help"], work))
        help_up = best_of(max(5, args.repeat), lambda: timed([upstream, "--help"], work))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    fo, _ = fit(results["aorta-tui"])
    _, po = fit(results["aorta-tui --no-snapshot"])
    fu, pu = fit(results["upstream"])
    print(f"probe recipe, 4 cells x {counts} trials of `true`; best of {args.repeat}; {time.strftime('%Y-%m-%d')}")
    print(f"{'':24}{'aorta-tui':>12}{'upstream':>12}{'ratio':>9}  target")
    print(f"{'fixed cost (s)':24}{fo:12.3f}{fu:12.3f}{fo / fu:9.2f}  <= 0.40")
    print(f"{'per-trial cost (ms)':24}{po * 1e3:12.2f}{pu * 1e3:12.2f}{po / pu:9.2f}  <= 0.30")
    print(f"{'per-trial overhead (ms)':24}{(po - raw) * 1e3:12.2f}{(pu - raw) * 1e3:12.2f}"
          f"{(po - raw) / (pu - raw):9.2f}  (cost minus starting `true` from Python: {raw * 1e3:.2f} ms)")
    print(f"{'--help (s)':24}{help_ours:12.3f}{help_up:12.3f}{help_ours / help_up:9.2f}  <= 0.50")
    for name, pts in results.items():
        print(f"  {name} raw points: " + ", ".join(f"{n} trials {t:.3f}s" for n, t in sorted(pts.items())))
    spread = statistics.pstdev(list(results["aorta-tui"].values()))
    print(f"  (machine noise: figures are best-of-{args.repeat}; spread of our points {spread:.3f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
