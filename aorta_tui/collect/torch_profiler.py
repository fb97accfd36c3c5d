"""The ``torch_profiler`` collector (aorta-tui's addition; upstream has no such name): the
CUDA counterpart of ``rocprof``'s kernel trace, run inside the trial worker.

``torch.profiler.profile`` wraps the workload's steps (after ``setup``, before ``cleanup``), with
CPU activities always and CUDA activities when CUDA is available (Kineto's CUPTI path, the same
kernels Nsight Systems would show), one ``prof.step()`` per workload step. Output
(``<trial>/torch_profiler/``):

- ``trace.json`` (``trace_rank<R>.json`` for ranks other than 0): the chrome trace
  (``chrome://tracing`` / Perfetto), written atomically (a temporary file, then renamed).
- ``summary_rank<R>.json`` (atomic): ``metrics`` (below), ``activities``, ``steps``,
  ``options``, ``error``.

Metrics (strict JSON; times in ms): ``torch_profiler_steps``, ``torch_profiler_op_count``
(calls of every op), ``torch_profiler_cpu_time_ms`` (the ops' self CPU time),
``torch_profiler_top_ops`` (``[{name, count, self_cpu_ms, cpu_total_ms}]`` by self CPU time,
``self_device_ms`` too when device time was measured), and for the kernels
``torch_profiler_kernel_count``, ``torch_profiler_gpu_time_ms``, ``torch_profiler_top_kernel_ms``,
``torch_profiler_top_kernels`` (``[{name, count, ms}]``). Device time is published only when
CUDA activities were recorded; otherwise each device metric is the string
``"not available: <reason>"`` (never a 0 that reads like a measurement).

Options (``collect: {torch_profiler: {...}}``, strings): ``activities`` (``auto``: cpu, plus cuda
when available; or ``cpu`` / ``cpu,cuda``), ``record_shapes``, ``profile_memory``,
``with_stack`` (booleans, default false), ``trace`` (write the chrome trace, default true),
``top`` (1-100, default 10). A collector problem never fails the trial: it is the summary's
``error``.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_tui.collect.summaries import TorchProfilerSummary
from aorta_tui.core.inputs import Json
from aorta_tui.core.numerals import ascii_digits

if TYPE_CHECKING:  # torch is imported where it runs: the worker without the collector never loads it
    from torch.profiler import profile

OUTPUT_SUBDIR = "torch_profiler"
KEYS = ("activities", "record_shapes", "profile_memory", "with_stack", "trace", "top")
_BOOL = {"1": True, "true": True, "yes": True, "on": True,
         "0": False, "false": False, "no": False, "off": False}
_ACTIVITIES = ("auto", "cpu", "cuda")
MAX_TOP = 100


def option_problems(options: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(option, problem, fix) for each option that cannot be honoured as written."""
    out = [(k, "unknown torch_profiler option", "valid: " + ", ".join(KEYS))
           for k in options if k not in KEYS]
    for k in ("record_shapes", "profile_memory", "with_stack", "trace"):
        if k in options and options[k].strip().lower() not in _BOOL:
            out.append((k, f"expected a boolean, got {options[k]!r}", '"true" or "false"'))
    if "top" in options:
        v = options["top"].strip()
        if not ascii_digits(v) or not 1 <= int(v) <= MAX_TOP:
            out.append(("top", f"expected a whole number 1-{MAX_TOP}, got {options['top']!r}",
                        'e.g. top: "10"'))
    if "activities" in options:
        toks = _tokens(options["activities"])
        bad = [t for t in toks if t not in _ACTIVITIES]
        if bad or not toks or ("auto" in toks and len(toks) > 1) or (toks and "cpu" not in toks
                                                                      and "auto" not in toks):
            why = (f"unknown activity {bad[0]!r}" if bad else "names no activity" if not toks
                   else "auto stands alone" if "auto" in toks else "cpu activities are always on")
            out.append(("activities", why, 'one of "auto", "cpu", "cpu,cuda"'))
    return out


def _tokens(value: str) -> list[str]:
    return [t for t in value.lower().replace(",", " ").split() if t]


def _flag(options: Mapping[str, str], key: str, default: bool) -> bool:
    return _BOOL.get(str(options.get(key, "")).strip().lower(), default)


