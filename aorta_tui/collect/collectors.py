"""Upstream AORTA's ``collect:`` collectors, per trial: attach, run, record.

A cell's collectors are the recipe's ``collect:`` (a cell's own ``collect:`` replaces it;
``sweep run --collect`` replaces both). Before a trial:

- ``rocprof``: the trial's command runs under ``rocprofv3`` as upstream builds it
  (``rocprofv3 -d <trial>/rocprof -o aorta --output-format csv --kernel-trace --stats -S
  --summary-output-file rocprof_summary -- <command>``; ``$ROCPROF_BIN`` names another
  binary). After it, the ``*_kernel_stats.csv`` (else ``*_kernel_trace.csv``) are summed into
  ``rocprof_kernel_count``, ``rocprof_gpu_time_ms``, ``rocprof_top_kernel_ms``,
  ``rocprof_top_kernels``, as upstream's parser does.
- ``proton``: ``mode: cli`` runs the trial's Python under ``python -m triton.profiler.proton
  -n <trial>/proton/proton --context shadow --data tree SCRIPT ARGS`` (the trial worker by its
  script path); ``mode: env`` hands the program ``AORTA_PROTON_*``. The ``.hatchet`` profiles
  are summed into ``proton_*`` metrics.
- ``layer_numerics``: the trial worker's hooks (collect/layer_numerics.py), ``<trial>/
  layer_numerics/``.
- ``torch_profiler`` (aorta-tui's addition, the CUDA counterpart of rocprof's kernel trace):
  ``torch.profiler`` around the workload's steps in the trial worker
  (collect/torch_profiler.py), ``<trial>/torch_profiler/trace.json`` and its summary.
- ``ncu`` (aorta-tui's addition): the trial's command under Nsight Compute
  (collect/ncu.py), ``<trial>/ncu/profile.ncu-rep`` and ``details.csv``, summed into
  ``ncu_*`` metrics.

Where a collector cannot run (no ``rocprofv3``, no Triton in the workload's Python, a probe
command that is not a Python script, ``numerics`` / ``amd_log``, which upstream only
validates), the trial runs without it and its record says ``not available: <reason>``.
Everything goes into ``result.json`` under ``collectors``: ``{name: {"status": "ran" |
"not available" | "error", "reason", "path", "metrics"}}``; ``matrix.md`` counts them.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any

from aorta_tui.collect.kernel_summary import kernel_summary
from aorta_tui.collect.layer_numerics import OUTPUT_SUBDIR as LAYER_NUMERICS_DIR
from aorta_tui.collect.summaries import LayerNumericsSummary, S, TorchProfilerSummary, load_summary
from aorta_tui.core import spawn_gate
from aorta_tui.core.errors import AortaError
from aorta_tui.core.inputs import Json
from aorta_tui.core.rundir_fs import RunDirFS

WRAP_ORDER = ("rocprof", "ncu", "proton")  # rocprof outermost, as upstream
ROCPROF_DIR, PROTON_DIR = "rocprof", "proton"
ROCPROF_BASENAME, ROCPROF_SUMMARY_STEM = "aorta", "rocprof_summary"
PROTON_MODULE = "triton.profiler.proton"
MAX_ARTIFACT_BYTES = 256 << 20  # a CSV or profile larger than this is not parsed (a note)

ROCPROF_TRACE = {"kernel": "--kernel-trace", "hip": "--hip-trace",
                 "hip_runtime": "--hip-runtime-trace", "memory_copy": "--memory-copy-trace",
                 "rccl": "--rccl-trace", "marker": "--marker-trace",
                 "scratch": "--scratch-memory-trace"}
_ROCPROF_ENUMS = {"output_format": {"csv", "json", "pftrace", "otf2", "rocpd"},
                  "summary_units": {"sec", "msec", "usec", "nsec"}}
_ROCPROF_KEYS = ("trace", "output_format", "stats", "pmc", "kernel_include_regex", "summary_units")
_PROTON_ENUMS = {"mode": {"cli", "env"},
                 "backend": {"auto", "cupti", "rocprofiler", "roctracer", "instrumentation"},
                 "context": {"shadow", "python"}, "data": {"tree", "trace"},
                 "instrumentation_mode": {"default", "mma", "pcsampling"},
                 "granularity": {"cta", "warp", "warp_2", "warp_4", "warp_8", "warp_group",
                                 "warp_group_2", "warp_group_4", "warp_group_8"}}
_BOOL = {"1": True, "true": True, "yes": True, "on": True,
         "0": False, "false": False, "no": False, "off": False}
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
NOT_RUN_UPSTREAM = ("upstream AORTA only validates this collector (a workload wrapper must "
                    "implement it); aorta-tui records nothing for it")


# -- options (checked when the recipe loads) --------------------------------------------------

def option_problems(name: str, options: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(option, problem, fix) for every option ``name`` cannot take (upstream's schemas)."""
    if name == "rocprof":
        return _rocprof_problems(options)
    if name == "proton":
        return _proton_problems(options)
    if name == "layer_numerics":
        from aorta_tui.collect.layer_numerics import option_problems as ln

        return ln(dict(options))
    if name == "torch_profiler":
        from aorta_tui.collect.torch_profiler import option_problems as tp

        return tp(options)
    if name == "ncu":
        from aorta_tui.collect.ncu import option_problems as nc

        return nc(options)
    return []


