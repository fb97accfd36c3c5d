"""``queue run --repeat K``: the same run in K fresh processes, and its run-to-run spread.

One run's per-iteration samples show only the noise inside that run. Between runs other
things change: which GEMM a stream queues behind, clocks, allocator and profiler state. On the
H200 two identical hetero_kernels runs differed by 14% in launch delay while each was tight
(docs/hwqueue.md). Each repetition here is a fresh process (:mod:`aorta_tui.hwqueue.child`),
so no CUDA context, cache or profiler state carries over. The combined document is the median
repetition's result with ``repeats`` added: every repetition's summary, and the per-figure
medians as ``summary``. ``queue compare`` uses ``repeats`` for its intervals.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_tui.core import spawn_gate
from aorta_tui.core.atomic import atomic_write_json
from aorta_tui.core.errors import AortaError, EnvironmentProblem, ExitCode, UsageError
from aorta_tui.core.events import Event, Measurement, Progress, ResultWritten
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.hwqueue.point_config import PointConfig
from aorta_tui.hwqueue.result_doc import QueueResult, Repeats, Summary, as_result, load_run_result
from aorta_tui.store.write_errors import output_write_error

if TYPE_CHECKING:
    from aorta_tui.hwqueue.harness import QueueRunConfig

MIN_REPEATS_FOR_SPREAD = 3  # below this a range of runs says little about their spread


def refuse_shared_trace(cfg: QueueRunConfig, what: str) -> None:
    """Several runs from one config would all write the same ``--profiler-trace`` file."""
    if cfg.profiler_trace:
        raise UsageError(f"--profiler-trace writes one run's trace; {what} makes several",
                         hint="drop --profiler-trace, or trace a single `queue run`")


def run_repeated(cfg: QueueRunConfig, repeats: int, on_event: Callable[[Event], None] | None = None,
                 output: str | os.PathLike[str] | None = None) -> QueueResult:
    """Run ``cfg`` ``repeats`` times, each in a fresh process; return the combined result."""
    from aorta_tui.hwqueue.result import new_run_id

    if repeats < 2:
        raise UsageError(f"--repeat must be at least 2 to repeat anything, not {repeats}",
                         hint="drop --repeat for a single run")
    refuse_shared_trace(cfg, "--repeat")
    cfg.validate()
    emit = on_event or (lambda _e: None)
    run_id = cfg.run_id or new_run_id()
    docs: list[QueueResult] = []
    for k in range(repeats):
        docs.append(run_isolated(dataclasses.replace(cfg, run_id=f"{run_id}-r{k + 1}"),
                                 f"repetition {k + 1} of {repeats}"))
        emit(Progress(run_id, done=k + 1, total=repeats,
                      message=f"{cfg.workload} x{cfg.streams} streams: repetition {k + 1}/{repeats}"))
    result = combine(docs, run_id)
    emit(Measurement(run_id, source="queue", name=cfg.workload, values=dict(result.summary.values),
                     reasons=dict(result.unavailable)))
    if output is not None:
        try:
            atomic_write_json(output, result.to_json())
        except OSError as exc:  # a full disk: exit 3 naming the file and the free space
            raise output_write_error(exc, output) from None
        emit(ResultWritten(run_id, path=str(output), what="queue result"))
    return result


@dataclass(frozen=True)
class PointLaunch:
    """Where a run directory's point runs (``queue sweep --run-dir``): its files in its trial
    directory (nothing in /tmp), its identity token in its environment, and ``on_start`` told
    its pid, so that a resume can end it (trial/orphans.py)."""

    trial_dir: Path
    env: dict[str, str]
    on_start: Callable[[int], None] | None = None
    run_dir: Path | None = None  # the run directory: its files through its file layer


def run_isolated(cfg: QueueRunConfig, what: str, point: PointLaunch | None = None) -> QueueResult:
    """``cfg`` run by :mod:`aorta_tui.hwqueue.child` in a fresh process; its result, or its
    error re-raised with the same exit status.

    ``what`` names the run in an error ("repetition 2 of 5", "the 16-stream point"); ``point``:
    a run directory's point, supervised as a trial (its own process group and cgroup).
    """
    if point is not None:
        return _run_point(cfg, what, point)
    with tempfile.TemporaryDirectory(prefix="aorta-queue-") as tmp:
        config, out = Path(tmp) / "config.json", Path(tmp) / "result.json"
        # one line, as json.dumps writes it (a temporary file: its bytes kept as they were)
        config.write_text(json.dumps(PointConfig.of(cfg).to_json()), encoding="utf-8")
        # same process group as us: Ctrl-C reaches the child too
        proc = spawn_gate.run([sys.executable, "-m", "aorta_tui.hwqueue.child", str(config), str(out)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, check=False)
        if proc.returncode != 0 or not out.exists():
            raise _child_failure(what, proc.returncode, proc.stderr)
        return load_run_result(out)


def _run_point(cfg: QueueRunConfig, what: str, point: PointLaunch) -> QueueResult:
    """One point of a run directory, under the trial supervisor: Ctrl-C ends its process tree
    (KeyboardInterrupt, as before), a SIGKILLed sweep leaves a process its resume can prove."""
    from aorta_tui.trial.supervisor import ProcessSpec, run_process

    config, out = point.trial_dir / "point-config.json", point.trial_dir / "point-result.json"
    root = point.run_dir or point.trial_dir
    with RunDirFS(root) as fs:  # the run directory's file layer: no link followed beneath it
        fs.atomic_write_json(config, PointConfig.of(cfg).to_json())
    spec = ProcessSpec(
        argv=[sys.executable, "-m", "aorta_tui.hwqueue.child", str(config), str(out)],
        env=_point_env(point.env), cwd=Path.cwd(),
        stdout_path=point.trial_dir / "stdout.log", stderr_path=point.trial_dir / "stderr.log",
        sample_gpu=False, log_root=root)  # no vendor-tool polling beside a queue measurement
    outcome = run_process(spec, on_start=point.on_start)
    if outcome.exec_error:
        raise EnvironmentProblem(f"{what} could not start: {outcome.exec_error}")
    code = outcome.exit_code if outcome.exit_code is not None else -(outcome.signal or 0)
    if code != 0 or not out.exists():
        try:
            with RunDirFS(root) as fs:
                raw = fs.read_bytes(point.trial_dir / "stderr.log", what="log", limit=spec.max_log_bytes)
            stderr = (raw or b"").decode("utf-8", "replace")
        except (OSError, AortaError):
            stderr = ""
        raise _child_failure(what, code, stderr)
    try:
        return load_run_result(out)
    finally:
        out.unlink(missing_ok=True)  # the point's result.json is the store's copy


def _child_failure(what: str, code: int, stderr: str) -> BaseException:
    """The child's failure as the error the parent raises: same class, same exit status."""
    if code in (ExitCode.INTERRUPTED, -signal.SIGINT):
        return KeyboardInterrupt()
    tail = stderr.strip().splitlines()[-6:]
    detail = "\n  ".join(tail) if tail else "(no output)"
    if code < 0:  # e.g. SIGKILL from the kernel's out-of-memory killer
        return AortaError(f"{what} was killed by {signal.Signals(-code).name}:\n  {detail}",
                          hint="look for the out-of-memory killer in `dmesg`; run the point "
                          "alone to see its whole output", exit_code=ExitCode.ENVIRONMENT)
    message = f"{what} failed with exit status {code}:\n  {detail}"
    if code == ExitCode.USAGE:
        return UsageError(message)
    if code == ExitCode.ENVIRONMENT:
        return EnvironmentProblem(message)
    return AortaError(message, hint="run it once on its own to see the whole output",
                      exit_code=ExitCode.INTERNAL)


