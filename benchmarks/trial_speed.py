"""Benchmark (issue 15): GPU trials against upstream amd-aorta 0.3.0 and the per-trial floor.

In one run, alternated round by round so a loaded machine weighs on every side alike:

* upstream's ``training`` recipe (2 cells x 2 trials x 20 steps) through upstream
  ``aorta sweep run`` (which runs ``training`` in process: one ``import torch`` for the sweep);
* the same recipe through ``aorta-tui --batch`` in the default isolation (a fresh process per
  trial) and with ``trial_isolation: warm`` (trials forked from a zygote that imported torch);
* the per-trial floor: ``python3 -c "import torch; torch.zeros(1, device='cuda')"`` (the CPU
  tensor where no GPU exists);
* ``env probe``: aorta-tui against upstream, with the fields each recorded.

``--bytecode image`` (the default) runs every stage on the image as it is: where it keeps no
bytecode (``PYTHONDONTWRITEBYTECODE=1``, a uv-built torch) upstream compiles torch once per
sweep in its own process, and aorta-tui's children use its bytecode cache
(``--bytecode-cache auto``, core/bytecode.py), empty when the benchmark starts (its own
``XDG_CACHE_HOME``): the first aorta-tui run pays the compile, and the table shows each round.
``--bytecode warmed`` gives every stage (upstream, aorta-tui, the floor) one warmed
``PYTHONPYCACHEPREFIX`` and no ``PYTHONDONTWRITEBYTECODE``: the image with bytecode cached.

Prints the ratios, the targets and each of our trials' timeline summary; writes everything
to ``$OUT/trial_speed-<bytecode>.json`` (``$OUT`` defaults to a temporary directory). A stage that fails
is reported and the others still run; a stage is skipped when it would end past ``--budget``
seconds (default 210: the whole run stays under 4 minutes).

Upstream comes from ``--upstream DIR`` (a ``pip install --target`` tree), else ``/tmp/site``;
when that holds no ``aorta`` package, the wheel ``.whl/amd_aorta-0.3.0*.whl`` of this
repository is installed there with ``pip install --no-deps --target``.

    python benchmarks/trial_speed.py [--rounds 2] [--budget 210] [--upstream /tmp/site] [--bytecode image|warmed]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

UPSTREAM_MAIN = "import sys; from aorta.cli import main; sys.argv[0] = 'aorta'; sys.exit(main())"
FLOOR = ("import torch; torch.zeros(1, device='cuda') if torch.cuda.is_available() "
         "else torch.zeros(1)")
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
TRAINING = """\
schema_version: 1
ticket: BENCH-TRAINING
workload: training
trials: 2
steps: 20
cells:
  - name: baseline-local
    mitigations: [none]
    environment: local
  - name: tf32_off-local
    mitigations: [tf32_off]
    environment: local
