"""GPU proof of ``trial_isolation: warm``: runtime variables still take effect in a forked trial.

Runs one probe workload (below) as real trials, each through the project's supervisor
(:func:`aorta_tui.core.supervisor.run_process`), two ways: a fresh process (``python -m
aorta_tui.core.trial_worker``, the default isolation) and forked from one warm zygote
(:mod:`aorta_tui.core.warm`) - with and without each variable, alternated. A variable counts as
honoured in warm mode when warm trials show the same effect as fresh processes:

* ``CUDA_LAUNCH_BLOCKING=1``: a launch of a ~20 ms sleep kernel returns only once it ran
  (host-side launch time ~ the kernel's length; without: microseconds).
* ``CUDA_DEVICE_MAX_CONNECTIONS=1``: a queue workload (8 streams, 2 dependent sleep kernels
  each, launched depth-first) serialises behind one hardware queue (~(streams+1) x kernel),
  against ~2 x kernel with 32 connections.
* ``PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync``: the allocator backend torch reports.
* ``CUDA_VISIBLE_DEVICES=`` (empty): no device visible in the trial.
* ``AORTA_WARM_PROBE=<value>`` (no GPU needed): the C ``getenv`` of the trial sees its value.

Every stage runs whatever failed before it; all figures go to ``$OUT/gpu_warm_check.json``
(``$OUT`` defaults to a temporary directory), one summary line per check on stdout. On a box
without CUDA the GPU checks say so and the getenv check still runs. Exit 0 when every check
that could run passed, 1 otherwise.

    python scripts/gpu_warm_check.py          # in the repository root, ~30-60 s on the H200
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, ClassVar

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

from aorta_tui.core.workload import Workload, WorkloadContext, WorkloadResult  # noqa: E402

SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


class WarmProbe(Workload):
    """Measures what the runtime variables change (one trial = one measurement of each)."""

    name: ClassVar[str] = "warm_probe"
    description: ClassVar[str] = "launch blocking, stream concurrency, allocator backend, getenv"

    def setup(self, ctx: WorkloadContext) -> None:
        pass

    def run(self, ctx: WorkloadContext) -> WorkloadResult:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.getenv.restype = ctypes.c_char_p
        raw = libc.getenv(b"AORTA_WARM_PROBE")
        metrics: dict[str, Any] = {"c_getenv": raw.decode() if raw is not None else None,
                                   "pid": os.getpid()}
        import torch

        metrics["cuda_available"] = torch.cuda.is_available()
        metrics["device_count"] = torch.cuda.device_count() if metrics["cuda_available"] else 0
        if metrics["cuda_available"]:
            metrics.update(_gpu_figures(torch))
        ctx.on_step(0, 0.0)
        return WorkloadResult(metrics=metrics, step_times_s=[0.0])


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
    per_ms = cycles / max(start.elapsed_time(end), 1e-3)
    return int(per_ms * ms)


def _gpu_figures(torch: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"allocator_backend": torch.cuda.get_allocator_backend()}
    cycles = _sleep_cycles(torch, 20.0)
    launches = []
    for _ in range(5):  # host-side time of one launch of a 20 ms kernel
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.cuda._sleep(cycles)
        launches.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    out["launch_return_ms"] = statistics.median(launches)
    streams = [torch.cuda.Stream() for _ in range(8)]
    for s in streams:  # warm each stream's first launch
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
    out["queue_wall_ms"] = statistics.median(walls)
    out["kernel_ms"] = 20.0
    return out


# -- the driver ---------------------------------------------------------------------------------


def _trial(out: Path, name: str, env_extra: dict[str, str], launcher: Any) -> dict[str, Any]:
    from aorta_tui.core.supervisor import ProcessSpec, run_process

    tdir = out / "trials" / name
    tdir.mkdir(parents=True, exist_ok=True)
    spec_path = tdir / "trial_spec.json"
    spec_path.write_text(json.dumps({"workload": "warm_probe", "workload_ref": "gpu_warm_check:WarmProbe",
                                     "steps": 1, "config": {}, "seed": 0, "trial_dir": str(tdir),
                                     "switches": []}))
    env = {**os.environ, **SAFE_ENV, "PYTHONUNBUFFERED": "1", **env_extra,
           "PYTHONPATH": os.pathsep.join([str(REPO), str(Path(__file__).resolve().parent),
                                          os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, "-m", "aorta_tui.core.trial_worker", str(spec_path)]
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
    return {"metrics": res.get("metrics", {}), "wall_s": wall, "exit_code": outcome.exit_code,
            "passed": res.get("passed"), "warm": (res.get("timeline") or {}).get("info", {}).get("warm")}


CASES: list[tuple[str, dict[str, str]]] = [
    ("plain", {}),
    ("launch_blocking", {"CUDA_LAUNCH_BLOCKING": "1"}),
    ("max_connections_1", {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}),
    ("max_connections_32", {"CUDA_DEVICE_MAX_CONNECTIONS": "32"}),
    ("alloc_async", {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}),
    ("no_devices", {"CUDA_VISIBLE_DEVICES": ""}),
    ("getenv", {"AORTA_WARM_PROBE": "value-seen-by-getenv"}),
]


def _checks(res: dict[str, dict[str, dict[str, Any]]]) -> list[tuple[str, str, str]]:
    """(name, PASS|FAIL|SKIP, detail) per check, for each mode."""
    rows = []

    def m(mode: str, case: str, key: str) -> Any:
        return res.get(mode, {}).get(case, {}).get("metrics", {}).get(key)

    for mode in ("process", "warm"):
        ok = m(mode, "getenv", "c_getenv") == "value-seen-by-getenv"
        rows.append((f"{mode}: C getenv sees the trial's variable", "PASS" if ok else "FAIL",
                     repr(m(mode, "getenv", "c_getenv"))))
        if not m(mode, "plain", "cuda_available"):
            rows.append((f"{mode}: GPU checks", "SKIP", "no CUDA device in the plain trial"))
            continue
        plain, blocking = m(mode, "plain", "launch_return_ms"), m(mode, "launch_blocking", "launch_return_ms")
        ok = plain is not None and blocking is not None and blocking > 10 and plain < 5
        rows.append((f"{mode}: CUDA_LAUNCH_BLOCKING=1 serialises launches", "PASS" if ok else "FAIL",
                     f"launch of a 20 ms kernel returns after {blocking} ms (without: {plain} ms)"))
        one, many = m(mode, "max_connections_1", "queue_wall_ms"), m(mode, "max_connections_32", "queue_wall_ms")
        ok = one is not None and many is not None and one > 2 * many
        rows.append((f"{mode}: CUDA_DEVICE_MAX_CONNECTIONS changes concurrency", "PASS" if ok else "FAIL",
                     f"8 streams x 2 dependent 20 ms kernels: {one} ms with 1 connection, {many} ms with 32"))
        backend = m(mode, "alloc_async", "allocator_backend")
        rows.append((f"{mode}: PYTORCH_CUDA_ALLOC_CONF applies", "PASS" if backend == "cudaMallocAsync" else "FAIL",
                     f"allocator backend {backend!r} (plain: {m(mode, 'plain', 'allocator_backend')!r})"))
        count = m(mode, "no_devices", "device_count")
        rows.append((f"{mode}: CUDA_VISIBLE_DEVICES= hides the GPUs", "PASS" if count == 0 else "FAIL",
                     f"device_count {count} (plain: {m(mode, 'plain', 'device_count')})"))
    return rows


def main() -> int:
    out = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="gpu-warm-"))
    out.mkdir(parents=True, exist_ok=True)
    from aorta_tui.core.warm import WarmLauncher, start_zygote

    report: dict[str, Any] = {"started": time.time(), "host": os.uname().nodename, "errors": []}
    base = {**os.environ, **SAFE_ENV, "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join([str(REPO), str(Path(__file__).resolve().parent),
                                           os.environ.get("PYTHONPATH", "")])}
    zygote = None
    try:
        zygote = start_zygote(("check",), base, ["gpu_warm_check"], REPO, out / "zygote.log")
    except Exception as exc:
        report["errors"].append(f"zygote: {exc}")
    results: dict[str, dict[str, dict[str, Any]]] = {"process": {}, "warm": {}}
    for case, extra in CASES:  # alternated: a fresh process, then a forked one, per case
        for mode in ("process", "warm"):
            try:
                launcher = WarmLauncher(zygote) if mode == "warm" else None
                if mode == "warm" and zygote is None:
                    raise RuntimeError("no zygote")
                results[mode][case] = _trial(out, f"{mode}-{case}", extra, launcher)
            except Exception:
                results[mode][case] = {"error": traceback.format_exc()[-2000:]}
    if zygote is not None:
        report["zygote"] = zygote.info
        zygote.close()
    report["results"] = results
    rows = _checks(results)
    report["checks"] = [{"check": c, "status": s, "detail": d} for c, s, d in rows]
    for mode, cases in results.items():
        walls = [r["wall_s"] for r in cases.values() if "wall_s" in r]
        report[f"{mode}_trial_wall_median_s"] = statistics.median(walls) if walls else None
        for case, r in cases.items():
            if "error" in r:
                print(f"ERROR {mode}/{case}: {r['error'][-400:]}")
    (out / "gpu_warm_check.json").write_text(json.dumps(report, indent=2, default=str))
    for c, s, d in rows:
        print(f"{s:4} {c}: {d}")
    print(f"trial wall median: process {report['process_trial_wall_median_s']}, "
          f"warm {report['warm_trial_wall_median_s']} s; figures in {out / 'gpu_warm_check.json'}")
    return 0 if all(s != "FAIL" for _, s, _ in rows) and not report["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
