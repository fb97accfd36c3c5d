#!/usr/bin/env python3
"""Multi-GPU checks of issue 8, sized to whatever this machine has.

GPU count -> what runs:  0: gloo on CPU with 2 processes (emulated streams);
1: NCCL with world size 1 (the hang probe and the trace use 2 processes: see below);
N >= 2: NCCL over all N GPUs, one rank per GPU.

Items (each prints a markdown table and writes it under --out):
  overlap  `queue run comms_compute_overlap --param collectives=real` under torchrun, modes
           compute_only / comms_only / comms_compute: throughput, all-reduce bandwidth and
           overlap per rank (+ on CUDA a `--timing cupti` run: events vs profiler per rank)
  hetero   `queue run hetero_kernels --streams 16` over every device: per-device figures, memory
  hang     the probe sweep recipes/torchrun_hang_probe.yaml: a late rank vs a healthy control
  ebpf     the eBPF `cuda` probe set over two processes at once, per-pid histograms (on CPU the
           fake libcuda of tests/trace/fakelib, built with gcc; on GPUs the ranks' real libcuda)

    python3 scripts/multigpu_check.py --out multigpu-out
    python3 scripts/multigpu_check.py --out /tmp/x --only hang,ebpf
    python3 scripts/multigpu_check.py --plan 2      # the commands a 2-GPU machine would run

Every process it starts gets NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NVSHMEM_DISABLE_NVLS=1. Exit code: 0 when every item that ran met its expectations, 1 otherwise.
Internal: ``multigpu_check.py --rank-exec ARGS...`` is the per-rank shim torchrun starts: it
writes its pid, replaces ``{LOCAL_RANK}`` in ARGS and execs ``python -m aorta_tui ARGS``
(`queue run` has no per-rank device choice of its own).
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FAKELIB = REPO / "tests" / "trace" / "fakelib"  # the trace tests' C sources, built, not copied
RECIPE = REPO / "recipes" / "torchrun_hang_probe.yaml"
MITIGATIONS = REPO / "recipes" / "torchrun_hang_probe.mitigations.json"
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
ITEMS = ("overlap", "hetero", "hang", "ebpf")
MODES = {  # comms_compute_overlap parameters of each mode
    "compute_only": {"collectives_per_iteration": "0"},
    "comms_only": {"gemms_per_stream": "0"},
    "comms_compute": {},
}
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
# The ebpf item on CPU: two "ranks" driving the fake libcuda with different paces and counts,
# so a per-pid breakdown that mixed them up could not match.
FAKE_RANKS = ({"launches": 160, "delay_us": 300, "stream": "0x7f00aa000010"},
              {"launches": 80, "delay_us": 900, "stream": "0x7f00bb000020"})


# -- small helpers -----------------------------------------------------------------------------
def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(NO_MULTICAST)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.update(extra or {})
    return env


def run_logged(argv: list[str], log: Path, timeout_s: float, env: dict[str, str] | None = None) -> tuple[int, float]:
    """Run argv with stdout+stderr into ``log``; (exit code, wall seconds). 124 on timeout."""
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(log, "wb") as fh:
        fh.write(("$ " + " ".join(argv) + "\n").encode())
        fh.flush()
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env or child_env(),
                                cwd=REPO, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            rc = 124
    return rc, time.monotonic() - t0


def log_tail(log: Path, n: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:.{digits}g}"
    return str(value)


def md_table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[fmt(c) if not isinstance(c, str) else c for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, cells[1:])])


def percentile(sorted_values: list[float], q: float) -> float | None:
    """q-th percentile with linear interpolation (the project's one, ``aorta_tui.core.stats``,
    clamped to its neighbours); ``None`` for no values."""
    from aorta_tui.core.stats import percentile as one

    return one(sorted_values, q, presorted=True) if sorted_values else None


def overlap_fraction(t_compute: float | None, t_comm: float | None, t_both: float | None) -> float | None:
    """How much of the shorter phase the combined run hid: (Tc + Tm - Tboth) / min(Tc, Tm).

    1: the shorter phase was completely hidden behind the longer; 0: the two ran back to back;
    below 0: running them together cost more than the sum (interference). None when a time is
    missing or the shorter phase took no time.
    """
    if t_compute is None or t_comm is None or t_both is None:
        return None
    shorter = min(t_compute, t_comm)
    if shorter <= 0:
        return None
    return (t_compute + t_comm - t_both) / shorter


# -- machine -----------------------------------------------------------------------------------
def layout(gpus: int) -> dict[str, Any]:
    """What a machine with ``gpus`` GPUs runs: 0 -> gloo x2 on CPU, 1 -> NCCL x1, N -> NCCL xN."""
    return {"gpus": gpus, "backend": "gloo" if gpus == 0 else "nccl", "world": 2 if gpus == 0 else gpus,
            "device_arg": "cpu" if gpus == 0 else "cuda:{LOCAL_RANK}", "emulated": gpus == 0}


def plan_commands(m: dict[str, Any], out: Path, args: argparse.Namespace) -> dict[str, list[list[str]]]:
    """Every command line each item would start on machine ``m`` (the ebpf CPU form runs no CLI)."""
    cmds: dict[str, list[list[str]]] = {
        "overlap": [argv for _tag, argv in overlap_commands(m, out / "overlap", args)],
        "hetero": [hetero_command(m, out / "hetero", args)[0]],
        "hang": [hang_command(m, out / "hang", args)[0]],
        "ebpf": [ebpf_gpu_command(m, out / "ebpf", args)[0]] if not m["emulated"] else [],
    }
    return {k: v for k, v in cmds.items() if k in args.only.split(",")}


def detect_machine() -> dict[str, Any]:
    """GPU count and names from torch in a child process (the orchestrator stays torch-free)."""
    code = ("import json, torch\n"
            "n = torch.cuda.device_count() if torch.cuda.is_available() else 0\n"
            "print(json.dumps({'gpus': n, 'torch': torch.__version__, 'cuda': torch.version.cuda,\n"
            "  'hip': getattr(torch.version, 'hip', None),\n"
            "  'names': [torch.cuda.get_device_name(i) for i in range(n)]}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"cannot import torch to count GPUs: {out.stderr.strip()[-400:]}")
    info = json.loads(out.stdout.strip().splitlines()[-1])
    n = info["gpus"]
    info["driver"] = None
    if n and shutil.which("nvidia-smi"):
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True)
        info["driver"] = smi.stdout.strip().splitlines()[0] if smi.returncode == 0 and smi.stdout.strip() else None
    info.update(layout(n))
    info["host"] = os.uname().nodename
    info["date_utc"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return info


def torchrun(world: int, script_args: list[str]) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world}", *script_args]


def rank_exec_argv(pid_dir: Path, aorta_args: list[str]) -> list[str]:
    return [str(Path(__file__).resolve()), "--rank-exec", str(pid_dir), *aorta_args]


def rank_exec(argv: list[str]) -> None:
    """torchrun's per-rank entry: record the pid (exec keeps it) and become `python -m aorta_tui`."""
    pid_dir, args = Path(argv[0]), argv[1:]
    local_rank = os.environ.get("LOCAL_RANK", "0")
    pid_dir.mkdir(parents=True, exist_ok=True)
    (pid_dir / f"rank{os.environ.get('RANK', '0')}.pid").write_text(str(os.getpid()))
    args = [a.replace("{LOCAL_RANK}", local_rank) for a in args]
    os.execv(sys.executable, [sys.executable, "-m", "aorta_tui", *args])


