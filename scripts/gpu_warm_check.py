"""GPU proof of ``trial_isolation: warm``: every variable of every registered mitigation acts in a
forked trial as it does in a fresh process, or is honoured by a zygote of its own.

Each case is one variable with one value (each ``(name, value)`` of every registered mitigation
and environment, plus ``PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync``, ``CUDA_VISIBLE_DEVICES=``
and a variable only C ``getenv`` reads). It runs as real trials through the project's supervisor
(:func:`aorta_tui.trial.supervisor.run_process`) two ways, alternated: a fresh process (``python -m
aorta_tui.trial.worker``, the default isolation) and forked through the sweep's own
:class:`aorta_tui.trial.warm.WarmPool` (so an import-time variable gets the zygote a sweep would
give it). Each trial records what the variable's reader shows:

* ``CUDA_LAUNCH_BLOCKING``: a launch of a ~20 ms sleep kernel (its length measured) returns only
  once it ran;
* ``CUDA_DEVICE_MAX_CONNECTIONS``: 8 streams x 2 dependent sleep kernels serialise behind one
  hardware queue (> 3 kernels long) or run side by side;
* ``CUDA_MODULE_LOADING``: the driver's loading mode (``cuModuleGetLoadingMode``);
* ``CUDA_VISIBLE_DEVICES``: the device count;
* ``PYTORCH_CUDA_ALLOC_CONF``: the allocator backend and whether its segments are expandable;
* ``PYTORCH_NO_CUDA_MEMORY_CACHING``: memory still reserved after the only tensor is freed;
* ``CUBLAS_WORKSPACE_CONFIG``: a matmul under ``torch.use_deterministic_algorithms(True)`` runs or
  is refused;
* ``NCCL_*``: what a one-rank NCCL communicator reports it read ("X set by environment to V", in
  ``NCCL_DEBUG_FILE``);
* any other (the ROCm runtime's on this NVIDIA machine, ``DISABLE_TF32``, which ROCm PyTorch
  reads): what C ``getenv`` returns in the trial - said as such.

A case passes when the warm trial shows what the fresh one shows; the table says whether the
fresh one showed an effect at all. Import-time variables are also forked once from the shared
zygote (started without them), to show what they would do there. All figures go to
``$OUT/gpu_warm_check.json`` (``$OUT`` defaults to a temporary directory), one table on stdout.
Exit 0 when no case failed.

    python scripts/gpu_warm_check.py          # in the repository root, ~2-3 min on the H200
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, ClassVar

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

from aorta_tui.registry.workload import Workload, WorkloadContext, WorkloadResult  # noqa: E402

SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
CHECK_VAR = "AORTA_WARM_CHECK_VAR"  # which variable the trial reads back
WANT_VAR = "AORTA_WARM_CHECK_WANT"  # which observations the trial makes (comma-separated)
KERNEL_MS = 20.0
_NCCL_SET = re.compile(r"(NCCL_[A-Z0-9_]+) set by environment to (\S+)")


class WarmProbe(Workload):
    """Measures what the case's variable changes (one trial = one observation)."""

    name: ClassVar[str] = "warm_probe"
    description: ClassVar[str] = "reads back one variable through the runtime that reads it"

    def run(self, ctx: WorkloadContext) -> WorkloadResult:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.getenv.restype = ctypes.c_char_p
        var = os.environ.get(CHECK_VAR, "")
        raw = libc.getenv(var.encode()) if var else None
        want = set(filter(None, os.environ.get(WANT_VAR, "").split(",")))
        metrics: dict[str, Any] = {"c_getenv": raw.decode() if raw is not None else None,
                                   "pid": os.getpid()}
        if want - {"getenv"}:
            import torch

            metrics["cuda_available"] = torch.cuda.is_available()
            metrics["device_count"] = torch.cuda.device_count() if metrics["cuda_available"] else 0
            if metrics["cuda_available"]:
                metrics.update(_gpu_observations(torch, want, Path(ctx.trial_dir)))
        ctx.on_step(0, 0.0)
        return WorkloadResult(metrics=metrics, step_times_s=[0.0])


