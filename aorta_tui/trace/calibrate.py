"""Per-hit uprobe cost, measured by probing cheap calls made in a tight loop.

x86-64 uprobes cost very different amounts depending on the probed function's first
instruction (a ``push`` is emulated, anything else is single-stepped), so the best reference is
a cheap function of the probed library itself (``cuDriverGetVersion`` in libcuda: it needs no
GPU context). Besides that, one libc function of each prologue class is timed with and without
a probe: ``lfind`` with zero elements and ``labs``, when their first instruction is of that class
on this machine (CET-built libcs start everything with ``endbr64``). Results are cached per
kernel, bpftrace and target set for a day.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from aorta_tui.core import spawn_gate
from aorta_tui.core.atomic import atomic_write_json
from aorta_tui.trace import elfsyms, targets
from aorta_tui.trace.launcher import ProgramSpec

CANDIDATES = {"push": ["lfind", "bsearch"], "other": ["labs", "llabs", "abs"]}
CALLS = 10000

_DRIVER = r"""
import ctypes, sys, time
n = int(sys.argv[1])
out = {}
for spec in sys.argv[2:]:
    lib_path, fn_name = spec.rsplit(":", 1)
    fn = getattr(ctypes.CDLL(lib_path), fn_name)
    if fn_name in ("lfind", "bsearch"):
        zero = ctypes.c_size_t(0)
        args = (None, None, ctypes.byref(zero), 8, None) if fn_name == "lfind" else (None, None, 0, 8, None)
    elif fn_name.endswith("GetVersion"):
        version = ctypes.c_int(0)
        args = (ctypes.byref(version),)
    else:
        args = (5,)
    best = None
    for _ in range(3):
        t = time.perf_counter_ns()
        for _ in range(n):
            fn(*args)
        dt = (time.perf_counter_ns() - t) / n
        best = dt if best is None else min(best, dt)
    out[spec] = best