# -- item 1: comms/compute overlap under torchrun ---------------------------------------------
def load_rank_results(stem: Path, world: int) -> dict[int, dict[str, Any]]:
    out = {}
    for r in range(world):
        p = stem.with_name(f"{stem.name}.rank{r}.json")
        if p.exists():
            out[r] = json.loads(p.read_text())
    return out


def label_counts(result: dict[str, Any]) -> dict[str, int]:
    """Launches per label over the measured iterations, from the run's timeline."""
    fields = result.get("timeline_fields") or []
    if "label" not in fields:
        return {}
    i = fields.index("label")
    counts: dict[str, int] = {}
    for row in result.get("timeline") or []:
        counts[row[i]] = counts.get(row[i], 0) + 1
    return counts


def allreduce_bandwidth(result: dict[str, Any], world: int) -> tuple[float | None, float | None, str | None]:
    """(algbw GB/s, busbw GB/s, reason): all-reduce bytes of one iteration / p50 iteration latency.

    Meaningful for comms_only (the iteration is nothing but the all-reduces); busbw scales
    algbw by 2(n-1)/n as nccl-tests do.
    """
    p = result["workload"]["params"]
    iters = result["config"]["iterations"]
    n_ar = label_counts(result).get("all_reduce", 0)
    lat = result["summary"].get("latency_p50_ms")
    if not n_ar or not lat:
        return None, None, "no all-reduce in this mode" if not n_ar else "no iteration latency"
    nbytes = p["comm_elements"] * DTYPE_BYTES.get(result["workload"]["dtype"], 4) * n_ar / iters
    algbw = nbytes / (lat / 1e3) / 1e9
    if world < 2:
        return algbw, None, "bus bandwidth needs 2+ ranks"
    return algbw, algbw * 2 * (world - 1) / world, None


