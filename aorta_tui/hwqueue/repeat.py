"""``queue run --repeat K``: the same run in K fresh processes, and its run-to-run spread.

One run's per-iteration samples show only the noise inside that run. Between runs other
things change: which GEMM a stream queues behind, clocks, allocator and profiler state. On the
H200 two identical hetero_kernels runs differed by 14% in launch delay while each was tight
(docs/hwqueue.md). Each repetition here is a separate ``aorta-tui queue run`` process, so no
CUDA context, cache or profiler state carries over. The combined document is the median
repetition's result with ``repeats`` added: every repetition's summary, and the per-figure
medians as ``summary``. ``queue compare`` uses ``repeats`` for its intervals.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_tui.core.atomic import atomic_write_json
from aorta_tui.core.errors import EnvironmentProblem, ExitCode, UsageError
from aorta_tui.core.events import Event, Measurement, Progress, ResultWritten

if TYPE_CHECKING:
    from aorta_tui.hwqueue.harness import QueueRunConfig

MIN_REPEATS_FOR_SPREAD = 3  # below this a range of runs says little about their spread


def child_argv(cfg: QueueRunConfig, output: Path) -> list[str]:
    """The ``queue run`` command line that reproduces ``cfg`` in a fresh process."""
    argv = [sys.executable, "-m", "aorta_tui", "queue", "run", cfg.workload,
            "--streams", str(cfg.streams), "--iterations", str(cfg.iterations),
            "--warmup", str(cfg.warmup), "--device", cfg.device, "--sync-mode", cfg.sync_mode,
            "--dtype", cfg.dtype, "--size", cfg.size, "--timing", cfg.timing,
            "--detail-iterations", str(cfg.detail_iterations),
            "--stream-priority", cfg.stream_priority, "-q", "-o", str(output)]
    if cfg.run_id:
        argv += ["--run-id", cfg.run_id]
    if cfg.devices:
        argv += ["--devices", ",".join(cfg.devices)]
    for key, value in cfg.params.items():
        argv += ["--param", f"{key}={value}"]
    if cfg.ebpf_trace:
        argv.append("--ebpf-trace")
    if cfg.keep_timeline:
        argv.append("--timeline")
    return argv


def run_repeated(cfg: QueueRunConfig, repeats: int, on_event: Callable[[Event], None] | None = None,
                 output: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Run ``cfg`` ``repeats`` times, each in a fresh process; return the combined result."""
    from aorta_tui.hwqueue.result import new_run_id

    if repeats < 2:
        raise UsageError(f"--repeat must be at least 2 to repeat anything, not {repeats}",
                         hint="drop --repeat for a single run")
    if cfg.profiler_trace:
        raise UsageError("--profiler-trace writes one run's trace; with --repeat there are several",
                         hint="drop --profiler-trace, or trace one run without --repeat")
    cfg.validate()
    emit = on_event or (lambda _e: None)
    run_id = cfg.run_id or new_run_id()
    docs: list[dict[str, Any]] = []
    for k in range(repeats):
        docs.append(run_isolated(dataclasses.replace(cfg, run_id=f"{run_id}-r{k + 1}"),
                                 f"repetition {k + 1} of {repeats}"))
        emit(Progress(run_id, done=k + 1, total=repeats,
                      message=f"{cfg.workload} x{cfg.streams} streams: repetition {k + 1}/{repeats}"))
    result = combine(docs, run_id)
    emit(Measurement(run_id, source="queue", name=cfg.workload, values=dict(result["summary"]),
                     reasons=dict(result["unavailable"])))
    if output is not None:
        atomic_write_json(output, result)
        emit(ResultWritten(run_id, path=str(output), what="queue result"))
    return result


def run_isolated(cfg: QueueRunConfig, what: str) -> dict[str, Any]:
    """``cfg`` as a fresh ``aorta-tui queue run`` process; its result, or its error re-raised.

    ``what`` names the run in an error ("repetition 2 of 5", "the 16-stream point").
    """
    from aorta_tui.hwqueue.result import load_result

    with tempfile.TemporaryDirectory(prefix="aorta-queue-") as tmp:
        out = Path(tmp) / "result.json"
        # same process group as us: Ctrl-C reaches the child too
        proc = subprocess.run(child_argv(cfg, out), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              check=False)
        if proc.returncode != 0 or not out.exists():
            _raise_child_failure(what, proc.returncode, proc.stderr)
        return load_result(out)


def _raise_child_failure(what: str, code: int, stderr: str) -> None:
    tail = stderr.strip().splitlines()[-6:]
    detail = "\n  ".join(tail) if tail else "(no output)"
    message = f"{what} failed with exit status {code}:\n  {detail}"
    if code == ExitCode.USAGE:
        raise UsageError(message)
    if code == ExitCode.INTERRUPTED or code < 0:
        raise KeyboardInterrupt
    raise EnvironmentProblem(message, hint="run it once without --repeat to see the whole output")


def combine(docs: list[dict[str, Any]], run_id: str) -> dict[str, Any]:
    """Per-figure medians over the repetitions, on the median repetition's document."""
    n = len(docs)
    keys = list(docs[0]["summary"])
    medians: dict[str, float | None] = {}
    for key in keys:
        values = [d["summary"].get(key) for d in docs]
        present = [v for v in values if v is not None]
        medians[key] = statistics.median(present) if present else None
    # the repetition whose throughput is the median stands for the rest in metrics and samples
    order = sorted(range(n), key=lambda i: (docs[i]["summary"].get("throughput") is None,
                                            docs[i]["summary"].get("throughput") or 0.0))
    rep = order[(n - 1) // 2]
    out = copy.deepcopy(docs[rep])
    out["run_id"] = run_id
    out["summary"] = medians
    out["summary_source"] = {k: f"median of {n} repetitions, each {v}"
                             for k, v in docs[rep].get("summary_source", {}).items()}
    partial = {k: sum(d["summary"].get(k) is None for d in docs) for k in keys}
    out["repeats"] = {
        "count": n,
        "isolation": "each repetition a fresh `aorta-tui queue run` process",
        "run_ids": [d["run_id"] for d in docs],
        "summaries": [d["summary"] for d in docs],
        "detail_from": docs[rep]["run_id"],
        "meaning": ("summary: per-figure median over the repetitions that measured it; metrics, "
                    "samples, timing and timeline: the repetition named in detail_from (the "
                    "median by throughput)"),
        "missing_in": {k: c for k, c in partial.items() if 0 < c < n},
    }
    return out