class TorchProfiler:
    """One rank's ``torch.profiler.profile`` around the workload's steps; never raises."""

    def __init__(self, out_dir: Path, options: Mapping[str, str], *, rank: int = 0) -> None:
        self.out_dir = out_dir
        self.options = {k: str(v) for k, v in options.items()}
        self.rank = rank
        self.top = int(self.options.get("top", "10").strip() or 10)
        self.steps = 0
        self.error: str | None = None
        self.cuda_reason: str | None = None  # why CUDA activities were not recorded
        self.activities: list[str] = []
        self._prof: profile | None = None
        self.trace = out_dir / ("trace.json" if rank == 0 else f"trace_rank{rank}.json")
        self.summary = out_dir / f"summary_rank{rank}.json"

    def start(self) -> None:
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            for stale in (self.trace, self.summary):  # a re-run never reports the last attempt
                with contextlib.suppress(FileNotFoundError):
                    stale.unlink()
            self._prof = self._profile()
            self._prof.__enter__()
        except Exception as exc:  # never the trial's failure: the summary says it
            self._prof = None
            self.error = f"{type(exc).__name__}: {exc}"

    def _profile(self) -> profile:
        import torch
        from torch.profiler import ProfilerActivity, profile

        wanted = _tokens(self.options.get("activities", "auto"))
        acts = [ProfilerActivity.CPU]
        self.activities = ["cpu"]
        want_cuda = "cuda" in wanted or "auto" in wanted
        if want_cuda and torch.cuda.is_available():
            acts.append(ProfilerActivity.CUDA)
            self.activities.append("cuda")
        elif want_cuda:
            self.cuda_reason = "no CUDA device here (torch.cuda.is_available() is False)"
        else:
            self.cuda_reason = "the recipe asked for CPU activities only (activities: cpu)"
        return profile(activities=acts,
                       record_shapes=_flag(self.options, "record_shapes", False),
                       profile_memory=_flag(self.options, "profile_memory", False),
                       with_stack=_flag(self.options, "with_stack", False))

    def step(self) -> None:
        """The workload finished a step (its ``on_step``)."""
        self.steps += 1
        if self._prof is not None:
            try:
                self._prof.step()
            except Exception as exc:
                self.error = self.error or f"{type(exc).__name__}: {exc}"

    def finish(self) -> TorchProfilerSummary:
        """Stop, export the trace, write the summary (atomic); returns the summary."""
        metrics: dict[str, Json] = {}
        if self._prof is not None:
            prof, self._prof = self._prof, None
            try:
                if "cuda" in self.activities:
                    import torch

                    torch.cuda.synchronize()  # the last step's kernels finish inside the window
                prof.__exit__(None, None, None)
                metrics = summarise(prof, steps=self.steps, top=self.top,
                                    cuda_reason=None if "cuda" in self.activities else self.cuda_reason)
                if _flag(self.options, "trace", True):
                    self._export(prof)
            except Exception as exc:
                self.error = self.error or f"{type(exc).__name__}: {exc}"
        summary = TorchProfilerSummary(
            rank=self.rank, pid=os.getpid(), steps=self.steps,
            activities=tuple(self.activities), options=self.options,
            trace=self.trace.name if self.trace.is_file() else None, metrics=metrics,
            error=self.error)
        try:
            from aorta_tui.core.atomic import atomic_write_json

            self.out_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.summary, summary.to_json())
        except Exception as exc:  # the orchestrator's record says the summary is missing
            summary = replace(summary, error=summary.error or f"{type(exc).__name__}: {exc}")
        return summary

    def _export(self, prof: profile) -> None:
        tmp = self.trace.with_name(f".{self.trace.name}.{os.getpid()}.tmp")
        try:
            prof.export_chrome_trace(str(tmp))
            os.replace(tmp, self.trace)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


def _ms(us: float) -> float:
    v = float(us) / 1e3
    return v if math.isfinite(v) else 0.0


def summarise(prof: profile, *, steps: int, top: int, cuda_reason: str | None) -> dict[str, Any]:
    """The metrics of a finished profile: ops by self CPU time, kernels by device time."""
    from torch.autograd import DeviceType

    ops = [e for e in prof.key_averages()
           if e.device_type == DeviceType.CPU and not str(e.key).startswith("ProfilerStep#")]
    measured = cuda_reason is None
    ranked = sorted(ops, key=lambda e: e.self_cpu_time_total, reverse=True)[:top]
    top_ops = []
    for e in ranked:
        row = {"name": str(e.key), "count": int(e.count), "self_cpu_ms": _ms(e.self_cpu_time_total),
               "cpu_total_ms": _ms(e.cpu_time_total)}
        if measured:
            row["self_device_ms"] = _ms(e.self_device_time_total)
        top_ops.append(row)
    out: dict[str, Any] = {
        "torch_profiler_steps": steps,
        "torch_profiler_op_count": sum(int(e.count) for e in ops),
        "torch_profiler_cpu_time_ms": sum(_ms(e.self_cpu_time_total) for e in ops),
        "torch_profiler_top_ops": top_ops,
    }
    if not measured:
        na = f"not available: {cuda_reason}"
        for k in ("kernel_count", "gpu_time_ms", "top_kernel_ms", "top_kernels"):
            out[f"torch_profiler_{k}"] = na
        return out
    kernels: dict[str, list[float]] = {}  # name -> [calls, ms]
    for ev in prof.events():
        if ev.device_type == DeviceType.CUDA:
            tally = kernels.setdefault(str(ev.name), [0, 0.0])
            tally[0] += 1
            tally[1] += _ms(ev.time_range.elapsed_us())
    by_time = sorted(kernels.items(), key=lambda kv: kv[1][1], reverse=True)
    out["torch_profiler_kernel_count"] = int(sum(c for c, _ in kernels.values()))
    out["torch_profiler_gpu_time_ms"] = sum(t for _, t in kernels.values())
    out["torch_profiler_top_kernel_ms"] = by_time[0][1][1] if by_time else 0.0
    out["torch_profiler_top_kernels"] = [{"name": n, "count": int(c), "ms": t}
                                         for n, (c, t) in by_time[:top]]
    return out


def from_spec(spec: Mapping[str, Any], rank: int) -> TorchProfiler | None:
    """The trial worker's profiler when the cell collects ``torch_profiler`` (else None)."""
    options = (spec.get("collect") or {}).get("torch_profiler")
    if not isinstance(options, dict):
        return None
    return TorchProfiler(Path(spec["trial_dir"]) / OUTPUT_SUBDIR, options, rank=rank)


__all__ = ["KEYS", "OUTPUT_SUBDIR", "TorchProfiler", "from_spec", "option_problems", "summarise"]
