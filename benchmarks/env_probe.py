"""Benchmark: `aorta-tui env probe` against upstream `aorta env probe`, in one run.

Measures, on this machine and in this run:
  * wall time of each probe command (median of --repeat runs, alternating the two tools),
    as a user would run it: a fresh process writing env.json;
  * the ratio aorta-tui / upstream (target <= 1.0);
  * non-null fields each recorded (aorta-tui: leaves whose value is not null; upstream:
    non-null values in its JSON tree, a list counting as one, as in an aorta-tui leaf);
  * the time `diff_snapshots` takes on two full aorta-tui snapshots (target < 0.1 s), and the
    wall time of the `aorta-tui env diff` command.

Upstream is found from --upstream, $AORTA_UPSTREAM, or /tmp/upstream/bin/aorta. It may be an
`aorta` executable, or a directory holding the `aorta` package (e.g. `pip install --no-deps
--target DIR amd_aorta-0.3.0-py3-none-any.whl`), which is then run with this interpreter.
When upstream is a venv's `bin/aorta`, a second row runs it with this interpreter too, so both
tools see the same torch ("same interpreter": the like-for-like comparison).

With ``--against DIR`` (the source tree of an older aorta-tui commit, e.g. ``git archive
<commit> aorta_tui | tar -x -C DIR``) the old aorta-tui probe runs too, alternating with the
new one, and the old/new ratio is printed. The python section's package versions are also
timed in this process both ways: importlib.metadata over every distribution (the way before
the index) and ``DistIndex``, with the number of METADATA reads each needs.

Usage: python benchmarks/env_probe.py [--upstream PATH] [--against DIR] [--repeat 3] [--no-torch]
Exit codes: 0 measured; 3 upstream not installed; 1 a probe failed.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT_UPSTREAM = "/tmp/upstream/bin/aorta"
UPSTREAM_MAIN = "import sys; from aorta.cli import main; sys.argv[0] = 'aorta'; sys.exit(main())"


def upstream_commands(spec: str, out: str) -> list[tuple[str, list[str], dict[str, str]]]:
    """(label, argv, extra env) for each way of running upstream we can derive from ``spec``."""
    args = ["env", "probe", "-o", out]
    rows = []
    if os.path.isdir(spec):
        env = {"PYTHONPATH": spec + os.pathsep + os.environ.get("PYTHONPATH", "")}
        rows.append(("upstream (this interpreter)", [sys.executable, "-c", UPSTREAM_MAIN, *args], env))
        return rows
    rows.append(("upstream (as installed)", [spec, *args], {}))
    venv = Path(spec).resolve().parent.parent if Path(spec).parent.name == "bin" else None
    sites = glob.glob(str(Path(spec).parent.parent / "lib" / "python*" / "site-packages")) if venv else []
    if sites:
        env = {"PYTHONPATH": sites[0] + os.pathsep + os.environ.get("PYTHONPATH", "")}
        rows.append(("upstream (same interpreter)", [sys.executable, "-c", UPSTREAM_MAIN, *args], env))
    return rows


def timed(argv: list[str], extra_env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {**os.environ, **extra_env}
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO)
    return time.perf_counter() - t0, proc


def _load(path: str) -> dict:
    with open(path) as fh:
        return json.load(fh)


def count_ours(path: str, non_null: bool = True) -> int:
    from aorta_tui.envsnap import iter_leaves

    return sum(1 for _, leaf in iter_leaves(_load(path)) if leaf["value"] is not None or not non_null)


def count_upstream(path: str, non_null: bool = True) -> int:
    from aorta_tui.envsnap.upstream import count_non_null, leaves

    return count_non_null(_load(path)) if non_null else len(leaves(_load(path)))


def section_ratio(repeat: int) -> str:
    """The python section's package versions, both ways, in this process."""
    from importlib import metadata

    from aorta_tui.envsnap.capture import python_env

    def old() -> int:
        installed: dict[str, str] = {}
        reads = 0
        for dist in metadata.distributions():
            name = dist.metadata.get("Name") if dist.metadata else None
            reads += 2  # .metadata, then .version parses METADATA again
            if name:
                installed.setdefault(python_env._norm(name), dist.version)
        return reads

    def new() -> int:
        index = python_env.DistIndex()
        return sum(1 for name in python_env.PACKAGES if python_env._norm(name) in index.files)

    best: dict[str, tuple[float, int]] = {}
    for _ in range(max(repeat, 3)):
        for label, fn in (("importlib.metadata", old), ("DistIndex", new)):
            t0 = time.perf_counter()
            reads = fn()
            dt = time.perf_counter() - t0
            if label not in best or dt < best[label][0]:
                best[label] = (dt, reads)
    (o, o_reads), (n, n_reads) = best["importlib.metadata"], best["DistIndex"]
    return (f"python section package versions (in process, best of {max(repeat, 3)}): importlib.metadata "
            f"{o * 1000:.1f} ms ({o_reads} METADATA reads), DistIndex {n * 1000:.1f} ms ({n_reads} reads); "
            f"ratio {n / o:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--upstream", default=os.environ.get("AORTA_UPSTREAM", DEFAULT_UPSTREAM))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-torch", action="store_true", help="run aorta-tui with --no-torch")
    parser.add_argument("--against", help="an older aorta-tui source tree to compare with")
    args = parser.parse_args()
    spec = args.upstream
    have_upstream = os.path.isdir(os.path.join(spec, "aorta")) or (os.path.isfile(spec) and os.access(spec, os.X_OK))
    if not have_upstream and args.against:
        print(f"upstream AORTA not found at {spec!r}: comparing with --against only", file=sys.stderr)
    elif not have_upstream:
        print(f"upstream AORTA not found at {spec!r}.\n"
              "Install it, then point this script at it:\n"
              "  python -m venv /tmp/upstream && /tmp/upstream/bin/pip install amd-aorta==0.3.0\n"
              "  python benchmarks/env_probe.py --upstream /tmp/upstream/bin/aorta\n"
              "or: pip install --no-deps --target /tmp/aorta-up amd-aorta==0.3.0 "
              "and --upstream /tmp/aorta-up (or set AORTA_UPSTREAM)", file=sys.stderr)
        return 3
    with tempfile.TemporaryDirectory() as tmp:
        ours_out = [os.path.join(tmp, f"ours-{i}.json") for i in range(2)]
        up_out = os.path.join(tmp, "upstream.json")
        flags = ["--no-torch"] if args.no_torch else []
        rows = upstream_commands(spec, up_out) if have_upstream else []
        times: dict[str, list[float]] = {"aorta-tui": []} | {label: [] for label, _, _ in rows}
        if args.against:
            old_env = {"PYTHONPATH": os.path.abspath(args.against) + os.pathsep + os.environ.get("PYTHONPATH", "")}
            old_out = os.path.join(tmp, "old.json")
            rows.insert(0, ("aorta-tui (--against)",
                            [sys.executable, "-m", "aorta_tui", "env", "probe", "-o", old_out, *flags], old_env))
            times["aorta-tui (--against)"] = []
        for i in range(args.repeat):
            ours_argv = [sys.executable, "-m", "aorta_tui", "env", "probe", "-o", ours_out[i % 2], *flags]
            dt, proc = timed(ours_argv, {})
            if proc.returncode != 0:
                print(f"aorta-tui env probe failed ({proc.returncode}):\n{proc.stderr}", file=sys.stderr)
                return 1
            times["aorta-tui"].append(dt)
            for label, argv, env in rows:
                dt, proc = timed(argv, env)
                if proc.returncode != 0:
                    print(f"{label} failed ({proc.returncode}):\n{proc.stderr[-2000:]}", file=sys.stderr)
                    return 1
                times[label].append(dt)
        ours_fields = count_ours(ours_out[0])
        up_fields = count_upstream(up_out) if have_upstream else 0
        ours_total = count_ours(ours_out[0], non_null=False)
        up_total = count_upstream(up_out, non_null=False) if have_upstream else 0
        old_fields = old_lost = None
        if args.against:
            from aorta_tui.envsnap import iter_leaves

            new_paths = {p for p, _ in iter_leaves(_load(ours_out[0]))}
            old_paths = {p for p, _ in iter_leaves(_load(old_out))}
            old_fields, old_lost = count_ours(old_out), sorted(old_paths - new_paths)

        from aorta_tui.envsnap import diff_snapshots, load_snapshot

        # read as the command reads them (the timing below is the diff's alone)
        a, b = (load_snapshot(p) for p in (ours_out if args.repeat > 1 else ours_out[:1] * 2))
        diff_times = []
        for _ in range(20):
            t0 = time.perf_counter()
            diff_snapshots(a, b, include_volatile=True)
            diff_times.append(time.perf_counter() - t0)
        cli_dt, cli = timed([sys.executable, "-m", "aorta_tui", "env", "diff", ours_out[0],
                             ours_out[1] if args.repeat > 1 else ours_out[0]], {})

    ours_t = statistics.median(times["aorta-tui"])
    print(f"machine: {os.uname().machine}, python {sys.version.split()[0]}, "
          f"repeat {args.repeat} (median wall seconds; each run a fresh process)")
    print(f"{'probe':<30} {'median s':>9} {'runs':>30} {'non-null fields':>16}")
    print(f"{'aorta-tui' + (' --no-torch' if args.no_torch else ''):<30} {ours_t:>9.3f} "
          f"{' '.join(f'{t:.2f}' for t in times['aorta-tui']):>30} {ours_fields:>16}")
    for label, _, _ in rows:
        t = statistics.median(times[label])
        n = old_fields if label.endswith("(--against)") else up_fields
        print(f"{label:<30} {t:>9.3f} {' '.join(f'{x:.2f}' for x in times[label]):>30} {n:>16}")
    if args.against:
        print(f"fields of the old aorta-tui snapshot missing from the new one: {len(old_lost or [])}"
              + (f" ({', '.join(old_lost[:5])})" if old_lost else ""))
    print(f"all fields, null included: aorta-tui {ours_total} leaves (each with a state and a source); "
          f"upstream {up_total} values")
    for label, _, _ in rows:
        target = "" if label.endswith("(--against)") else " (target <= 1.0; issue 15: <= 0.5)"
        print(f"ratio aorta-tui / {label}: {ours_t / statistics.median(times[label]):.2f}{target}")
    print(section_ratio(args.repeat))
    print(f"fields: aorta-tui {ours_fields} vs upstream {up_fields} "
          f"({ours_fields / max(up_fields, 1):.2f}x)")
    print(f"diff_snapshots of two full snapshots: median {statistics.median(diff_times) * 1000:.1f} ms "
          f"(target < 100 ms); `aorta-tui env diff` command wall {cli_dt:.2f} s (exit {cli.returncode})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
