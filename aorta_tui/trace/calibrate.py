"""Per-hit uprobe cost, measured by probing no-op libc calls made in a tight loop.

x86-64 uprobes cost very different amounts depending on the probed function's first
instruction (a ``push`` is emulated, anything else is single-stepped), so one function of each
kind is timed with and without a probe: ``lfind`` with zero elements (push) and ``labs``
(not push). The result is cached per kernel and bpftrace binary for a day.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from aorta_tui.trace import elfsyms, targets

CANDIDATES = {"push": ["lfind", "bsearch"], "other": ["labs", "llabs", "abs"]}
CALLS = 20000

_DRIVER = r"""
import ctypes, sys, time
libc = ctypes.CDLL(sys.argv[1])
n = int(sys.argv[2])
out = {}
for fn_name in sys.argv[3:]:
    fn = getattr(libc, fn_name)
    if fn_name in ("lfind", "bsearch"):
        zero = ctypes.c_size_t(0)
        args = (None, None, ctypes.byref(zero), 8, None) if fn_name == "lfind" else (None, None, 0, 8, None)
    else:
        args = (5,)
    best = None
    for _ in range(5):
        t = time.perf_counter_ns()
        for _ in range(n):
            fn(*args)
        dt = (time.perf_counter_ns() - t) / n
        best = dt if best is None else min(best, dt)
    out[fn_name] = best
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


def _time_calls(libc: Path, names: list[str]) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", _DRIVER, str(libc), str(CALLS), *names],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip()[-300:])
    return json.loads(out.stdout)


def calibrate(bpftrace: str, *, use_cache: bool = True) -> dict[str, Any]:
    """``{"push": ns|None, "other": ns|None, "method": ..., "reasons": {...}}`` per probe hit."""
    key = f"{platform.release()}|{bpftrace}"
    cache = _cache_file()
    if use_cache:
        try:
            data = json.loads(cache.read_text())
            if data.get("key") == key and time.time() - data.get("at", 0) < 86400:
                return data["result"]
        except (OSError, ValueError, KeyError):
            pass
    from aorta_tui.trace.runner import BpftraceRunner

    libc, how = targets.resolve_library(["libc.so.6"])
    result: dict[str, Any] = {"push": None, "other": None, "reasons": {},
                              "method": f"{CALLS} ctypes calls of a no-op libc function, best of 5, "
                                        "with minus without a counting uprobe"}
    if libc is None:
        result["reasons"]["all"] = f"libc not found: {how}"
        return result
    chosen = _pick_functions(libc)
    for cls in CANDIDATES:
        if cls not in chosen:
            result["reasons"][cls] = f"no libc function with a {cls!r} first instruction to probe"
    if not chosen:
        return result
    try:
        base = _time_calls(libc, list(chosen.values()))
        text = "BEGIN { @sent[0] = count(); }\n" + "".join(
            f"uprobe:{libc}:{fn} {{ @c[{i}] = count(); }}\n" for i, fn in enumerate(chosen.values()))
        text += 'interval:ms:100 { printf("@H %lld\\n", nsecs); }\nEND { clear(@c); clear(@sent); }\n'
        runner = BpftraceRunner(text, bpftrace=bpftrace, on_lines=lambda lines: None)
        runner.start()
        try:
            runner.wait_attached(30)
            probed = _time_calls(libc, list(chosen.values()))
        finally:
            runner.cleanup()
    except Exception as exc:  # calibration is advisory: say why it is missing
        result["reasons"]["all"] = f"calibration failed: {exc}"
        return result
    for cls, fn in chosen.items():
        result[cls] = max(0.0, probed[fn] - base[fn])
        result.setdefault("functions", {})[cls] = fn
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"key": key, "at": time.time(), "result": result}))
    except OSError:
        pass
    return result
