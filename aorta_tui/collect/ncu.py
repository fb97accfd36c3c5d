"""The ``ncu`` collector (aorta-tui's addition; upstream has no such name): NVIDIA Nsight
Compute around the trial's command, the CUDA counterpart of ``rocprof --pmc``.

Before the trial: ``ncu --target-processes all -f -o <trial>/ncu/profile -c N [--set S]
[-s K] [-k regex:R] [--metrics M] [--replay-mode X] CMD ...`` (``$NCU_BIN`` first, then ``ncu``
on PATH). Nsight Compute replays every profiled kernel several times, so only the first
``launch_count`` launches (50 by default) are profiled: a trial under ``ncu`` is much slower
and its timings are the profiler's, not the workload's.

After it: ``ncu --import <trial>/ncu/profile.ncu-rep --csv --page details --print-units base``
is kept as ``<trial>/ncu/details.csv`` and its ``Duration`` rows (one per profiled launch, the
SpeedOfLight section) are summed into ``ncu_kernel_count``, ``ncu_gpu_time_ms``,
``ncu_top_kernel_ms``, ``ncu_top_kernels``, the same keys as rocprof's and proton's summaries.

Only checked against a stand-in that takes these arguments and writes that CSV layout; never
run under a real Nsight Compute (no NVIDIA GPU in the session that wrote it).
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aorta_tui.core import spawn_gate
from aorta_tui.core.numerals import ascii_digits

NCU_DIR = "ncu"
REPORT_STEM = "profile"
KEYS = ("set", "launch_count", "launch_skip", "kernel_regex", "metrics", "replay_mode")
REPLAY_MODES = ("kernel", "application", "range", "app-range")
DEFAULT_LAUNCH_COUNT = "50"
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_UNIT_MS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0,
            "ms": 1.0, "second": 1e3, "s": 1e3}
IMPORT_TIMEOUT_S = 300
MAX_CSV_BYTES = 64 << 20


def option_problems(o: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(option, problem, fix) for each option ncu cannot take as written."""
    out = [(k, "unknown ncu option", "valid: " + ", ".join(KEYS)) for k in o if k not in KEYS]
    for k, least in (("launch_count", 1), ("launch_skip", 0)):
        if k in o and (not ascii_digits(o[k].strip()) or int(o[k]) < least):
            out.append((k, f"expected a whole number >= {least}, got {o[k]!r}", f'e.g. {k}: "10"'))
    if "set" in o and not _NAME.match(o["set"].strip()):
        out.append(("set", f"{o['set']!r} is not a section-set name", "e.g. basic, detailed, full"))
    if "kernel_regex" in o and not o["kernel_regex"].strip():
        out.append(("kernel_regex", "must be non-empty", "a regular expression over kernel names"))
    if "metrics" in o:
        names = _tokens(o["metrics"])
        bad = [n for n in names if not _NAME.match(n)]
        if bad or not names:
            out.append(("metrics", f"{bad[0]!r} is not a metric name" if bad else "names no metric",
                        "comma-separated metric names, e.g. gpu__time_duration.sum"))
    if "replay_mode" in o and o["replay_mode"].strip().lower() not in REPLAY_MODES:
        out.append(("replay_mode", f"{o['replay_mode']!r} is not one of {list(REPLAY_MODES)}",
                    "e.g. kernel"))
    return out


def _tokens(value: str) -> list[str]:
    return [t for t in value.replace(",", " ").split() if t]


def ncu_binary(environ: Mapping[str, str] = os.environ) -> tuple[str | None, str]:
    """(the ncu to run, "") or (None, why there is none); ``$NCU_BIN`` first."""
    from aorta_tui.core.tools import find_tool

    return find_tool("ncu", "NCU_BIN", "Nsight Compute ships with the CUDA toolkit: /usr/local/cuda/bin/ncu", environ)