def combine(docs: Sequence[QueueResult | dict[str, Any]], run_id: str) -> QueueResult:
    """Per-figure medians over the repetitions, on the median repetition's document."""
    runs = [as_result(d, f"repetition {k + 1}") for k, d in enumerate(docs)]
    n = len(runs)
    keys = list(runs[0].summary.values)
    medians: dict[str, float | None] = {}
    for key in keys:
        present = [v for v in (r.summary.value(key) for r in runs) if v is not None]
        medians[key] = statistics.median(present) if present else None
    # the repetition whose throughput is the median stands for the rest in metrics and samples
    order = sorted(range(n), key=lambda i: (runs[i].summary.value("throughput") is None,
                                            runs[i].summary.value("throughput") or 0.0))
    rep = runs[order[(n - 1) // 2]]
    source = rep.section("summary_source")
    partial = {k: sum(r.summary.value(k) is None for r in runs) for k in keys}
    repeats = Repeats(count=n, summaries=tuple(dict(r.summary.values) for r in runs), extra={
        "isolation": "each repetition a fresh process",
        "run_ids": [r.run_id for r in runs],
        "detail_from": rep.run_id,
        "meaning": ("summary: per-figure median over the repetitions that measured it; metrics, "
                    "samples, timing and timeline: the repetition named in detail_from (the "
                    "median by throughput)"),
        "missing_in": {k: c for k, c in partial.items() if 0 < c < n},
    })
    sections = copy.deepcopy(rep.sections)
    sections["summary_source"] = {k: f"median of {n} repetitions, each {v}" for k, v in source.items()}
    return dataclasses.replace(
        rep, run_id=run_id, summary=Summary(medians, dict(rep.summary.units), dict(rep.summary.better)),
        sections=sections, repeats=repeats, absent=rep.absent - {"run_id"})


def _point_env(overlay: dict[str, str]) -> dict[str, str]:
    """A point's process environment: ours with the bytecode cache where the image compiles
    every import (core/bytecode.py), then the point's own variables."""
    from aorta_tui.core.bytecode import plan_bytecode

    return {**plan_bytecode("auto").apply(os.environ), **overlay}