def _rocprof_problems(o: Mapping[str, str]) -> list[tuple[str, str, str]]:
    out = [(k, "unknown rocprof option", "valid: " + ", ".join(_ROCPROF_KEYS))
           for k in o if k not in _ROCPROF_KEYS]
    trace = _tokens(o.get("trace", "kernel").lower())
    bad = [t for t in trace if t not in ROCPROF_TRACE]
    if bad or not trace:
        out.append(("trace", f"unknown domain {bad[0]!r}" if bad else "names no domain",
                    "valid: " + ", ".join(sorted(ROCPROF_TRACE))))
    for k, allowed in _ROCPROF_ENUMS.items():
        if k in o and o[k].strip().lower() not in allowed:
            out.append((k, f"{o[k]!r} is not one of {sorted(allowed)}", f"e.g. {sorted(allowed)[0]}"))
    if "stats" in o and o["stats"].strip().lower() not in _BOOL:
        out.append(("stats", f"expected a boolean, got {o['stats']!r}", '"true" or "false"'))
    if "pmc" in o and not _tokens(o["pmc"]):
        out.append(("pmc", "names no counter", "comma- or space-separated counter names"))
    if "kernel_include_regex" in o and not o["kernel_include_regex"].strip():
        out.append(("kernel_include_regex", "must be non-empty", "a regular expression"))
    return out


def _proton_problems(o: Mapping[str, str]) -> list[tuple[str, str, str]]:
    out = [(k, "unknown proton option", "valid: " + ", ".join(_PROTON_ENUMS))
           for k in o if k not in _PROTON_ENUMS]
    for k, allowed in _PROTON_ENUMS.items():
        if k in o and o[k].strip().lower() not in allowed:
            out.append((k, f"{o[k]!r} is not one of {sorted(allowed)}", f"e.g. {sorted(allowed)[0]}"))
    knobs = [k for k in ("instrumentation_mode", "granularity") if k in o]
    if knobs and o.get("backend", "auto").strip().lower() != "instrumentation":
        out.append((knobs[0], "only applies with backend: instrumentation (Proton ignores it "
                    "otherwise)", "add `backend: instrumentation` or drop it"))
    return out


def _tokens(value: str) -> list[str]:
    return [t for t in value.replace(",", " ").split() if t]


# -- which collectors a cell runs -------------------------------------------------------------

def cell_collect(recipe: object, cell_name: str) -> dict[str, dict[str, str]]:
    """name -> options for the cell (a cell's ``collect`` replaces the recipe's)."""
    names: tuple[str, ...] = tuple(getattr(recipe, "collect", ()) or ())
    for c in getattr(recipe, "cells", ()):
        if c.name == cell_name and c.collect is not None:
            names = c.collect
    options = getattr(recipe, "collect_options", {}) or {}
    ordered = [n for n in WRAP_ORDER if n in names] + [n for n in names if n not in WRAP_ORDER]
    return {n: dict(options.get(n) or {}) for n in ordered}


