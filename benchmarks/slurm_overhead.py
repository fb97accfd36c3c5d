#!/usr/bin/env python3
"""What the Slurm executor costs per trial, against the local executor and bare Slurm, in one run.

The same N trials (a probe recipe of ``--cells`` cells running ``--command``, default
``true``) run four ways, alternated over ``--rounds`` rounds so drift falls on every mode:

- ``local``: ``aorta-tui --batch --executor local`` (processes on this machine);
- ``slurm``: ``aorta-tui --batch --executor slurm`` (one batched job array; probe job included);
- ``bare_wait``: a shell-free loop of ``sbatch --wait`` running the same command, one job
  after another (what a user's script does; the issue's reference);
- ``bare_array``: one ``sbatch --array`` of the same command, polled with ``squeue`` every
  0.2 s until every task ended (the floor of any Slurm orchestrator: no Python, no records).

Per mode: total wall time and wall time per trial (median over the rounds); the Slurm
executor's ratio to ``bare_wait`` and to ``bare_array`` (the target: at most 1.2x), and its
overhead per trial over ``bare_array``. Where that overhead goes (``slurm_phases``, medians):
``startup`` (the same command with ``--dry-run``: the CLI's start, the recipe, the checks, no
job), ``before_trials`` (from the command's start to its journal's ``run_started``: start-up plus
the shared-filesystem probe job), ``trials`` (``run_started`` to ``run_finished``: the array's
submission, its tasks, the records) and ``after`` (``run_finished`` to the exit). The header
line gives the date and the load average, since a loaded 2-core box moves every figure.

Every Slurm trial runs Python three times over (the orchestrator, the probe job, each task's
wrapper), the bare modes none: where ``PYTHONDONTWRITEBYTECODE`` is set and aorta_tui has no
bytecode cache (an editable install; pip compiles a wheel's modules when it installs them),
each of those processes compiles aorta_tui's modules from source first. The header says which
it measured (``bytecode``); ``--compile`` writes the cache first (``compileall``), as an
installed package has it. ``--submit N`` also times the Slurm executor's
submission of an N-trial sweep (prepare every trial + its sbatch calls, then scancel), the
figure that says whether a 1,000-trial sweep submits one job per second.

Needs a running Slurm (scripts/slurm-local.sh makes a one-node one). Writes ``slurm_overhead.json``
under ``--out`` (or $OUT) and prints a short table.

    python3 benchmarks/slurm_overhead.py --trials 10 --rounds 3 --submit 1000 --out "$OUT"
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RECIPE = """\
schema_version: 1
mode: probe
ticket: bench
trials: {trials}
mitigation_axis: {cells}
diagnostic_axis: [none]
"""
CELL_NAMES = ["none", "cuda_launch_blocking", "cuda_module_loading_eager", "amd_log_level_4"]


def _aorta(recipe: Path, out: Path, executor: str, command: list[str],
           phases: dict[str, list[float]] | None = None, *, dry_run: bool = False) -> float:
    t0, epoch0 = time.perf_counter(), time.time()
    proc = subprocess.run([sys.executable, "-m", "aorta_tui", "--batch", str(recipe), "--output",
                           str(out), "--no-snapshot", "--executor", executor,
                           *(["--dry-run"] if dry_run else []), "--", *command],
                          capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    epoch1 = time.time()
    if proc.returncode != 0:
        raise RuntimeError(f"{executor} sweep exited {proc.returncode}: {proc.stderr[-400:]}")
    if phases is not None and not dry_run:
        ts = _journal_times(out)
        if "run_started" in ts and "run_finished" in ts:
            phases["before_trials"].append(ts["run_started"] - epoch0)
            phases["trials"].append(ts["run_finished"] - ts["run_started"])
            phases["after"].append(epoch1 - ts["run_finished"])
    return wall


def _bytecode_state() -> str:
    """Whether the processes of a run load aorta_tui from a bytecode cache or compile it."""
    import importlib.util

    import aorta_tui

    pkg = Path(aorta_tui.__file__).parent
    sources = [p for p in pkg.rglob("*.py") if "__pycache__" not in p.parts]
    cached = sum(1 for p in sources if Path(importlib.util.cache_from_source(str(p))).exists())
    writes = not sys.flags.dont_write_bytecode and not os.environ.get("PYTHONDONTWRITEBYTECODE")
    if cached == len(sources):
        return f"cached ({cached} modules)"
    if writes:
        return f"{cached} of {len(sources)} modules cached; the first run writes the rest"
    return (f"{cached} of {len(sources)} modules cached and PYTHONDONTWRITEBYTECODE set: every "
            "process compiles the rest from source (--compile writes the cache)")


def _journal_times(out: Path) -> dict[str, float]:
    """``run_started`` / ``run_finished`` epoch times of the one run under ``out``."""
    found: dict[str, float] = {}
    for journal in out.glob("*/*/journal.jsonl"):
        for line in journal.read_text().splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("event") in ("run_started", "run_finished") and isinstance(ev.get("ts"), (int, float)):
                found.setdefault(ev["event"], float(ev["ts"]))
    return found


def _bare_wait(n: int, command: list[str], workdir: Path) -> float:
    script = "#!/bin/sh\nexec " + " ".join(shlex.quote(c) for c in command) + "\n"
    t0 = time.perf_counter()
    for _ in range(n):
        subprocess.run(["sbatch", "--wait", "--quiet", "--output=/dev/null", f"--chdir={workdir}"],
                       input=script, text=True, check=True, timeout=1800)
    return time.perf_counter() - t0


def _bare_array(n: int, command: list[str], workdir: Path) -> float:
    script = "#!/bin/sh\nexec " + " ".join(shlex.quote(c) for c in command) + "\n"
    t0 = time.perf_counter()
    job = subprocess.run(["sbatch", "--parsable", f"--array=0-{n - 1}", "--output=/dev/null",
                          f"--chdir={workdir}"], input=script, text=True, capture_output=True,
                         check=True, timeout=600).stdout.strip().split(";")[0]
    while True:
        out = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-j", job, "-o", "%T"],
                             capture_output=True, text=True, timeout=60).stdout.split()
        if len(out) >= n and all(s in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT") for s in out):
            return time.perf_counter() - t0
        time.sleep(0.2)


def _submission(n: int, workdir: Path) -> dict[str, object]:
    """The Slurm executor's own submission of an n-trial sweep, in process, then scancel."""
    from aorta_tui.core.events import EventBus
    from aorta_tui.executor import slurm_cmd, with_executor_kind
    from aorta_tui.recipe import load_recipe_text, with_command
    from aorta_tui.registry.registry import Registry
    from aorta_tui.sweep.orchestrator import Sweep, SweepOptions

    text = RECIPE.format(trials=n, cells="[none]")
    recipe = with_executor_kind(with_command(load_recipe_text(text), ["true"]), "slurm")
    sweep = Sweep(recipe, Registry([]), SweepOptions(output=workdir / "submit", snapshots=False), EventBus())
    run_dir = workdir / "submit" / "bench" / "20000101-000000-sub0"
    run_dir.mkdir(parents=True)
    calls = []
    real_call = slurm_cmd.call

    def counting(argv, **kw):  # counts the sbatch calls the executor makes
        if argv and argv[0] == "sbatch":
            calls.append(argv[0])
        return real_call(argv, **kw)

    slurm_cmd.call = counting
    t0 = time.perf_counter()
    try:
        sweep.executor.begin(sweep, run_dir, list(sweep.plan.trials), 1)
        took = time.perf_counter() - t0
    finally:
        slurm_cmd.call = real_call
        sweep.executor.end(interrupted=True)  # scancel every task again
    return {"trials": n, "seconds": round(took, 3), "sbatch_calls": len(calls),
            "trials_per_second": round(n / took, 1) if took else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=10, help="trials per round (all modes)")
    ap.add_argument("--cells", type=int, default=2, choices=range(1, len(CELL_NAMES) + 1))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--command", default="true", help="the trial's command (split like a shell)")
    ap.add_argument("--submit", type=int, default=0, help="also time submitting an N-trial sweep")
    ap.add_argument("--compile", action="store_true",
                    help="write aorta_tui's bytecode cache first (compileall), as pip install does")
    ap.add_argument("--skip", action="append", default=[], choices=["local", "bare_wait"],
                    help="leave a mode out (bare_wait takes ~2 s a trial)")
    ap.add_argument("--out", default=os.environ.get("OUT"))
    args = ap.parse_args()
    command = shlex.split(args.command)
    if args.compile:
        import compileall

        import aorta_tui

        compileall.compile_dir(str(Path(aorta_tui.__file__).parent), quiet=1)
    bytecode = _bytecode_state()
    per_cell = max(1, args.trials // args.cells)
    n = per_cell * args.cells
    walls: dict[str, list[float]] = {m: [] for m in ("local", "slurm", "bare_wait", "bare_array")
                                     if m not in args.skip}
    phases: dict[str, list[float]] = {p: [] for p in ("startup", "before_trials", "trials", "after")}
    errors: list[str] = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="aorta-slurm-bench-", dir=os.getcwd()) as tmp:
        work = Path(tmp)
        recipe = work / "bench.yaml"
        recipe.write_text(RECIPE.format(trials=per_cell, cells="[" + ", ".join(CELL_NAMES[:args.cells]) + "]"))
        modes = list(walls)
        for r in range(args.rounds):
            for mode in modes[r % len(modes):] + modes[:r % len(modes)]:  # rotate the order
                try:
                    if mode == "slurm":
                        walls[mode].append(_aorta(recipe, work / f"out-{mode}-{r}", mode, command, phases))
                        phases["startup"].append(_aorta(recipe, work / f"out-dry-{r}", mode, command,
                                                        dry_run=True))
                    elif mode == "local":
                        walls[mode].append(_aorta(recipe, work / f"out-{mode}-{r}", mode, command))
                    elif mode == "bare_wait":
                        walls[mode].append(_bare_wait(n, command, work))
                    else:
                        walls[mode].append(_bare_array(n, command, work))
                except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
                    errors.append(f"round {r} {mode}: {exc}")
        submit = None
        if args.submit:
            try:
                submit = _submission(args.submit, work)
            except Exception as exc:  # a benchmark reports every stage, it never stops at one
                errors.append(f"submission of {args.submit}: {exc}")
    med = {m: statistics.median(v) for m, v in walls.items() if v}
    load_after = os.getloadavg()
    result = {
        "machine": os.uname().nodename, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpus": os.cpu_count(), "bytecode": bytecode,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in load_after],
        "slurm_phases_median_s": {p: round(statistics.median(v), 3) for p, v in phases.items() if v},
        "trials": n, "rounds": args.rounds, "command": command,
        "wall_s": {m: [round(x, 3) for x in v] for m, v in walls.items()},
        "median_wall_s": {m: round(v, 3) for m, v in med.items()},
        "per_trial_s": {m: round(v / n, 4) for m, v in med.items()},
        "submission": submit, "errors": errors,
    }
    if "slurm" in med:
        for ref in ("bare_wait", "bare_array"):
            if ref in med:
                result[f"slurm_over_{ref}"] = round(med["slurm"] / med[ref], 3)
        if "bare_array" in med:
            result["slurm_overhead_per_trial_s"] = round((med["slurm"] - med["bare_array"]) / n, 4)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "slurm_overhead.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"{n} trials x {args.rounds} rounds of {' '.join(command)!r} on {os.uname().nodename} "
          f"({os.cpu_count()} CPUs), {result['date']}, load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after; aorta_tui bytecode: {bytecode}")
    for m in walls:
        if m in med:
            print(f"  {m:<11} {med[m]:8.2f} s total  {med[m] / n * 1000:8.1f} ms/trial")
    for k in ("slurm_over_bare_wait", "slurm_over_bare_array", "slurm_overhead_per_trial_s"):
        if k in result:
            print(f"  {k}: {result[k]}")
    if result["slurm_phases_median_s"]:
        print("  slurm phases (median s): " + ", ".join(
            f"{p} {v:.2f}" for p, v in result["slurm_phases_median_s"].items()))
    if submit:
        print(f"  submitting {submit['trials']} trials: {submit['seconds']} s in "
              f"{submit['sbatch_calls']} sbatch call(s) ({submit['trials_per_second']} trials/s)")
    for e in errors:
        print(f"  error: {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