"""


def ensure_upstream(site: Path) -> str | None:
    """Why upstream cannot run, or None once ``site`` holds it."""
    if not (site / "aorta").is_dir():
        wheels = sorted(glob.glob(str(REPO / ".whl" / "amd_aorta-0.3.0*.whl")))
        if not wheels:
            return f"no upstream at {site} and no .whl/amd_aorta-0.3.0*.whl to install"
        p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                            "--target", str(site), wheels[0]], capture_output=True, text=True)
        if p.returncode != 0:
            return f"pip install of {wheels[0]} failed: {p.stderr[-500:]}"
    missing = [m for m in ("yaml", "click") if subprocess.run(
        [sys.executable, "-c", f"import {m}"], capture_output=True).returncode != 0]
    return f"upstream needs {', '.join(missing)} (not importable here)" if missing else None


BASE_ENV: dict[str, str] = dict(os.environ)  # every stage's environment (main() sets it)


def run(argv: list[str], cwd: Path, extra_env: dict[str, str] | None = None, timeout: float = 300,
        base: dict[str, str] | None = None) -> dict[str, Any]:
    env = {**(BASE_ENV if base is None else base), **SAFE_ENV, **(extra_env or {})}
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"wall_s": time.monotonic() - t0, "rc": None, "error": f"timed out after {timeout:g} s"}
    out = {"wall_s": time.monotonic() - t0, "rc": p.returncode}
    if p.returncode not in (0, 1):
        out["error"] = (p.stderr or p.stdout)[-1500:]
    return out


def our_trials(out_dir: Path) -> list[dict[str, Any]]:
    from aorta_tui.trial import timeline

    rows = []
    for path in sorted(out_dir.glob("*/*/trials/*/trial-*/result.json")):
        r = json.loads(path.read_text())
        tl = r.get("timeline") or {}
        steps = r.get("step_times_s") or []
        rows.append({"trial": r["trial_id"], "verdict": r["verdict"], "wall_s": r["process"]["wall_s"],
                     "steps_s": sum(steps), "summary": timeline.summary(tl, top=5),
                     "sampler_stop_wait_ms": ((tl.get("beside") or {}).get("gpu_sampler") or {}).get("stop_wait_ms"),
                     "phases_ms": {p["name"]: p["ms"] for p in tl.get("phases", [])}})
    return rows


class Bench:
    def __init__(self, work: Path, site: Path, upstream_problem: str | None, budget: float) -> None:
        self.work, self.site, self.upstream_problem = work, site, upstream_problem
        self.t0, self.budget = time.monotonic(), budget
        self.results: dict[str, list[dict[str, Any]]] = {}
        self.n = 0
        (work / "training.yaml").write_text(TRAINING)
        (work / "training-warm.yaml").write_text(TRAINING + "trial_isolation: warm\n")

    def stage(self, name: str, fn: Any) -> None:
        done = self.results.setdefault(name, [])
        last = done[-1]["wall_s"] if done else 0.0
        if time.monotonic() - self.t0 + last > self.budget:
            done.append({"skipped": f"past the {self.budget:g} s budget", "wall_s": last})
            return
        self.n += 1
        try:
            done.append(fn(self.work / f"{name}-{self.n}"))
        except Exception as exc:  # report it; the other stages still run
            done.append({"error": f"{type(exc).__name__}: {exc}", "wall_s": 0.0})
        r = done[-1]
        print(f"  {name}: {r.get('wall_s', 0):.2f} s" + (f"  ERROR {r['error'][-300:]}" if r.get("error") else ""),
              flush=True)

    def floor(self, d: Path) -> dict[str, Any]:
        d.mkdir()
        return run([sys.executable, "-c", FLOOR], d)

    def floor_cached(self, d: Path) -> dict[str, Any]:
        """The floor in the environment aorta-tui gives its trials (its bytecode cache, where
        the image keeps none): what a fresh trial process cannot go below."""
        from aorta_tui.core.bytecode import plan_bytecode

        d.mkdir()
        return run([sys.executable, "-c", FLOOR], d, base=plan_bytecode("auto", BASE_ENV).apply(BASE_ENV))

    def upstream_training(self, d: Path) -> dict[str, Any]:
        if self.upstream_problem:
            return {"error": self.upstream_problem, "wall_s": 0.0}
        d.mkdir()
        return run([sys.executable, "-c", UPSTREAM_MAIN, "sweep", "run", "--recipe",
                    str(self.work / "training.yaml"), "--output", str(d / "out")], d,
                   {"PYTHONPATH": str(self.site)})

    def ours(self, recipe: str) -> Any:
        def go(d: Path) -> dict[str, Any]:
            d.mkdir()
            r = run([sys.executable, "-m", "aorta_tui", "--batch", str(self.work / recipe),
                     "--output", str(d / "out")], d)
            r["trials"] = our_trials(d / "out")
            return r
        return go

    def env_ours(self, d: Path) -> dict[str, Any]:
        d.mkdir()
        r = run([sys.executable, "-m", "aorta_tui", "env", "probe", "-o", str(d / "env.json")], d)
        from env_probe import count_ours

        r["fields"] = count_ours(str(d / "env.json")) if (d / "env.json").exists() else None
        return r

    def env_upstream(self, d: Path) -> dict[str, Any]:
        if self.upstream_problem:
            return {"error": self.upstream_problem, "wall_s": 0.0}
        d.mkdir()
        r = run([sys.executable, "-c", UPSTREAM_MAIN, "env", "probe", "-o", str(d / "env.json")], d,
                {"PYTHONPATH": str(self.site)})
        from env_probe import count_upstream

        r["fields"] = count_upstream(str(d / "env.json")) if (d / "env.json").exists() else None
        return r


def median_wall(rows: list[dict[str, Any]]) -> float | None:
    walls = [r["wall_s"] for r in rows if not r.get("error") and not r.get("skipped")]
    return statistics.median(walls) if walls else None


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "-"


def report(b: Bench) -> dict[str, Any]:
    res = b.results
    med = {k: median_wall(v) for k, v in res.items()}
    floor = med.get("floor")
    up = med.get("upstream_training")
    out: dict[str, Any] = {"median_wall_s": med, "ratios": {}, "targets": {}}
    print("\n| figure | median s | ratio | target |")
    print("|---|---:|---:|---|")
    print(f"| per-trial floor (python + import torch + first tensor) | {floor or '-'} | | |")
    if med.get("floor_cached") is not None:
        print(f"| the same with aorta-tui's bytecode cache | {med['floor_cached']} | | |")
    for key in ("upstream_training", "ours_default", "ours_warm", "env_ours", "env_upstream"):
        walls = [f"{r['wall_s']:.2f}" for r in res.get(key, []) if not r.get("error") and not r.get("skipped")]
        print(f"| {key}: each round | {', '.join(walls) or '-'} | | |")
    print(f"| upstream `aorta sweep run` training | {up or '-'} | 1.00 | |")
    for key, label, target in (("ours_default", "aorta-tui --batch (process)", 1.5),
                               ("ours_warm", "aorta-tui --batch (trial_isolation: warm)", 1.0)):
        v = med.get(key)
        out["ratios"][key] = v / up if v and up else None
        out["targets"][key] = f"<= {target}x upstream"
        print(f"| {label} | {v or '-'} | {ratio(v, up)} | <= {target} |")
    eo, eu = med.get("env_ours"), med.get("env_upstream")
    out["ratios"]["env_probe"] = eo / eu if eo and eu else None
    print(f"| env probe: aorta-tui / upstream | {eo or '-'} / {eu or '-'} | {ratio(eo, eu)} | <= 0.5 |")
    fo = [r.get("fields") for r in res.get("env_ours", []) if r.get("fields")]
    fu = [r.get("fields") for r in res.get("env_upstream", []) if r.get("fields")]
    out["env_fields"] = {"ours": fo, "upstream": fu}
    print(f"| env probe non-null fields: aorta-tui / upstream | {fo[-1] if fo else '-'} / {fu[-1] if fu else '-'} | | |")
    for key in ("ours_default", "ours_warm"):
        per = [t for r in res.get(key, []) for t in r.get("trials", [])]
        over = [t["wall_s"] - t["steps_s"] for t in per]
        out[f"{key}_per_trial"] = {"wall_s": statistics.median([t["wall_s"] for t in per]) if per else None,
                                   "wall_minus_steps_s": statistics.median(over) if over else None}
        if per and floor:
            x = statistics.median(over) / floor
            print(f"{key}: per-trial wall minus its steps {statistics.median(over):.2f} s = {x:.2f}x the floor "
                  "(target for the default: <= 1.3x)")
        print(f"{key} trials (timeline summary):")
        for t in per:
            print(f"  {t['trial']}: {t['verdict']} {t['wall_s']:.2f} s (steps {t['steps_s']:.2f} s; "
                  f"sampler stop {t['sampler_stop_wait_ms']} ms) {t['summary']}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget", type=float, default=210.0)
    ap.add_argument("--upstream", type=Path, default=Path("/tmp/site"))
    ap.add_argument("--bytecode", choices=("image", "warmed"), default="image")
    args = ap.parse_args()
    out_dir = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="trial-speed-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    problem = ensure_upstream(args.upstream)
    if problem:
        print(f"upstream: {problem}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="trial-speed-work-"))
    if args.bytecode == "image":  # aorta-tui's own cache starts empty: the first run compiles
        BASE_ENV["XDG_CACHE_HOME"] = str(work / "xdg-cache")
    else:  # one warmed bytecode cache for every stage
        BASE_ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        BASE_ENV["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        warm = run([sys.executable, "-c", "import torch, torch._dynamo, aorta_tui.cli.main, "
                    "aorta_tui.trial.worker, aorta_tui.envsnap.capture"], work,
                   {"PYTHONPATH": os.pathsep.join([str(args.upstream), str(REPO)])})
        warm2 = run([sys.executable, "-c", "import aorta.cli"], work, {"PYTHONPATH": str(args.upstream)})
        print(f"warmed the bytecode cache {work / 'pycache'} in {warm['wall_s']:.1f} + {warm2['wall_s']:.1f} s",
              flush=True)
    print(f"bytecode: {args.bytecode}; PYTHONDONTWRITEBYTECODE={BASE_ENV.get('PYTHONDONTWRITEBYTECODE')!r} "
          f"PYTHONPYCACHEPREFIX={BASE_ENV.get('PYTHONPYCACHEPREFIX')!r}", flush=True)
    b = Bench(work, args.upstream, problem, args.budget)
    for i in range(args.rounds):
        print(f"round {i + 1}", flush=True)
        order = ["floor", "upstream_training", "ours_default", "ours_warm", "env_ours", "env_upstream"]
        if i % 2:
            order = ["floor", "ours_warm", "ours_default", "upstream_training", "env_upstream", "env_ours"]
        if args.bytecode == "image":  # last: the cache has been filled by this round's runs
            order.append("floor_cached")
        for name in order:
            fn = {"floor": b.floor, "floor_cached": b.floor_cached, "upstream_training": b.upstream_training,
                  "ours_default": b.ours("training.yaml"), "ours_warm": b.ours("training-warm.yaml"),
                  "env_ours": b.env_ours, "env_upstream": b.env_upstream}[name]
            b.stage(name, fn)
    summary = report(b)
    data = {"date": time.strftime("%Y-%m-%d %H:%M %Z"), "host": os.uname().nodename, "load_average": os.getloadavg(),
            "bytecode": args.bytecode,
            "upstream_problem": problem, "total_s": time.monotonic() - b.t0, "results": b.results, **summary}
    try:
        import torch

        data["torch"] = torch.__version__
        data["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception as exc:  # the figures stand without it
        data["torch"] = f"not importable: {exc}"
    path = out_dir / f"trial_speed-{args.bytecode}.json"
    path.write_text(json.dumps(data, indent=2, default=str))
    print(f"total {data['total_s']:.1f} s; figures in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