def overlap_commands(m: dict[str, Any], d: Path, args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """(tag, argv) of each torchrun launch of the overlap item."""
    world, dev = m["world"], m["device_arg"]
    size = ["--size", "tiny"] if m["emulated"] else []
    modes = [x for x in args.modes.split(",") if x]
    plan = [(mode, "events") for mode in modes]
    if not m["emulated"] and "comms_compute" in modes:
        plan.append(("comms_compute", "cupti"))  # the profiler cross-check, per rank
    out = []
    for mode, timing in plan:
        tag = mode if timing == "events" else f"{mode}_cupti"
        params = ["--param", "collectives=real"]
        for k, v in MODES[mode].items():
            params += ["--param", f"{k}={v}"]
        aorta = ["queue", "run", "comms_compute_overlap", "--device", dev, "--streams", str(args.streams),
                 "-i", str(args.iterations), "-w", str(args.warmup), "--timing", timing, "--timeline",
                 *size, *params, "-q", "-o", str(d / f"{tag}.json")]
        out.append((tag, torchrun(world, rank_exec_argv(d / "pids" / tag, aorta))))
    return out


def item_overlap(m: dict[str, Any], out: Path, args: argparse.Namespace) -> dict[str, Any]:
    world = m["world"]
    d = out / "overlap"
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    problems: list[str] = []
    for tag, argv in overlap_commands(m, d, args):
        rc, _wall = run_logged(argv, d / f"{tag}.log", args.item_timeout)
        got = load_rank_results(d / tag, world)
        if rc != 0 or len(got) != world:
            problems.append(f"{tag}: exit {rc}, {len(got)}/{world} rank results\n{log_tail(d / f'{tag}.log')}")
        runs[tag] = got
    rows, ov_rows, x_rows = [], [], []
    per_rank: dict[int, dict[str, Any]] = {}
    for tag, ranks in runs.items():
        if tag.endswith("_cupti"):
            continue
        for r, res in sorted(ranks.items()):
            s = res["summary"]
            dist = res["platform"].get("distributed") or {}
            algbw, busbw, bw_reason = allreduce_bandwidth(res, world)
            counts = label_counts(res)
            mem = res["metrics"].get("memory") or {}
            peak = max((v.get("peak_bytes") or 0 for v in mem.values()), default=None) if mem else None
            thr = s["throughput"] if counts.get("gemm") else None  # no GEMMs: no FLOP/s to speak of
            rows.append([tag, r, f"{dist.get('backend')}/{dist.get('world_size')}", res["config"]["devices"][0],
                         counts.get("gemm", 0), counts.get("all_reduce", 0), thr if thr is not None else "n/a (no GEMMs)",
                         s["latency_p50_ms"], s["latency_p99_ms"], algbw if algbw is not None else f"n/a ({bw_reason})",
                         busbw if busbw is not None else "n/a", s["achieved_concurrency"],
                         f"{peak / 2**20:.1f} MiB" if peak else f"n/a ({res['unavailable'].get('memory', '-')})"])
            per_rank.setdefault(r, {})[tag] = s["latency_p50_ms"]
    for r, t in sorted(per_rank.items()):
        ov = overlap_fraction(t.get("compute_only"), t.get("comms_only"), t.get("comms_compute"))
        tc, tm, tb = t.get("compute_only"), t.get("comms_only"), t.get("comms_compute")
        ratio = tb / (tc + tm) if None not in (tc, tm, tb) and tc + tm > 0 else None
        ov_rows.append([r, tc, tm, tb, ratio if ratio is not None else "n/a",
                        ov if ov is not None else "n/a (a mode is missing)"])
    for r, res in sorted(runs.get("comms_compute_cupti", {}).items()):
        ev = res.get("event_metrics") or {}
        x_rows.append([r, ev.get("achieved_concurrency"), res["summary"].get("achieved_concurrency"),
                       (ev.get("launch_delay_us") or {}).get("mean"), res["summary"].get("launch_delay_mean_us"),
                       res["timing"].get("launches_recorded")])
    # consistency across ranks: same configuration, same launches, distinct ranks of one world
    for tag, ranks in runs.items():
        if len(ranks) < 2:
            continue
        cfgs = {json.dumps(v["config"] | {"devices": None, "stream_devices": None}, sort_keys=True) for v in ranks.values()}
        launches = {json.dumps(label_counts(v), sort_keys=True) for v in ranks.values()}
        worlds = {(v["platform"].get("distributed") or {}).get("world_size") for v in ranks.values()}
        if len(cfgs) != 1 or len(launches) != 1 or worlds != {world}:
            problems.append(f"{tag}: ranks disagree (configs {len(cfgs)}, launch counts {launches}, worlds {worlds})")
    what = ("gloo on CPU, 2 processes; streams are emulated (run in issue order on the host), so "
            "overlap is ~0 by construction" if m["emulated"] else f"NCCL over {world} GPU(s)")
    text = (f"### comms_compute_overlap, collectives=real, {args.streams} streams, {args.iterations} iterations "
            f"({what})\n\n"
            + md_table(["mode", "rank", "backend/world", "device", "GEMMs", "all-reduces", "TFLOP/s", "p50 ms", "p99 ms",
                        "all-reduce algbw GB/s", "busbw GB/s", "concurrency", "peak memory"], rows)
            + "\n\nOverlap per rank = (T_compute_only + T_comms_only - T_comms_compute) / min(T_compute_only, "
              "T_comms_only), T = p50 iteration latency (ms); 1 = shorter phase fully hidden, 0 = serial, < 0 = "
              "the combined run took longer than both phases back to back. T_both / (T_c + T_m): 1 = serial, "
              "max/sum = perfect overlap.\n\n"
            + md_table(["rank", "T compute_only", "T comms_only", "T comms_compute", "T_both / (T_c + T_m)", "overlap"],
                       ov_rows))
    if x_rows:
        text += ("\n\nProfiler cross-check per rank (comms_compute, `--timing cupti`: kernel timestamps vs the "
                 "same run's events)\n\n" + md_table(["rank", "concurrency (events)", "concurrency (CUPTI)",
                                                     "launch delay mean us (events)", "launch delay mean us (CUPTI)",
                                                     "launches"], x_rows))
    elif not m["emulated"]:
        text += "\n\nProfiler cross-check: not run (comms_compute mode not selected)."
    else:
        text += "\n\nProfiler cross-check: not available (CPU run: `--timing cupti` needs CUDA kernel timestamps)."
    return {"ok": not problems, "problems": problems, "markdown": text,
            "ranks": {tag: {str(r): v["summary"] for r, v in rk.items()} for tag, rk in runs.items()},
            "overlap": {str(r[0]): r[5] for r in ov_rows}}


# -- item 2: hetero_kernels over every device ---------------------------------------------------
def hetero_command(m: dict[str, Any], d: Path, args: argparse.Namespace) -> tuple[list[str], str]:
    """(argv, what is emulated or spread) of the hetero item."""
    if m["emulated"]:
        where = ["--device", "cpu", "--size", "tiny"]
        note = ("CPU: one emulated device; the 16 streams run one after another in issue order on the host, "
                "busy = host time inside the launch calls, no device memory")
    else:
        # `queue run --devices all` is not accepted by the CLI: spell the devices out
        where = ["--devices", ",".join(f"cuda:{i}" for i in range(m["gpus"]))]
        note = f"streams round-robin over {m['gpus']} GPU(s)"
    return ([sys.executable, "-m", "aorta_tui", "queue", "run", "hetero_kernels", "--streams", "16",
             "-i", str(args.iterations), "-w", str(args.warmup), *where, "-q", "-o", str(d / "hetero.json")], note)


def item_hetero(m: dict[str, Any], out: Path, args: argparse.Namespace) -> dict[str, Any]:
    d = out / "hetero"
    aorta, note = hetero_command(m, d, args)
    rc, _wall = run_logged(aorta, d / "hetero.log", args.item_timeout)
    if rc != 0 or not (d / "hetero.json").exists():
        return {"ok": False, "problems": [f"hetero_kernels: exit {rc}\n{log_tail(d / 'hetero.log')}"],
                "markdown": f"### hetero_kernels x16\n\nfailed (exit {rc}), see {d / 'hetero.log'}"}
    res = json.loads((d / "hetero.json").read_text())
    per_dev: dict[str, dict[str, Any]] = {}
    for st in res["metrics"]["per_stream"]:
        e = per_dev.setdefault(st["device"], {"streams": 0, "active": 0, "launches": 0, "busy_ms": 0.0, "busy_n": 0})
        e["streams"] += 1
        e["active"] += 1 if st["launches"] else 0
        e["launches"] += st["launches"]
        if st.get("busy_ms") is not None:
            e["busy_ms"] += st["busy_ms"]
            e["busy_n"] += 1
    mem = res["metrics"].get("memory") or {}
    rows = []
    for dev, e in sorted(per_dev.items()):
        mm = mem.get(dev) or {}
        rows.append([dev, f"{e['streams']} ({e['active']})", e["launches"], e["busy_ms"] if e["busy_n"] else None,
                     f"{mm['peak_bytes'] / 2**20:.1f} MiB" if mm.get("peak_bytes") else
                     f"n/a ({res['unavailable'].get('memory', 'not measured')})",
                     f"{mm['final_bytes'] / 2**20:.1f} MiB" if mm.get("final_bytes") is not None else "n/a"])
    s = res["summary"]
    text = (f"### hetero_kernels x16 streams, {args.iterations} iterations ({note})\n\n"
            f"whole run: {fmt(s['throughput'])} {res['workload']['throughput_unit']}, p50 "
            f"{fmt(s['latency_p50_ms'])} ms, p99 {fmt(s['latency_p99_ms'])} ms, concurrency "
            f"{fmt(s['achieved_concurrency'])} (busy means: {res['timing'].get('busy_meaning')})\n\n"
            + md_table(["device", "streams (with launches)", "launches", "busy ms (sum over its streams)", "peak memory",
                        "final memory"], rows))
    problems = [] if len(per_dev) == max(1, m["gpus"]) else [f"streams landed on {len(per_dev)} devices"]
    return {"ok": not problems, "problems": problems, "markdown": text, "per_device": per_dev, "summary": s}


# -- item 3: the hang probe sweep ---------------------------------------------------------------
def collective_timeout(m: dict[str, Any], args: argparse.Namespace) -> float:
    return args.collective_timeout if args.collective_timeout is not None else (10.0 if m["emulated"] else 20.0)


def hang_command(m: dict[str, Any], d: Path, args: argparse.Namespace) -> tuple[list[str], int]:
    """(argv of the probe sweep, world size of its torchrun launch)."""
    # One GPU cannot hold two NCCL ranks: there the late rank is shown with gloo.
    world = 2 if m["gpus"] < 2 else m["gpus"]
    backend = ["--backend", "gloo"] if m["gpus"] == 1 else []
    cmd = torchrun(world, ["scripts/rank_hang.py", "--hang-rank", "1", "--sleep", str(args.hang_sleep),
                           "--timeout", f"{collective_timeout(m, args):g}", *backend])
    return ([sys.executable, "-m", "aorta_tui", "--batch", str(RECIPE), "--mitigations-file", str(MITIGATIONS),
             "-o", str(d / "runs"), "--no-snapshot", "--", *cmd], world)


def item_hang(m: dict[str, Any], out: Path, args: argparse.Namespace) -> dict[str, Any]:
    d = out / "hang"
    argv, world = hang_command(m, d, args)
    rc, _wall = run_logged(argv, d / "sweep.log", args.item_timeout)
    results = sorted(glob.glob(str(d / "runs" / "*" / "*" / "trials" / "*" / "trial-*" / "result.json")))
    rows, cells = [], {}
    for p in results:
        r = json.loads(Path(p).read_text())
        fails = [f"{x['tier']}:{x['id']}" for x in r["detections"] if x["severity"] in ("fail", "error")]
        hang = r["process"].get("hang")
        cells[r["cell"]] = {"verdict": r["verdict"], "detectors": fails, "reason": r["reason"],
                            "wall_s": r["process"].get("wall_s"), "hang": hang,
                            "hang_note": r["process"].get("hang_note")}
        rows.append([r["cell"], r["verdict"], ", ".join(fails) or "-", fmt(r["process"].get("wall_s"), 3),
                     hang_summary(hang), r["reason"][:110].replace("|", "/")])
    hung, control = cells.get("none-none"), cells.get("rank_hang_skip-none")
    problems = []
    if rc != 0 or hung is None or control is None:
        problems.append(f"sweep exit {rc}, cells {sorted(cells)}\n{log_tail(d / 'sweep.log')}")
    else:
        timeout_ids = {"2:hang", "4:collective_timeout", "5:gloo_collective_timeout"}
        if hung["verdict"] not in ("fail", "error") or not timeout_ids & set(hung["detectors"]):
            problems.append(f"the late rank was not seen as a hang or collective timeout: {hung}")
        if control["verdict"] != "pass":
            problems.append(f"the control cell did not pass: {control}")
    label = {0: f"gloo on CPU, {world} ranks", 1: f"gloo, {world} ranks (one GPU holds one NCCL rank)"}
    text = (f"### Hang probe: torchrun, rank 1 sleeps {args.hang_sleep:g} s before an all-reduce, collective timeout "
            f"{collective_timeout(m, args):g} s ({label.get(m['gpus'], f'NCCL, {world} ranks')})\n\n"
            + md_table(["cell", "verdict", "fail detectors (tier:id)", "wall s", "tier-2 hang report", "reason"], rows))
    return {"ok": not problems, "problems": problems, "markdown": text, "cells": cells}


def hang_summary(hang: dict[str, Any] | None) -> str:
    if not hang:
        return "did not fire"
    held = [f"{k} {v:.1f}s" for k, v in hang.get("signals", {}).items() if v is not None]
    return "fired: " + ", ".join(held)


# -- item 4: eBPF over two processes at once ----------------------------------------------------
def ensure_bpftrace() -> str | None:
    """Reason bpftrace cannot run here, or None. Unpacks carried .bt/*.deb when it is missing."""
    from aorta_tui.trace import capability

    path, how = capability.find_bpftrace()
    debs = sorted(glob.glob(str(REPO / ".bt" / "*.deb")))
    if path is None and debs and shutil.which("dpkg"):
        for deb in debs:
            subprocess.run(["dpkg", "-x", deb, "/tmp/bt"], check=False, capture_output=True)
        libs = "/tmp/bt/usr/lib/x86_64-linux-gnu:/tmp/bt/lib/x86_64-linux-gnu"
        os.environ["LD_LIBRARY_PATH"] = libs + (":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else "")
        os.environ[capability.ENV_VAR] = "/tmp/bt/usr/bin/bpftrace"
        path, how = capability.find_bpftrace()
    if path is None:
        return how
    if os.geteuid() != 0:
        return "bpftrace needs root"
    if subprocess.run(["mountpoint", "-q", "/sys/kernel/tracing"], capture_output=True).returncode != 0:
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], capture_output=True)
    probe = subprocess.run([path, "-e", "BEGIN { exit(); }"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return f"bpftrace cannot load a program: {probe.stderr.strip()[-200:]}"
    return None


def build_fake_cuda(workdir: Path) -> tuple[Path, Path]:
    gcc = shutil.which("gcc")
    if gcc is None:
        raise RuntimeError("gcc is not installed (apt-get install gcc libc6-dev)")
    lib, drv = workdir / "libcuda.so.1", workdir / "driver"
    subprocess.run([gcc, "-O1", "-shared", "-fPIC", "-o", str(lib), str(FAKELIB / "fakecuda.c")], check=True,
                   capture_output=True)
    subprocess.run([gcc, "-O1", "-o", str(drv), str(FAKELIB / "driver.c"), "-ldl"], check=True, capture_output=True)
    return lib, drv


def per_pid_histograms(raw_gz: Path, pids: dict[int, str]) -> dict[str, dict[str, Any]]:
    """Per pid: launch count and the interval between its consecutive launches (us)."""
    import gzip

    ts: dict[int, list[int]] = {}
    with gzip.open(raw_gz, "rt") as fh:
        for line in fh:
            rec = json.loads(line)
            if rec["set"] == "cuda" and rec["metric"] == "launch":
                ts.setdefault(int(rec["pid"]), []).append(int(rec["ts_ns"]))
    out = {}
    for pid, name in pids.items():
        t = sorted(ts.get(pid, []))
        gaps = sorted((b - a) / 1e3 for a, b in zip(t, t[1:], strict=False))
        buckets: dict[str, int] = {}
        for g in gaps:  # powers of two in us
            lo = 2 ** max(0, math.floor(math.log2(g))) if g >= 1 else 0
            key = f"{lo}-{max(1, lo * 2)}"
            buckets[key] = buckets.get(key, 0) + 1
        out[str(pid)] = {"process": name, "launches": len(t), "gap_p50_us": percentile(gaps, 50),
                         "gap_p90_us": percentile(gaps, 90), "gap_p99_us": percentile(gaps, 99),
                         "histogram_us": dict(sorted(buckets.items(), key=lambda kv: int(kv[0].split("-")[0])))}
    out["other"] = {"process": "anything else that called the library meanwhile",
                    "launches": sum(len(v) for p, v in ts.items() if p not in pids)}
    return out


def driver_gap_p50_us(path: Path) -> float | None:
    """The fake driver's own clock: p50 interval between its consecutive launch calls (us)."""
    try:
        starts = sorted(int(line.split()[1]) for line in path.read_text().splitlines() if line.strip())
    except (OSError, ValueError, IndexError):
        return None
    return percentile(sorted((b - a) / 1e3 for a, b in zip(starts, starts[1:], strict=False)), 50)


def ebpf_gpu_command(m: dict[str, Any], d: Path, args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """(torchrun argv, queue workload args) of the ranks the GPU form of the ebpf item traces."""
    world = max(2, m["gpus"])
    work = (["comms_compute_overlap", "--param", "collectives=real", "--device", "cuda:{LOCAL_RANK}"]
            if m["gpus"] >= 2 else ["hetero_kernels", "--device", "cuda:0"])  # 2 NCCL ranks need 2 GPUs
    aorta = ["queue", "run", *work, "--streams", "4", "-i", str(args.iterations), "-w", "2", "-q",
             "-o", str(d / "traced.json")]
    return torchrun(world, rank_exec_argv(d / "pids", aorta)), work


def item_ebpf(m: dict[str, Any], out: Path, args: argparse.Namespace) -> dict[str, Any]:
    d = out / "ebpf"
    d.mkdir(parents=True, exist_ok=True)
    reason = ensure_bpftrace()
    if reason:
        return {"ok": True, "skipped": reason, "problems": [],
                "markdown": f"### eBPF `cuda` probe set, two processes\n\nskipped: {reason}"}
    from aorta_tui.core.errors import AortaError
    from aorta_tui.trace.session import TraceSession

    tmp = Path(tempfile.mkdtemp(prefix="multigpu-ebpf-"))
    raw = d / "launches.jsonl.gz"
    truth: dict[int, dict[str, Any]] = {}
    try:
        if m["emulated"]:
            lib, drv = build_fake_cuda(tmp)
            libs = {"cuda": lib}
        else:
            libs = {}
        session = TraceSession(["cuda"], mode="events", library_paths=libs, raw_path=raw, calibrate=False,
                               interval_s=0.5)
        try:
            session.start()
        except AortaError as exc:
            return {"ok": True, "skipped": exc.message, "problems": [],
                    "markdown": f"### eBPF `cuda` probe set, two processes\n\nskipped: {exc.message}"}
        pids: dict[int, str] = {}
        try:
            if m["emulated"]:
                procs = []
                for rank, spec in enumerate(FAKE_RANKS):
                    env = child_env({"DRIVER_TIMES": str(tmp / f"times{rank}.txt")})
                    p = subprocess.Popen([str(drv), "cuda", str(lib), str(spec["launches"]), str(spec["delay_us"]),
                                          spec["stream"]], env=env, stdout=subprocess.DEVNULL)
                    procs.append(p)
                    pids[p.pid] = f"rank {rank} (fake libcuda driver, {spec['launches']} launches, sleeps {spec['delay_us']} us in each)"
                    truth[p.pid] = {"rank": rank, **spec}
                rcs = [p.wait(timeout=args.item_timeout) for p in procs]
                for t in truth.values():
                    t["driver_gap_p50_us"] = driver_gap_p50_us(tmp / f"times{t['rank']}.txt")
            else:
                argv, work = ebpf_gpu_command(m, d, args)
                rc, _ = run_logged(argv, d / "traced.log", args.item_timeout)
                rcs = [rc]
                for f in sorted((d / "pids").glob("rank*.pid")):
                    pids[int(f.read_text())] = f"{f.stem} ({' '.join(work[:1])}, real libcuda)"
        finally:
            session.stop()
        result = session.result().to_json()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    launch = result["probe_sets"]["cuda"]["metrics"]["launch"]
    hists = per_pid_histograms(raw, pids)
    problems = [] if all(rc == 0 for rc in rcs) else [f"traced processes exited {rcs}"]
    if launch.get("lost_events"):
        problems.append(f"{launch['lost_events']} launch records lost")
    rows = []
    for pid, h in hists.items():
        engine = launch.get("per_pid", {}).get(pid) if pid != "other" else None
        t = truth.get(int(pid)) if pid != "other" else None
        rows.append([pid, h["process"], h["launches"], engine if engine is not None else "-",
                     h.get("gap_p50_us"), (t or {}).get("driver_gap_p50_us", "-"), h.get("gap_p90_us"),
                     h.get("gap_p99_us"),
                     " ".join(f"[{k}us):{v}" for k, v in (h.get("histogram_us") or {}).items()) or "-"])
        if t is not None and h["launches"] != t["launches"]:
            problems.append(f"pid {pid}: {h['launches']} launches traced, {t['launches']} made")
        own, traced = (t or {}).get("driver_gap_p50_us"), h.get("gap_p50_us")
        if own and traced and abs(traced / own - 1) > 0.1:
            problems.append(f"pid {pid}: traced interval p50 {traced:.1f} us vs the driver's own {own:.1f} us")
    for pid in pids:
        if not hists[str(pid)]["launches"]:
            problems.append(f"pid {pid} ({pids[pid]}): no launch traced")
    text = ("### eBPF `cuda` probe set over two processes at once (system-wide uprobe on "
            + ("the fake libcuda built from tests/trace/fakelib" if m["emulated"] else "the real libcuda") + ")\n\n"
            + f"launch records: {launch.get('records_sent_by_kernel')} sent by the kernel, "
              f"{launch.get('records_received')} received, lost {fmt(launch.get('lost_events'))}; "
              "interval = time between one process's consecutive launch calls (uprobe timestamps)\n\n"
            + md_table(["pid", "process", "launches (raw records)", "launches (engine per_pid)", "interval p50 us",
                        "driver's own p50 us", "p90 us", "p99 us", "interval histogram [lo-hi us): count"], rows))
    return {"ok": not problems, "problems": problems, "markdown": text, "per_pid": hists,
            "truth": {str(k): v for k, v in truth.items()}, "trace_warnings": result.get("warnings")}


# -- main --------------------------------------------------------------------------------------
def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="example: python3 scripts/multigpu_check.py --out multigpu-out")
    p.add_argument("--out", type=Path, default=Path("multigpu-out"), help="where logs, results and tables go")
    p.add_argument("--only", default=",".join(ITEMS), help=f"comma-separated subset of {','.join(ITEMS)}")
    p.add_argument("--modes", default=",".join(MODES), help="overlap modes to run")
    p.add_argument("--streams", type=int, default=4, help="comms_compute_overlap streams (default 4)")
    p.add_argument("--iterations", type=int, default=10, help="measured iterations per queue run (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="warm-up iterations per queue run (default 2)")
    p.add_argument("--hang-sleep", type=float, default=60.0, help="seconds the late rank sleeps (default 60)")
    p.add_argument("--collective-timeout", type=float, default=None,
                   help="init_process_group timeout of the hang probe, s (default 10 on CPU, 20 on GPUs, "
                        "where NCCL's first all-reduce also sets up the communicator)")
    p.add_argument("--item-timeout", type=float, default=300.0, help="seconds any one item may take (default 300)")
    p.add_argument("--plan", type=int, metavar="GPUS", default=None,
                   help="print (one shell line each) the commands a machine with GPUS GPUs would run, and exit")
    a = p.parse_args(argv)
    bad = set(a.only.split(",")) - set(ITEMS)
    bad_modes = set(a.modes.split(",")) - set(MODES)
    if bad or bad_modes:
        p.error(f"unknown item(s) {sorted(bad)} (use {','.join(ITEMS)})" if bad else
                f"unknown mode(s) {sorted(bad_modes)} (use {','.join(MODES)})")
    if a.streams < 2:
        p.error("--streams must be >= 2 (one compute and one comm stream)")
    if a.plan is not None and a.plan < 0:
        p.error("--plan takes a GPU count >= 0")
    return a


def main(argv: list[str]) -> int:
    if argv[:1] == ["--rank-exec"]:
        rank_exec(argv[1:])
        return 127  # not reached: exec
    args = parse_args(argv)
    out = args.out.resolve()
    if args.plan is not None:
        for item, cmds in plan_commands(layout(args.plan), out, args).items():
            print(f"# {item}" + ("" if cmds else ": no command (CPU form: the fake libcuda drivers, run in-process)"))
            for argv in cmds:
                print(shlex.join(argv))
        return 0
    os.environ.update(NO_MULTICAST)  # also for the tracer's own children
    out.mkdir(parents=True, exist_ok=True)
    machine = detect_machine()
    gpus = machine["gpus"]
    head = (f"## multigpu_check: {machine['date_utc']}, host {machine['host']}, "
            + (f"{gpus} x {machine['names'][0]} (driver {machine['driver']}), NCCL world {machine['world']}"
               if gpus else "no GPU: gloo on CPU, 2 processes")
            + f", torch {machine['torch']}, Python {sys.version.split()[0]}")
    print(head, flush=True)
    report: dict[str, Any] = {"machine": machine, "items": {}}
    fns = {"overlap": item_overlap, "hetero": item_hetero, "hang": item_hang, "ebpf": item_ebpf}
    sections = [head]
    for name in args.only.split(","):
        t0 = time.monotonic()
        try:
            res = fns[name](machine, out, args)
        except Exception as exc:  # one broken item must not hide the others' figures
            res = {"ok": False, "problems": [f"{type(exc).__name__}: {exc}"], "markdown": f"### {name}\n\nerror: {exc}"}
        res["wall_s"] = round(time.monotonic() - t0, 1)
        report["items"][name] = res
        block = res["markdown"] + (("\n\nproblems:\n" + "\n".join(f"- {p}" for p in res["problems"]))
                                   if res["problems"] else "")
        print("\n" + block + f"\n\n({name}: {res['wall_s']} s)", flush=True)
        sections.append(block)
        (out / "multigpu.md").write_text("\n\n".join(sections) + "\n")
        (out / "multigpu.json").write_text(json.dumps(report, indent=1, default=str))
    ok = all(r["ok"] for r in report["items"].values())
    print(f"\n{'all items met their expectations' if ok else 'some items did not: see problems above'}; "
          f"tables in {out / 'multigpu.md'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