def ncu_prefix(binary: str, out: Path, o: Mapping[str, str]) -> list[str]:
    argv = [binary, "--target-processes", "all", "-f", "-o", str(out / REPORT_STEM),
            "-c", o.get("launch_count", DEFAULT_LAUNCH_COUNT).strip()]
    if "set" in o:
        argv += ["--set", o["set"].strip()]
    if "launch_skip" in o:
        argv += ["-s", o["launch_skip"].strip()]
    if "kernel_regex" in o:
        argv += ["-k", f"regex:{o['kernel_regex']}"]
    if "metrics" in o:
        argv += ["--metrics", ",".join(_tokens(o["metrics"]))]
    if "replay_mode" in o:
        argv += ["--replay-mode", o["replay_mode"].strip().lower()]
    return argv


def wrapped_by(argv: Sequence[str], out: Path) -> str | None:
    """The ncu binary whose prefix (``ncu_prefix``) starts the trial's argv, or None."""
    head = ["--target-processes", "all", "-f", "-o", str(out / REPORT_STEM)]
    for i in range(1, len(argv) - len(head) + 1):
        if list(argv[i:i + len(head)]) == head:
            return argv[i - 1]
    return None


def finish(binary: str, out: Path) -> dict[str, Any]:
    """The trial's record after ``ncu`` ran it: the report exported to CSV and summed."""
    report = out / f"{REPORT_STEM}.ncu-rep"
    if report.is_symlink() or not report.is_file():
        return {"status": "error", "path": NCU_DIR,
                "reason": "ncu wrote no report (the command did not reach a CUDA kernel, or ncu "
                          "failed: see the trial's stderr)"}
    try:
        got = spawn_gate.run([binary, "--import", str(report), "--csv", "--page", "details",
                              "--print-units", "base"], capture_output=True, timeout=IMPORT_TIMEOUT_S,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"status": "error", "path": NCU_DIR, "reason": f"ncu --import failed: {exc}"}
    if got.returncode != 0 or len(got.stdout) > MAX_CSV_BYTES:
        why = got.stderr.decode("utf-8", "replace").strip()[-300:] or f"exit {got.returncode}"
        return {"status": "error", "path": NCU_DIR, "reason": f"ncu --import failed: {why}"}
    from aorta_tui.core.atomic import atomic_write_bytes

    atomic_write_bytes(out / "details.csv", got.stdout)
    return {"status": "ran", "path": NCU_DIR,
            "metrics": details_metrics(got.stdout.decode("utf-8", "replace")),
            "note": "ncu replays each profiled kernel: this trial's timings are the profiler's"}


def details_metrics(text: str) -> dict[str, Any]:
    """``Duration`` per profiled launch (``ID``) from ncu's details CSV, summed per kernel."""
    from aorta_tui.collect.kernel_summary import kernel_summary

    seen: dict[str, tuple[str, float]] = {}  # launch ID -> (kernel, ms)
    try:
        lines = [ln for ln in text.splitlines() if not ln.startswith("==")]  # ncu's own notices
        for row in csv.DictReader(io.StringIO("\n".join(lines))):
            if (row.get("Metric Name") or "").strip() != "Duration":
                continue
            factor = _UNIT_MS.get((row.get("Metric Unit") or "").strip().lower())
            name = (row.get("Kernel Name") or "").strip()
            launch = (row.get("ID") or "").strip()
            try:
                v = float((row.get("Metric Value") or "").replace(",", "").strip())
            except ValueError:
                continue
            if factor is None or not name or not launch or not math.isfinite(v) or v < 0:
                continue
            seen.setdefault(launch, (name, v * factor))
    except csv.Error:
        return {}
    ms: dict[str, float] = {}
    calls: dict[str, int] = {}
    for name, t in seen.values():
        ms[name] = ms.get(name, 0.0) + t
        calls[name] = calls.get(name, 0) + 1
    return kernel_summary("ncu", ms, calls)


__all__ = ["NCU_DIR", "details_metrics", "finish", "ncu_binary", "ncu_prefix", "option_problems",
           "wrapped_by"]