def _guard(fn: Any) -> Any:
    try:
        return fn()
    except Exception as exc:  # an observation that fails is itself the observation
        return f"error: {type(exc).__name__}: {str(exc)[:160]}"


def _gpu_observations(torch: Any, want: set[str], tdir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"allocator_backend": _guard(torch.cuda.get_allocator_backend),
                           "module_loading": _guard(_loading_mode)}
    x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    out["expandable"] = _guard(lambda: any(s.get("is_expandable") for s in torch.cuda.memory_snapshot()))
    del x
    torch.cuda.synchronize()
    out["reserved_after_free"] = torch.cuda.memory_reserved()
    out["cublas_deterministic"] = _guard(lambda: _deterministic_matmul(torch))
    if "timing" in want:
        out.update(_timing(torch))
    if "nccl" in want:
        out["nccl"] = _guard(lambda: _nccl(torch, tdir))
    return out


def _loading_mode() -> str:
    import ctypes

    cuda = ctypes.CDLL("libcuda.so.1")
    mode = ctypes.c_int(0)
    rc = cuda.cuModuleGetLoadingMode(ctypes.byref(mode))
    return {1: "EAGER", 2: "LAZY"}.get(mode.value, f"mode {mode.value}") if rc == 0 else f"CUresult {rc}"


def _deterministic_matmul(torch: Any) -> str:
    torch.use_deterministic_algorithms(True)
    try:
        a = torch.ones(64, 64, device="cuda")
        (a @ a).sum().item()
        return "runs"
    except RuntimeError as exc:
        return "refused" if "CUBLAS_WORKSPACE_CONFIG" in str(exc) else f"error: {str(exc)[:120]}"
    finally:
        torch.use_deterministic_algorithms(False)


def _sleep_cycles(torch: Any, ms: float) -> int:
    """Cycles of ``torch.cuda._sleep`` that last ``ms`` here (measured: the clock ramps)."""
    torch.cuda._sleep(10_000_000)  # warm the clock and the kernel
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 20_000_000
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return int(cycles / max(start.elapsed_time(end), 1e-3) * ms)


def _timing(torch: Any) -> dict[str, Any]:
    cycles = _sleep_cycles(torch, KERNEL_MS)
    launches = []
    for _ in range(5):  # host-side time of one launch of a 20 ms kernel
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.cuda._sleep(cycles)
        launches.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    streams = [torch.cuda.Stream() for _ in range(8)]
    for s in streams:  # each stream's first launch, outside the measurement
        with torch.cuda.stream(s):
            torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    walls = []
    for _ in range(3):
        t0 = time.perf_counter()
        for s in streams:  # depth-first: two dependent kernels per stream
            with torch.cuda.stream(s):
                torch.cuda._sleep(cycles)
                torch.cuda._sleep(cycles)
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - t0) * 1e3)
    return {"launch_return_ms": round(statistics.median(launches), 3),
            "queue_wall_ms": round(statistics.median(walls), 3)}