# -- availability -----------------------------------------------------------------------------

def rocprof_binary(environ: Mapping[str, str] = os.environ) -> tuple[str | None, str]:
    """(the rocprofv3 to run, "") or (None, why there is none); ``$ROCPROF_BIN`` first."""
    from aorta_tui.core.tools import find_tool

    return find_tool("rocprofv3", "ROCPROF_BIN", "it ships with ROCm's rocprofiler-sdk", environ)


@functools.lru_cache(maxsize=8)
def proton_problem(python: str, pythonpath: str = "") -> str | None:
    """Why ``python`` cannot import Triton's proton (``None``: it can). Asked in a subprocess:
    the orchestrator never imports triton."""
    probe = ("import importlib.util,sys\n"
             f"sys.exit(0 if importlib.util.find_spec({PROTON_MODULE!r}) else 3)")
    env = {**os.environ, "PYTHONPATH": pythonpath} if pythonpath else dict(os.environ)
    try:
        got = spawn_gate.run([python, "-c", probe], capture_output=True, text=True, timeout=60,
                             env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{python} could not be asked for Triton ({exc})"
    if got.returncode == 0:
        return None
    return (f"{PROTON_MODULE} is not importable by {python} (pip install triton; it comes with "
            "CUDA/ROCm builds of torch)")


# -- before the trial -------------------------------------------------------------------------

def wrap_trial(collect: Mapping[str, Mapping[str, str]], argv: list[str], env: dict[str, str],
               trial_dir: Path) -> list[str]:
    """``argv`` with the attaching collectors around it (``env`` gains what they need); a
    collector that cannot attach leaves ``argv`` alone (its record says why, afterwards)."""
    if "proton" in collect and _proton_mode(collect["proton"]) == "env" \
            and proton_problem(*_python_of(argv, env)) is None:
        env.update(_proton_env(trial_dir, collect["proton"]))
    elif "proton" in collect and proton_problem(*_python_of(argv, env)) is None:
        wrapped = _proton_argv(argv, trial_dir, collect["proton"])
        if wrapped is not None:
            _proton_devices(env, collect["proton"])
            _fresh_dir(trial_dir, PROTON_DIR)
            env["AORTA_TRIAL_FAST_EXIT"] = "0"  # proton writes its profile after the script
            argv = wrapped
    if "ncu" in collect:
        from aorta_tui.collect import ncu as ncu_collect

        binary, _ = ncu_collect.ncu_binary(env)
        if binary is not None:
            _fresh_dir(trial_dir, ncu_collect.NCU_DIR)
            env["AORTA_TRIAL_FAST_EXIT"] = "0"  # ncu's injected library flushes at exit
            argv = [*ncu_collect.ncu_prefix(binary, trial_dir / ncu_collect.NCU_DIR, collect["ncu"]), *argv]
    if "rocprof" in collect:
        binary, _ = rocprof_binary(env)
        if binary is not None:
            _fresh_dir(trial_dir, ROCPROF_DIR)
            argv = [*rocprof_prefix(binary, trial_dir / ROCPROF_DIR, collect["rocprof"]), *argv]
    return argv


def rocprof_prefix(binary: str, out: Path, o: Mapping[str, str]) -> list[str]:
    """Upstream's ``rocprofv3 ... --`` prefix (``--pmc`` last: it is variadic)."""
    argv = [binary, "-d", str(out), "-o", ROCPROF_BASENAME, "--output-format",
            o.get("output_format", "csv").strip().lower()]
    argv += [ROCPROF_TRACE[t] for t in dict.fromkeys(_tokens(o.get("trace", "kernel").lower()))]
    if _BOOL.get(o.get("stats", "true").strip().lower(), True):
        argv.append("--stats")
    argv += ["-S", "--summary-output-file", ROCPROF_SUMMARY_STEM]
    if "summary_units" in o:
        argv += ["-u", o["summary_units"].strip().lower()]
    if "kernel_include_regex" in o:
        argv += ["--kernel-include-regex", o["kernel_include_regex"]]
    if "pmc" in o:
        argv += ["--pmc", *_tokens(o["pmc"])]
    return [*argv, "--"]


def _proton_mode(o: Mapping[str, str]) -> str:
    return o.get("mode", "cli").strip().lower()


def _proton_flags(o: Mapping[str, str]) -> tuple[str, str, str, str | None]:
    backend = o.get("backend", "auto").strip().lower()
    mode = None
    if "instrumentation_mode" in o or "granularity" in o:
        mode = o.get("instrumentation_mode", "default").strip().lower()
        if "granularity" in o:
            mode += f":granularity={o['granularity'].strip().lower()}"
    return (backend, o.get("context", "shadow").strip().lower(),
            o.get("data", "tree").strip().lower(), mode)


def _proton_argv(argv: list[str], trial_dir: Path, o: Mapping[str, str]) -> list[str] | None:
    target = _python_script(argv)
    if target is None:
        return None
    backend, context, data, mode = _proton_flags(o)
    out = [target[0], "-m", PROTON_MODULE, "-n", str(trial_dir / PROTON_DIR / "proton")]
    if backend != "auto":
        out += ["-b", backend]
    out += ["--context", context, "--data", data]
    if mode is not None:
        out += ["--mode", mode]
    return [*out, *target[1:]]


def _python_script(argv: Sequence[str]) -> list[str] | None:
    """[python, script, args...] that Proton's front-end can run, or None. The trial worker
    (``-m aorta_tui.trial.worker``) runs by its script path (runpy.run_path)."""
    if len(argv) < 2 or not _PYTHON.match(Path(argv[0]).name):
        return None
    if argv[1:3] == ["-m", "aorta_tui.trial.worker"]:
        # found by the name the argv gives, not imported: the trial package sits above this one
        import importlib.util

        spec = importlib.util.find_spec(argv[2])
        if spec is None or spec.origin is None:
            return None
        return [argv[0], str(Path(spec.origin).resolve()), *argv[3:]]
    if argv[1].startswith("-"):
        return None
    return list(argv)


def _python_of(argv: Sequence[str], env: Mapping[str, str]) -> tuple[str, str]:
    python = argv[0] if argv and _PYTHON.match(Path(argv[0]).name) else sys.executable
    return python, env.get("PYTHONPATH", "")


def _proton_devices(env: dict[str, str], o: Mapping[str, str]) -> None:
    """Proton's queue-intercepting backends refuse HIP_VISIBLE_DEVICES on AMD (and read
    ROCR_VISIBLE_DEVICES): moved across, as upstream's wrap does, so the cell keeps its GPU."""
    if _proton_flags(o)[0] not in ("auto", "rocprofiler", "roctracer"):
        return
    names = ["HIP_VISIBLE_DEVICES"]
    if _proton_flags(o)[0] != "auto" or "HIP_VISIBLE_DEVICES" in env or "ROCR_VISIBLE_DEVICES" in env:
        names.append("CUDA_VISIBLE_DEVICES")
    present = [(n, env[n]) for n in names if n in env]
    if present:
        env.setdefault("ROCR_VISIBLE_DEVICES", present[0][1])
        for n, _ in present:
            del env[n]


def _proton_env(trial_dir: Path, o: Mapping[str, str]) -> dict[str, str]:
    backend, context, data, mode = _proton_flags(o)
    out = {"AORTA_PROTON_DIR": str(trial_dir / PROTON_DIR),
           "AORTA_PROTON_NAME": str(trial_dir / PROTON_DIR / "proton"),
           "AORTA_PROTON_CONTEXT": context, "AORTA_PROTON_DATA": data}
    if backend != "auto":
        out["AORTA_PROTON_BACKEND"] = backend
    if mode is not None:
        out["AORTA_PROTON_MODE"] = mode
    return out


def _fresh_dir(trial_dir: Path, name: str) -> None:
    """An empty output directory (a resumed trial never summarises the last attempt's files),
    through the file layer: a symlink planted there is removed, never followed."""
    with RunDirFS(trial_dir) as fs:
        if fs.lstat(name) is not None:
            fs.remove_tree(name)
        os.close(fs.make_dirs(name))


# -- after the trial --------------------------------------------------------------------------

def finish_trial(collect: Mapping[str, Mapping[str, str]], argv: Sequence[str],
                 env: Mapping[str, str], trial_dir: Path, *, mode: str, fs: RunDirFS) -> dict[str, Any]:
    """The ``collectors`` record of ``result.json`` for a finished trial. ``fs`` is the run's
    file layer: what the trial left is read through it (the trial, or whoever can write the
    run, may have swapped a file or a directory on the way for a link or a FIFO)."""
    out: dict[str, Any] = {}
    for name, options in collect.items():
        try:
            out[name] = _finish_one(name, options, argv, env, trial_dir, mode, fs)
        except Exception as exc:  # a collector never fails the trial: its record says it
            out[name] = {"status": "error", "reason": f"{type(exc).__name__}: {exc}"}
    return out


def _finish_one(name: str, options: Mapping[str, str], argv: Sequence[str],
                env: Mapping[str, str], trial_dir: Path, mode: str, fs: RunDirFS) -> dict[str, Any]:
    if name == "rocprof":
        out_dir = trial_dir / ROCPROF_DIR
        if "--" in argv and str(out_dir) in argv[:argv.index("--")]:
            return {"status": "ran", "path": ROCPROF_DIR, "metrics": rocprof_metrics(out_dir, fs)}
        _, why = rocprof_binary(env)
        return _unavailable(why or "rocprofv3 was not found when the trial started")
    if name == "proton":
        return _finish_proton(options, argv, env, trial_dir, fs)
    if name == "ncu":
        from aorta_tui.collect import ncu as ncu_collect

        binary = ncu_collect.wrapped_by(argv, trial_dir / ncu_collect.NCU_DIR)
        if binary is not None:
            return ncu_collect.finish(binary, trial_dir / ncu_collect.NCU_DIR)
        _, why = ncu_collect.ncu_binary(env)
        return _unavailable(why or "ncu was not found when the trial started")
    if name == "layer_numerics":
        if mode != "triage":
            return _unavailable("layer_numerics hooks the models of aorta-tui's torch workloads; "
                                "a probe command's process is not one of them")
        return _finish_layer_numerics(fs, trial_dir)
    if name == "torch_profiler":
        if mode != "triage":
            return _unavailable("torch_profiler runs inside aorta-tui's trial worker; a probe "
                                "command's process is not one")
        return _finish_torch_profiler(fs, trial_dir)
    return _unavailable(NOT_RUN_UPSTREAM)


def _unavailable(reason: str) -> dict[str, Any]:
    return {"status": "not available", "reason": f"not available: {reason}"}


def _finish_proton(options: Mapping[str, str], argv: Sequence[str], env: Mapping[str, str],
                   trial_dir: Path, fs: RunDirFS) -> dict[str, Any]:
    out_dir = trial_dir / PROTON_DIR
    if PROTON_MODULE in argv:
        return {"status": "ran", "path": PROTON_DIR, "metrics": proton_metrics(out_dir, fs)}
    if env.get("AORTA_PROTON_DIR") == str(out_dir):
        return {"status": "ran", "path": PROTON_DIR, "metrics": proton_metrics(out_dir, fs),
                "note": "mode: env: the program must call proton.start()/finalize() itself "
                        "(aorta-tui's workloads do not)"}
    why = proton_problem(*_python_of(argv, env))
    if why is None:
        why = ("proton (mode: cli) runs a Python script (python SCRIPT ...), not "
               f"{' '.join(argv[:3])}...; use `proton: {{mode: env}}`")
    return _unavailable(why)


def _summary(fs: RunDirFS, path: Path, kind: type[S], name: str) -> S | dict[str, Json]:
    """The summary the trial worker wrote, typed, or the collector's ``error`` record saying
    why there is none. Deliberately tolerated: a collector's problem (no summary, a damaged
    one) is that collector's ``status: error``, never the trial's failure nor the sweep's
    (exit 2 would stop a sweep whose trials ran); a damaged summary's record names the file
    and the field, where it used to read as if no summary had been written."""
    try:
        return load_summary(fs, path, kind)
    except FileNotFoundError:
        return {"status": "error", "path": path.parent.name,
                "reason": f"the trial worker wrote no {name} summary (it did not start, "
                          "or was killed before the end of the workload)"}
    except (AortaError, OSError) as exc:
        why = exc.message if isinstance(exc, AortaError) else f"{type(exc).__name__}: {exc}"
        return {"status": "error", "path": path.parent.name,
                "reason": f"the {name} summary cannot be read: {why}"}


def _finish_layer_numerics(fs: RunDirFS, trial_dir: Path) -> dict[str, Json]:
    data = _summary(fs, trial_dir / LAYER_NUMERICS_DIR / "summary_rank0.json",
                    LayerNumericsSummary, "layer_numerics")
    if isinstance(data, dict):
        return data
    metrics: dict[str, Json] = {
        "layer_numerics_records": data.records_written,
        "layer_numerics_watched": data.watched_count,
        "layer_numerics_first_bad": None if data.first_bad is None else data.first_bad.to_json()}
    rec: dict[str, Json] = {"status": "ran", "path": LAYER_NUMERICS_DIR, "metrics": metrics}
    if data.error:
        rec["note"] = f"collector error: {data.error}"
    elif not data.watched_count:
        rec["note"] = "no watched module ran (the workload builds no torch module of the watched types)"
    return rec


def _finish_torch_profiler(fs: RunDirFS, trial_dir: Path) -> dict[str, Json]:
    from aorta_tui.collect.torch_profiler import OUTPUT_SUBDIR

    data = _summary(fs, trial_dir / OUTPUT_SUBDIR / "summary_rank0.json",
                    TorchProfilerSummary, "torch_profiler")
    if isinstance(data, dict):
        return data
    if data.error and not data.metrics:
        return {"status": "error", "path": OUTPUT_SUBDIR, "reason": f"torch.profiler: {data.error}"}
    rec: dict[str, Json] = {"status": "ran", "path": OUTPUT_SUBDIR, "metrics": data.metrics}
    if data.error:
        rec["note"] = f"collector error: {data.error}"
    return rec


def _artifacts(fs: RunDirFS | None, root: Path, pattern: str) -> list[bytes]:
    """The files under ``root`` matching ``pattern``, read through descriptors, in path order.

    ``root`` is opened through the run's file layer (``fs``; without one, ``root`` is the
    layer's root), the walk opens each directory relative to its parent without following a
    link (``os.fwalk``), and each file is opened ``O_NOFOLLOW|O_NONBLOCK`` relative to its
    directory and read only when ``fstat`` says a regular file within the size limit: a link,
    a FIFO or a device swapped in after the listing is skipped, never followed or waited on."""
    try:
        if fs is None:
            with RunDirFS(root) as own:
                top = os.dup(own.fileno())
        else:
            top = fs.open_at(root, os.O_RDONLY | os.O_DIRECTORY)
    except (AortaError, OSError):
        return []
    found: list[tuple[str, bytes]] = []
    try:
        for dirpath, _dirs, files, dir_fd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
            for name in files:
                data = _read_artifact(dir_fd, name) if PurePath(name).match(pattern) else None
                if data is not None:
                    found.append((os.path.join(dirpath, name), data))
    finally:
        os.close(top)
    return [data for _path, data in sorted(found)]


def _read_artifact(dir_fd: int, name: str) -> bytes | None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ARTIFACT_BYTES:
            return None
        data = fh.read(MAX_ARTIFACT_BYTES + 1)
    return data if len(data) <= MAX_ARTIFACT_BYTES else None


def _finite(value: object) -> float | None:
    try:
        v = float(str(value).strip())
    except (TypeError, ValueError, OverflowError):
        return None
    return v if math.isfinite(v) else None


def _csv_rows(files: Iterable[bytes]) -> Iterable[dict[str, str]]:
    for data in files:
        try:
            yield from csv.DictReader(io.StringIO(data.decode("utf-8", "replace"), newline=""))
        except csv.Error:
            continue


def rocprof_metrics(out_dir: Path, fs: RunDirFS | None = None) -> dict[str, Any]:
    """Upstream's rocprof summary: stats CSVs first, the kernel trace when they give nothing."""
    ns: dict[str, float] = {}
    calls: dict[str, int] | None = {}
    for row in _csv_rows(_artifacts(fs, out_dir, "*_kernel_stats.csv")):
        name, total, n = (row.get("Name") or "").strip(), _finite(row.get("TotalDurationNs")), \
            _finite(row.get("Calls"))
        if not name or total is None or total < 0:
            continue
        ns[name] = ns.get(name, 0.0) + total
        if n is None or n < 0 or not n.is_integer():
            calls = None  # an unreadable count: no count at all, never a guessed one
        elif calls is not None:
            calls[name] = calls.get(name, 0) + int(n)
    if not ns:
        calls = {}
        for row in _csv_rows(_artifacts(fs, out_dir, "*_kernel_trace.csv")):
            kind = (row.get("Kind") or "").strip()
            name = (row.get("Kernel_Name") or "").strip()
            start, end = _finite(row.get("Start_Timestamp")), _finite(row.get("End_Timestamp"))
            if (kind and kind != "KERNEL_DISPATCH") or not name or start is None or end is None \
                    or end < start:
                continue
            ns[name] = ns.get(name, 0.0) + (end - start)
            calls[name] = calls.get(name, 0) + 1
    return kernel_summary("rocprof", {k: v / 1e6 for k, v in ns.items()}, calls)


def proton_metrics(out_dir: Path, fs: RunDirFS | None = None) -> dict[str, Any]:
    """Upstream's proton summary: leaf frames of every ``.hatchet`` profile."""
    ms: dict[str, float] = {}
    counts: dict[str, int | None] = {}
    for data in _artifacts(fs, out_dir, "*.hatchet"):
        try:
            tree = json.loads(data)
        except (ValueError, RecursionError):
            continue
        if isinstance(tree, list) and tree:
            _walk_hatchet(tree[0], ms, counts, depth=0)
    total = None if any(v is None for v in counts.values()) else counts
    return kernel_summary("proton", ms, total)


_UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def _walk_hatchet(node: object, ms: dict[str, float], counts: dict[str, int | None], depth: int) -> None:
    if not isinstance(node, dict) or depth > 200:
        return
    children = node.get("children")
    children = children if isinstance(children, list) else []
    for child in children:
        _walk_hatchet(child, ms, counts, depth + 1)
    frame, metrics = node.get("frame"), node.get("metrics")
    if children or not isinstance(frame, dict) or not isinstance(metrics, dict):
        return
    name = str(frame.get("name") or "").strip()
    t = None
    for key, value in metrics.items():
        head, _, tail = str(key).partition("(")
        factor = _UNIT_MS.get(tail.rstrip(")").strip().lower())
        v = _finite(value)
        if head.strip().lower() == "time" and factor is not None and v is not None and v >= 0:
            t = v * factor
            break
    if not name or t is None:
        return
    ms[name] = ms.get(name, 0.0) + t
    c = _finite(metrics.get("count"))
    prev = counts.get(name, 0)
    counts[name] = None if c is None or c < 0 or prev is None else prev + int(c)


def missing_tools(names: Iterable[str]) -> list[tuple[str, str]]:
    """(collector, why) for each external profiler the recipe asks for that this machine lacks:
    a real run stops on these before anything starts (exit 3) - a sweep whose every trial ran
    without the profiler it was written for is hours spent on the wrong question."""
    out: list[tuple[str, str]] = []
    for name in dict.fromkeys(names):
        if name == "rocprof":
            binary, why = rocprof_binary()
            if binary is None:
                out.append((name, why))
        elif name == "proton":
            problem = proton_problem(sys.executable)
            if problem is not None:
                out.append((name, problem))
        elif name == "ncu":
            from aorta_tui.collect.ncu import ncu_binary

            binary, why = ncu_binary()
            if binary is None:
                out.append((name, why))
        elif name == "torch_profiler":
            missing = _torch_missing()
            if missing:
                out.append((name, missing))
    return out


def _torch_missing() -> str | None:
    """Why the trial worker's Python has no torch (found without importing it)."""
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        return None
    return f"torch is not importable by {sys.executable} (pip install torch)"


def availability_notes(names: Iterable[str], *, mode: str = "triage") -> list[str]:
    """One line per collector for `recipe validate` / `--dry-run`: whether it can run here."""
    out = []
    for name in names:
        if name == "rocprof":
            binary, why = rocprof_binary()
            out.append(f"collect: rocprof runs under {binary}" if binary else
                       f"collect: rocprof not available: {why} (a real run stops with exit 3)")
        elif name == "proton":
            problem = proton_problem(sys.executable)
            out.append("collect: proton runs under triton.profiler.proton" if problem is None else
                       f"collect: proton not available: {problem} (a real run stops with exit 3)")
        elif name == "layer_numerics":
            out.append("collect: layer_numerics hooks the workload's torch modules "
                       "(<trial>/layer_numerics/)" if mode == "triage" else
                       "collect: layer_numerics not available: a probe command is not one of "
                       "aorta-tui's torch workloads (each trial records it)")
        elif name == "ncu":
            from aorta_tui.collect.ncu import ncu_binary

            binary, why = ncu_binary()
            out.append(f"collect: ncu runs under {binary}" if binary else
                       f"collect: ncu not available: {why} (a real run stops with exit 3)")
        elif name == "torch_profiler":
            missing = _torch_missing() if mode == "triage" else \
                "a probe command is not aorta-tui's trial worker (each trial records it)"
            out.append("collect: torch_profiler runs torch.profiler around the workload's steps "
                       "(<trial>/torch_profiler/)" if missing is None else
                       f"collect: torch_profiler not available: {missing}")
        else:
            out.append(f"collect: {name} not available: {NOT_RUN_UPSTREAM}")
    return out


# -- the report -------------------------------------------------------------------------------

def run_summary(run_dir: Path, trial_ids: Iterable[str]) -> dict[str, Any]:
    """Per collector: trials it ran in, and each distinct reason it did not (with a count)."""
    from aorta_tui.store.resume import read_trial_result

    out: dict[str, dict[str, Any]] = {}
    for tid in trial_ids:
        d = read_trial_result(run_dir, tid) or {}
        recs = d.get("collectors")
        recs = recs if isinstance(recs, dict) else {}
        for name, rec in recs.items():
            if not isinstance(rec, dict):
                continue
            s = out.setdefault(str(name), {"ran": 0, "not_ran": {}})
            if rec.get("status") == "ran":
                s["ran"] += 1
            else:
                why = str(rec.get("reason") or rec.get("status"))[:300]
                s["not_ran"][why] = s["not_ran"].get(why, 0) + 1
    return out


def markdown_lines(summary: Mapping[str, Any], trials: int) -> list[str]:
    if not summary:
        return []
    lines = ["", "## Collectors", ""]
    for name, s in summary.items():
        lines.append(f"- **{name}**: ran in {s['ran']}/{trials} trials")
        lines += [f"  - {n} trial{'s' if n != 1 else ''}: {why}" for why, n in s["not_ran"].items()]
    return lines


__all__ = ["cell_collect", "finish_trial", "markdown_lines", "option_problems",
           "proton_metrics", "rocprof_binary", "rocprof_metrics", "run_summary", "wrap_trial"]