print(__import__("json").dumps(out))
"""


def _cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "aorta-tui" / "trace-calibration.json"


def _pick_functions(libc: Path) -> dict[str, str]:
    table = elfsyms.functions(libc)
    chosen = {}
    for cls, names in CANDIDATES.items():
        for n in names:
            sym = table.get(n)
            if sym is not None and sym.prologue == cls:
                chosen[cls] = n
                break
    return chosen


def _time_calls(specs: list[str]) -> dict[str, float]:
    out = spawn_gate.run([sys.executable, "-c", _DRIVER, str(CALLS), *specs],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip()[-300:])
    return json.loads(out.stdout)


def calibration_program(targets_: dict[str, tuple[Path, str]], *, with_returns: bool) -> str:
    """The counting probes on each target function (and on its return, for a ``*_calls``
    set's cost), with a heartbeat; rendered by the privileged helper too, from set names."""
    if with_returns:
        probes = "".join(f"uprobe:{p}:{fn} {{ @c[{i}] = count(); }}\nuretprobe:{p}:{fn} {{ @r[{i}] = count(); }}\n"
                         for i, (p, fn) in enumerate(targets_.values()))
    else:
        probes = "".join(f"uprobe:{p}:{fn} {{ @c[{i}] = count(); }}\n" for i, (p, fn) in enumerate(targets_.values()))
    return ("BEGIN { @sent[0] = count(); }\n" + probes
            + 'interval:ms:100 { printf("@H %lld\\n", nsecs); }\nEND { clear(@sent); }\n')


def _probed_times(bpftrace: str, text: str, specs: list[str], spec: ProgramSpec) -> dict[str, float]:
    from aorta_tui.trace.runner import BpftraceRunner

    runner = BpftraceRunner(text, bpftrace=bpftrace, on_lines=lambda lines: None, spec=spec)
    runner.start()
    try:
        runner.wait_attached(30)
        return _time_calls(specs)
    finally:
        runner.cleanup()


def calibration_targets(extra: dict[str, tuple[Path, str]], reasons: dict[str, str],
                        ) -> dict[str, tuple[Path, str]]:
    """name -> (library, function) to time: a libc function of each prologue class, then each
    ``extra`` one found in its library; what cannot be timed goes to ``reasons``."""
    targets_: dict[str, tuple[Path, str]] = {}
    libc, how = targets.resolve_library(["libc.so.6"])
    if libc is None:
        reasons["push"] = reasons["other"] = f"libc not found: {how}"
    else:
        chosen = _pick_functions(libc)
        for cls in CANDIDATES:
            if cls in chosen:
                targets_[cls] = (libc, chosen[cls])
            else:
                reasons[cls] = f"no libc function with a {cls!r} first instruction here"
    for name, (path, fn) in extra.items():
        try:
            sym = elfsyms.functions(path).get(fn)
        except elfsyms.ElfError as exc:
            sym = None
            reasons[name] = str(exc)
        if sym is not None:
            targets_[name] = (Path(path), fn)
        else:
            reasons.setdefault(name, f"{fn} not in {path}")
    return targets_


def calibrate(bpftrace: str, *, extra: dict[str, tuple[Path, str]] | None = None,
              use_cache: bool = True, maps_pid: int | None = None) -> dict[str, Any]:
    """Per-hit cost in ns by target: ``push``/``other`` (libc) and each ``extra`` name
    (e.g. ``{"cuda": (libcuda_path, "cuDriverGetVersion")}``); None with a reason where not
    measured. ``maps_pid``: the traced --pid, whose maps the privileged helper finds the sets'
    libraries in (under sudo it renders the calibration program itself, from the set names)."""
    extra = dict(extra or {})
    key = f"{platform.release()}|{bpftrace}|" + "|".join(f"{k}={p}:{f}" for k, (p, f) in sorted(extra.items()))
    cache = _cache_file()
    if use_cache:
        try:
            data = json.loads(cache.read_text())
            if data.get("key") == key and time.time() - data.get("at", 0) < 86400:
                return data["result"]
        except (OSError, ValueError, KeyError):
            pass
    result: dict[str, Any] = {"push": None, "other": None, "reasons": {}, "functions": {},
                              "method": f"{CALLS} ctypes calls of a cheap function, best of 3, "
                                        "with minus without a counting uprobe on it"}
    targets_ = calibration_targets(extra, result["reasons"])
    for name in extra:
        if name in targets_:
            result[name] = None
    if not targets_:
        return result
    specs = {name: f"{p}:{fn}" for name, (p, fn) in targets_.items()}
    pairs = {name: specs[name] for name in extra if name in targets_}
    try:
        base = _time_calls(list(specs.values()))
        sets = tuple(extra)
        probed = _probed_times(bpftrace, calibration_program(targets_, with_returns=False), list(specs.values()),
                               ProgramSpec(sets=sets, mode="events", maps_pid=maps_pid, calibration="entry"))
        returns = {}
        if pairs:
            # the same functions with a return probe too: what a *_calls probe set pays per call
            both = calibration_program({n: targets_[n] for n in pairs}, with_returns=True)
            returns = _probed_times(bpftrace, both, list(pairs.values()),
                                    ProgramSpec(sets=sets, mode="events", maps_pid=maps_pid,
                                                calibration="return"))
    except Exception as exc:  # calibration is advisory: say why it is missing
        for name in targets_:
            result["reasons"][name] = f"calibration failed: {exc}"
        return result
    for name, spec in specs.items():
        result[name] = _difference(result, name, probed[spec], base[spec])
        result["functions"][name] = spec
    for name, spec in pairs.items():
        result[f"{name}+ret"] = _difference(result, f"{name}+ret", returns[spec], base[spec])
    with contextlib.suppress(OSError):  # the cache only saves time; a read-only home is fine
        atomic_write_json(cache, {"key": key, "at": time.time(), "result": result}, indent=None)
    return result


def _difference(result: dict[str, Any], name: str, probed: float, base: float) -> float | None:
    """Probed minus unprobed ns per call; None with a reason when noise hides the probe (a
    cost of 0.0 would claim the probe is free)."""
    if probed > base:
        return probed - base
    result["reasons"][name] = (f"not resolved: {probed:.0f} ns per call with the probe, {base:.0f} ns "
                               "without (timing noise larger than the probe cost)")
    return None
