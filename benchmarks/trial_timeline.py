"""Benchmark: where a trial's time goes, from the trial timelines of real quickstart sweeps.

Runs ``aorta-tui --batch recipes/quickstart.yaml`` (3 cells x 2 trials of gpu_smoke) in a fresh
directory, ``--runs`` times, and prints the median of each timeline phase over every trial,
the median trial wall time and each run's wall time. With ``--against DIR`` (a source tree of
another aorta-tui commit, e.g. ``git archive <commit> | tar -x -C DIR``) the runs alternate
between the two trees in one session and the table shows both and their ratio, so a loaded
machine weighs on both alike.

Also prints the per-trial floor measured in the same session: ``python -c "import torch;
torch.zeros(1)"`` (``torch.zeros(1, device='cuda')`` where CUDA is available), the part of a
fresh process per trial that cannot be avoided.

Usage: python benchmarks/trial_timeline.py [--runs 3] [--against DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLOOR = ("import torch; torch.zeros(1, device='cuda') if torch.cuda.is_available() "
         "else torch.zeros(1)")


def one_run(tree: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="aorta-tl-") as tmp:
        cwd = Path(tmp)
        shutil.copy(REPO / "recipes" / "quickstart.yaml", cwd / "quickstart.yaml")
        env = {**os.environ, "PYTHONPATH": str(tree) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "aorta_tui", "--batch", "quickstart.yaml"],
                              cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
        wall = time.monotonic() - t0
        if proc.returncode != 0:
            raise SystemExit(f"sweep failed ({proc.returncode}): {proc.stderr[-2000:]}")
        trials = [json.loads(p.read_text()) for p in cwd.glob("aorta-out/*/*/trials/*/trial-*/result.json")]
    phases: dict[str, list[float]] = {}
    for r in trials:
        for p in (r.get("timeline") or {}).get("phases", []):
            phases.setdefault(p["name"], []).append(p["ms"])
    cells: dict[str, list[float]] = {}
    for r in trials:
        cells.setdefault(r["cell"], []).append(r["process"]["wall_s"])
    return {"run_wall_s": wall, "trial_wall_s": [r["process"]["wall_s"] for r in trials], "phases": phases,
            "cells": cells}


def floor_s() -> float:
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", FLOOR], check=True, capture_output=True)
    return time.monotonic() - t0


def summarise(runs: list[dict]) -> dict:
    phases: dict[str, list[float]] = {}
    for r in runs:
        for k, v in r["phases"].items():
            phases.setdefault(k, []).extend(v)
    cells: dict[str, list[float]] = {}
    for r in runs:
        for k, v in r["cells"].items():
            cells.setdefault(k, []).extend(v)
    return {
        "cell_trial_wall_s": {k: statistics.median(v) for k, v in cells.items()},
        "run_wall_s": statistics.median(r["run_wall_s"] for r in runs),
        "trial_wall_s": statistics.median(x for r in runs for x in r["trial_wall_s"]),
        "phase_median_ms": {k: statistics.median(v) for k, v in phases.items()},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--against", type=Path, help="another aorta-tui source tree to alternate with")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    trees = {"this tree": REPO}
    if args.against:
        trees = {"against": args.against.resolve(), "this tree": REPO}
    runs: dict[str, list[dict]] = {k: [] for k in trees}
    floors = []
    for _ in range(args.runs):
        for label, tree in trees.items():
            runs[label].append(one_run(tree))
        floors.append(floor_s())
    out = {label: summarise(r) for label, r in runs.items()}
    out["floor_s"] = statistics.median(floors)
    out["load_average"] = os.getloadavg()
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    labels = list(trees)
    names = list(out[labels[-1]]["phase_median_ms"])
    print(f"floor (fresh python + import torch + first tensor): {out['floor_s']:.2f} s; "
          f"load average {out['load_average'][0]:.2f}")
    head = " | ".join(labels) + (" | ratio" if len(labels) == 2 else "")
    print(f"| phase (median ms) | {head} |")
    for name in names:
        vals = [out[lb]["phase_median_ms"].get(name) for lb in labels]
        cells = [f"{v:.1f}" if v is not None else "-" for v in vals]
        if len(vals) == 2 and vals[0]:
            cells.append(f"{(vals[1] or 0) / vals[0]:.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    for cell in out[labels[-1]]["cell_trial_wall_s"]:
        vals = [out[lb]["cell_trial_wall_s"].get(cell, 0.0) for lb in labels]
        cells = [f"{v:.2f}" for v in vals] + ([f"{vals[1] / vals[0]:.2f}"] if len(vals) == 2 and vals[0] else [])
        print(f"| trial wall s, {cell} (median) | " + " | ".join(cells) + " |")
    for key in ("trial_wall_s", "run_wall_s"):
        vals = [out[lb][key] for lb in labels]
        cells = [f"{v:.2f}" for v in vals] + ([f"{vals[1] / vals[0]:.2f}"] if len(vals) == 2 else [])
        print(f"| {key} (median) | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