def _nccl(torch: Any, tdir: Path) -> dict[str, Any]:
    import torch.distributed as dist

    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1,
                            device_id=torch.device("cuda:0"))
    t = torch.ones(1024, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    dist.destroy_process_group()
    read: dict[str, str] = {}
    lines = 0
    for log in tdir.glob("nccl.*.log"):
        for line in log.read_text(errors="replace").splitlines():
            lines += 1
            m = _NCCL_SET.search(line)
            if m:
                read[m.group(1)] = m.group(2)
    return {"info_lines": lines, "read": read}


# -- the cases ----------------------------------------------------------------------------------


def observable(var: str) -> tuple[str, str]:
    """(what the trial observes for ``var``, which reader that is)."""
    if var == "CUDA_LAUNCH_BLOCKING":
        return "timing", "a 20 ms kernel's launch returns after it ran"
    if var == "CUDA_DEVICE_MAX_CONNECTIONS":
        return "timing", "8 streams serialise behind one hardware queue"
    if var.startswith("NCCL_"):
        return "nccl", "what a one-rank NCCL communicator reports it read"
    if var in ("CUDA_MODULE_LOADING", "CUDA_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF",
               "PYTORCH_NO_CUDA_MEMORY_CACHING", "CUBLAS_WORKSPACE_CONFIG"):
        return "gpu", {"CUDA_MODULE_LOADING": "cuModuleGetLoadingMode",
                       "CUDA_VISIBLE_DEVICES": "torch.cuda.device_count",
                       "PYTORCH_CUDA_ALLOC_CONF": "allocator backend and expandable segments",
                       "PYTORCH_NO_CUDA_MEMORY_CACHING": "memory reserved after free",
                       "CUBLAS_WORKSPACE_CONFIG": "a deterministic cuBLAS matmul"}[var]
    return "getenv", "C getenv only (no reader of it runs on this machine)"


def value_of(var: str, kind: str, metrics: dict[str, Any]) -> Any:
    """The observation that decides the case (comparable between fresh and warm)."""
    if not metrics:
        return None
    if kind == "timing":
        if var == "CUDA_LAUNCH_BLOCKING":
            ms = metrics.get("launch_return_ms")
            return None if ms is None else ("blocks" if ms > KERNEL_MS / 2 else "returns at once")
        ms = metrics.get("queue_wall_ms")
        return None if ms is None else ("serialised" if ms > 3 * KERNEL_MS else "concurrent")
    if kind == "nccl":
        nccl = metrics.get("nccl")
        if not isinstance(nccl, dict):
            return nccl
        if var == "NCCL_DEBUG":
            return "INFO lines" if nccl.get("info_lines") else "no INFO lines"
        return nccl.get("read", {}).get(var, "not reported")
    if kind == "gpu":
        key = {"CUDA_MODULE_LOADING": "module_loading", "CUDA_VISIBLE_DEVICES": "device_count",
               "PYTORCH_NO_CUDA_MEMORY_CACHING": "reserved_after_free",
               "CUBLAS_WORKSPACE_CONFIG": "cublas_deterministic"}.get(var)
        if var == "PYTORCH_CUDA_ALLOC_CONF":
            return f"{metrics.get('allocator_backend')}, expandable={metrics.get('expandable')}"
        if var == "PYTORCH_NO_CUDA_MEMORY_CACHING":
            r = metrics.get(key)
            return None if r is None else ("nothing reserved" if r == 0 else "memory kept")
        return metrics.get(key)
    return metrics.get("c_getenv")


def cases() -> list[dict[str, Any]]:
    """Every (variable, value) of every registered mitigation and environment, then the extras."""
    from aorta_tui.registry.registry import Registry

    reg = Registry()
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for m in reg.mitigations.values():
        for k, v in m.env.items():
            seen.setdefault((k, v), {"var": k, "value": v, "from": []})["from"].append(m.name)
    for e in reg.environments.values():
        for k, v in e.env.items():
            seen.setdefault((k, v), {"var": k, "value": v, "from": []})["from"].append(f"environment {e.name}")
    for k, v, why in (("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync", "issue 23's case"),
                      ("CUDA_VISIBLE_DEVICES", "", "hides the GPUs"),
                      ("AORTA_WARM_PROBE", "value-seen-by-getenv", "C getenv")):
        seen.setdefault((k, v), {"var": k, "value": v, "from": []})["from"].append(why)
    return list(seen.values())


def _trial(out: Path, name: str, env: dict[str, str], launcher: Any) -> dict[str, Any]:
    from aorta_tui.trial.supervisor import ProcessSpec, run_process

    tdir = out / "trials" / name
    tdir.mkdir(parents=True, exist_ok=True)
    spec_path = tdir / "trial_spec.json"
    spec_path.write_text(json.dumps({"workload": "warm_probe", "workload_ref": "gpu_warm_check:WarmProbe",
                                     "steps": 1, "config": {}, "seed": 0, "trial_dir": str(tdir),
                                     "switches": []}))
    env = {**env, "AORTA_ARTIFACT_DIR": str(tdir)}
    if env.get("NCCL_DEBUG_FILE") == "@":
        env["NCCL_DEBUG_FILE"] = str(tdir / "nccl.%p.log")
    argv = [sys.executable, "-m", "aorta_tui.trial.worker", str(spec_path)]
    pspec = ProcessSpec(argv=argv, env=env, cwd=REPO, stdout_path=tdir / "stdout.log",
                        stderr_path=tdir / "stderr.log", timeout_s=120, launcher=launcher)
    t0 = time.monotonic()
    outcome = run_process(pspec)
    wall = time.monotonic() - t0
    try:
        res = json.loads((tdir / "workload_result.json").read_text())
    except (OSError, ValueError) as exc:
        err = (tdir / "stderr.log").read_text(errors="replace")[-1500:]
        return {"error": f"no result ({exc}); exit {outcome.exit_code} {outcome.exec_error or ''}; {err}",
                "wall_s": wall}
    warm = (res.get("timeline") or {}).get("info", {}).get("warm") or {}
    return {"metrics": res.get("metrics", {}), "wall_s": wall, "zygote_pid": warm.get("zygote_pid")}


def _env_for(base: dict[str, str], case: dict[str, Any] | None) -> dict[str, str]:
    env = dict(base)
    if case is None:
        env.update({CHECK_VAR: "", WANT_VAR: "gpu,timing"})
        return env
    kind, _ = observable(case["var"])
    env.update({CHECK_VAR: case["var"], WANT_VAR: "getenv" if kind == "getenv" else f"gpu,{kind}"})
    if kind == "nccl":
        env.update({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV", "NCCL_DEBUG_FILE": "@"})
    env[case["var"]] = case["value"]
    return env


def main() -> int:
    out = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="gpu-warm-"))
    out.mkdir(parents=True, exist_ok=True)
    from aorta_tui.core.bytecode import plan_bytecode
    from aorta_tui.trial.warm import WarmLauncher, WarmPool
    from aorta_tui.trial.warm_vars import import_time_reader

    t_start = time.monotonic()
    base = {**os.environ, **SAFE_ENV, "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join([str(REPO), str(Path(__file__).resolve().parent),
                                           os.environ.get("PYTHONPATH", "")])}
    base = plan_bytecode("auto", base).apply(base)  # as a sweep's children get it
    work = Path(tempfile.mkdtemp(prefix="gpu-warm-trials-"))  # trial dirs (OUT gets the JSON)
    pool = WarmPool(work, ["gpu_warm_check"], None)
    plain_env = _env_for(base, None)
    all_cases = cases()
    # the zygotes a sweep of these cases would start, all at once (they import in parallel)
    for case in all_cases:
        pool.start("local", _env_for(base, case))
    shared = pool.start("local", plain_env)
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "host": os.uname().nodename,
                              "cases": []}
    plain = {"process": _trial(work, "process-plain", plain_env, None),
             "warm": _trial(work, "warm-plain", plain_env, pool.launcher("local", plain_env))}
    report["plain"] = plain
    rows = []

    def run_case(i: int, case: dict[str, Any]) -> dict[str, Any]:
        env = _env_for(base, case)
        kind, reader = observable(case["var"])
        tag = f"{i:02d}-{case['var']}"
        order = ("process", "warm") if i % 2 == 0 else ("warm", "process")
        got: dict[str, Any] = {}
        for mode in order:  # alternated case by case
            try:
                launcher = pool.launcher("local", env) if mode == "warm" else None
                got[mode] = _trial(work, f"{mode}-{tag}", env, launcher)
            except Exception:
                got[mode] = {"error": traceback.format_exc()[-1500:]}
        import_time = import_time_reader(case["var"])
        if import_time:  # what a zygote started without it would have done
            try:
                got["shared_zygote"] = _trial(work, f"shared-{tag}", env, WarmLauncher(shared))
            except Exception:
                got["shared_zygote"] = {"error": traceback.format_exc()[-1500:]}
        fresh = value_of(case["var"], kind, got["process"].get("metrics", {}))
        warm = value_of(case["var"], kind, got["warm"].get("metrics", {}))
        plain_value = value_of(case["var"], kind, plain["process"].get("metrics", {}))
        getenv_ok = all(got[m].get("metrics", {}).get("c_getenv") == case["value"] for m in ("process", "warm"))
        errors = [f"{m}: {got[m]['error'][-300:]}" for m in got if "error" in got[m]]
        status = "PASS" if fresh == warm and getenv_ok and fresh is not None and not errors else "FAIL"
        if kind != "getenv" and not plain["process"].get("metrics", {}).get("cuda_available"):
            status = "SKIP"  # no CUDA device here: only the getenv cases can run
        if kind == "nccl":  # NCCL names what it read: the effect is the line itself
            shown = fresh == case["value"] or (case["var"] == "NCCL_DEBUG" and fresh == "INFO lines")
            effect = "yes" if shown else "none seen: a one-rank communicator does not read it"
        else:
            effect = ("getenv only" if kind == "getenv" else
                      "yes" if fresh != plain_value else "none seen in a fresh process either")
        row = {**case, "reader": reader, "import_time": import_time, "fresh": fresh, "warm": warm,
               "plain": plain_value, "effect_in_fresh": effect, "status": status, "errors": errors,
               "zygote_pid": got["warm"].get("zygote_pid"),
               "shared_zygote": value_of(case["var"], kind, got.get("shared_zygote", {}).get("metrics", {}))
               if import_time else None, "trials": got}
        return row

    gpu_cases = [(i, c) for i, c in enumerate(all_cases) if observable(c["var"])[0] != "getenv"]
    env_cases = [(i, c) for i, c in enumerate(all_cases) if observable(c["var"])[0] == "getenv"]
    for i, c in gpu_cases:  # one at a time: their figures are timings and device state
        rows.append(run_case(i, c))
    with concurrent.futures.ThreadPoolExecutor(8) as ex:  # getenv only: no GPU, side by side
        rows += list(ex.map(lambda ic: run_case(*ic), env_cases))
    report["zygotes"] = {str(k): {"pid": z.pid, "info": z.info, "error": z.error} for k, z in pool.zygotes.items()}
    pool.close()
    report["cases"] = rows
    report["total_s"] = time.monotonic() - t_start
    (out / "gpu_warm_check.json").write_text(json.dumps(report, indent=2, default=str))
    print(f"gpu_warm_check {report['date']} on {report['host']}: {len(rows)} cases "
          f"(every variable of every registered mitigation and environment, and 3 more)")
    print("| variable=value | from | read by | fresh | warm | effect in fresh | zygote | verdict |")
    print("|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (r["status"] != "FAIL", r["var"])):
        z = "own (import-time)" if r["import_time"] else "shared"
        if r["import_time"]:
            z += f"; shared one gives {r['shared_zygote']!r}"
        print(f"| {r['var']}={r['value']} | {', '.join(r['from'])[:40]} | {r['reader']} | {r['fresh']!r} | "
              f"{r['warm']!r} | {r['effect_in_fresh']} | {z} | {r['status']} |")
        for e in r["errors"]:
            print(f"    error {e}")
    walls = {m: [t["wall_s"] for r in rows for k, t in r["trials"].items() if k == m and "wall_s" in t]
             for m in ("process", "warm")}
    print(f"trial wall median: process {statistics.median(walls['process']):.2f} s, warm "
          f"{statistics.median(walls['warm']):.2f} s; {len(report['zygotes'])} zygotes; "
          f"{report['total_s']:.0f} s in all; figures in {out / 'gpu_warm_check.json'}")
    failed = [r for r in rows if r["status"] == "FAIL"]
    skipped = [r for r in rows if r["status"] == "SKIP"]
    print(f"{len(rows) - len(failed) - len(skipped)} passed, {len(failed)} failed, {len(skipped)} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
