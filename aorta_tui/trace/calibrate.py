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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aorta_tui.core import spawn_gate
from aorta_tui.core.atomic import atomic_write_json
from aorta_tui.core.errors import AortaError
from aorta_tui.core.inputs import INPUT_LIMITS, FieldReader, Json, load_json_input
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


@dataclass(frozen=True)
class Calibration:
    """The per-hit cost of a counting uprobe in ns, by target: ``push``/``other`` (libc's
    prologue classes) and, in ``costs``, each probe set's own function (``cuda``) and with a
    return probe too (``cuda+ret``); None with a reason (``reasons``) where not measured. It
    goes into the trace result's ``calibration`` as :meth:`to_json` writes it."""

    method: str  # how it was measured, said in the result beside each cost
    push: float | None = None
    other: float | None = None
    reasons: dict[str, str] = field(default_factory=dict)  # target -> why its cost is None
    functions: dict[str, str] = field(default_factory=dict)  # target -> "LIBRARY:FUNCTION"
    costs: dict[str, float | None] = field(default_factory=dict)  # a set's, in measuring order

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    def cost(self, target: str) -> float | None:
        """``target``'s cost: ``push``, ``other``, a set's name or ``NAME+ret``."""
        if target in ("push", "other"):
            return self.push if target == "push" else self.other
        return self.costs.get(target)

    def to_json(self) -> dict[str, Json]:
        """The object the untyped calibration was, key order included: every key past
        ``method`` is a cost (a set's name: the writer had no other)."""
        return {"push": self.push, "other": self.other, "reasons": dict(self.reasons),
                "functions": dict(self.functions), "method": self.method, **self.costs}

    @classmethod
    def from_dict(cls, data: object, *, where: str, path: str = "") -> Calibration:
        """A parsed calibration; a damaged one is a located UsageError (exit 2)."""
        f = FieldReader(where, CACHE_WHAT)
        d = f.obj(data, path or "(top level)")
        reasons = f.obj_at(d, "reasons", path, required=True)
        functions = f.obj_at(d, "functions", path, required=True)
        return cls(
            method=f.text(d, "method", path, required=True),
            push=_cost(f, d, "push", path), other=_cost(f, d, "other", path),
            reasons={k: f.text(reasons, k, f.join(path, "reasons")) for k in reasons},
            functions={k: f.text(functions, k, f.join(path, "functions")) for k in functions},
            costs={k: _cost(f, d, k, path) for k in d if k not in _KNOWN})


@dataclass(frozen=True)
class CalibrationCache:
    """``~/.cache/aorta-tui/trace-calibration.json``: the last calibration and what it was
    measured for (``key``: the kernel, bpftrace and targets), at ``at`` (time.time())."""

    key: str
    at: float
    result: Calibration
    extra: dict[str, Json] = field(default_factory=dict)  # a newer writer's keys

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    def to_json(self) -> dict[str, Json]:
        return {"key": self.key, "at": self.at, "result": self.result.to_json(), **self.extra}

    @classmethod
    def from_dict(cls, data: object, *, where: str) -> CalibrationCache:
        f = FieldReader(where, CACHE_WHAT)
        d = f.obj(data, "(top level)")
        if "result" not in d:
            f.obj_at(d, "result", "", required=True)  # says "result: missing", located
        return cls(key=f.text(d, "key", "", required=True),
                   at=f.number(d, "at", "", required=True),
                   result=Calibration.from_dict(d["result"], where=where, path="result"),
                   extra={k: v for k, v in d.items() if k not in ("key", "at", "result")})


CACHE_WHAT = "calibration cache"
_KNOWN = frozenset(Calibration(method="").to_json())


def _cost(f: FieldReader, d: dict[str, Any], key: str, path: str) -> float | None:
    """A cost: a finite number, or null (not measured); the writer writes every one."""
    if key not in d:
        f.obj_at(d, key, path, required=True)  # says "KEY: missing", located
    return f.opt_number(d[key], f.join(path, key))


def read_calibration_cache(path: Path) -> CalibrationCache:
    """The cache at ``path``, typed and bounded; a damaged one is a located UsageError."""
    data = load_json_input(path, what=CACHE_WHAT, limit=INPUT_LIMITS[CACHE_WHAT])
    return CalibrationCache.from_dict(data, where=str(path))


def _cached(cache: Path, key: str) -> Calibration | None:
    """The cached calibration for ``key`` when it is less than a day old. Deliberately
    tolerant: a missing, unreadable or damaged cache is no cache (the calibration is measured
    again and the cache rewritten): it only saves time, so it must never stop a trace."""
    try:
        cached = read_calibration_cache(cache)
    except (AortaError, OSError):
        return None
    if cached.key == key and time.time() - cached.at < 86400:
        return cached.result
    return None


def calibrate(bpftrace: str, *, extra: dict[str, tuple[Path, str]] | None = None,
              use_cache: bool = True, maps_pid: int | None = None) -> Calibration:
    """Per-hit cost in ns by target: ``push``/``other`` (libc) and each ``extra`` name
    (e.g. ``{"cuda": (libcuda_path, "cuDriverGetVersion")}``); None with a reason where not
    measured. ``maps_pid``: the traced --pid, whose maps the privileged helper finds the sets'
    libraries in (under sudo it renders the calibration program itself, from the set names)."""
    extra = dict(extra or {})
    key = f"{platform.release()}|{bpftrace}|" + "|".join(f"{k}={p}:{f}" for k, (p, f) in sorted(extra.items()))
    cache = _cache_file()
    if use_cache:
        hit = _cached(cache, key)
        if hit is not None:
            return hit
    method = f"{CALLS} ctypes calls of a cheap function, best of 3, with minus without a counting uprobe on it"
    reasons: dict[str, str] = {}
    targets_ = calibration_targets(extra, reasons)
    # the sets' costs in the order the untyped result held them: each set, then its +ret
    costs: dict[str, float | None] = {name: None for name in extra if name in targets_}
    if not targets_:
        return Calibration(method=method, reasons=reasons, costs=costs)
    specs = {name: f"{p}:{fn}" for name, (p, fn) in targets_.items()}
    pairs = {name: specs[name] for name in extra if name in targets_}
    try:
        base, probed, returns = _measure(bpftrace, targets_, specs, pairs, tuple(extra), maps_pid)
    except Exception as exc:  # calibration is advisory: say why it is missing
        for name in targets_:
            reasons[name] = f"calibration failed: {exc}"
        return Calibration(method=method, reasons=reasons, costs=costs)
    measured: dict[str, float | None] = {"push": None, "other": None}
    functions: dict[str, str] = {}
    for name, spec in specs.items():
        (measured if name in measured else costs)[name] = _difference(reasons, name, probed[spec], base[spec])
        functions[name] = spec
    for name, spec in pairs.items():
        costs[f"{name}+ret"] = _difference(reasons, f"{name}+ret", returns[spec], base[spec])
    result = Calibration(method=method, push=measured["push"], other=measured["other"],
                         reasons=reasons, functions=functions, costs=costs)
    with contextlib.suppress(OSError):  # the cache only saves time; a read-only home is fine
        atomic_write_json(cache, CalibrationCache(key=key, at=time.time(), result=result).to_json(),
                          indent=None)
    return result


def _measure(bpftrace: str, targets_: dict[str, tuple[Path, str]], specs: dict[str, str],
             pairs: dict[str, str], sets: tuple[str, ...], maps_pid: int | None,
             ) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """(unprobed, probed, probed with return probes) ns per call, by "LIBRARY:FUNCTION"."""
    base = _time_calls(list(specs.values()))
    probed = _probed_times(bpftrace, calibration_program(targets_, with_returns=False), list(specs.values()),
                           ProgramSpec(sets=sets, mode="events", maps_pid=maps_pid, calibration="entry"))
    returns: dict[str, float] = {}
    if pairs:
        # the same functions with a return probe too: what a *_calls probe set pays per call
        both = calibration_program({n: targets_[n] for n in pairs}, with_returns=True)
        returns = _probed_times(bpftrace, both, list(pairs.values()),
                                ProgramSpec(sets=sets, mode="events", maps_pid=maps_pid,
                                            calibration="return"))
    return base, probed, returns


def _difference(reasons: dict[str, str], name: str, probed: float, base: float) -> float | None:
    """Probed minus unprobed ns per call; None with a reason when noise hides the probe (a
    cost of 0.0 would claim the probe is free)."""
    if probed > base:
        return probed - base
    reasons[name] = (f"not resolved: {probed:.0f} ns per call with the probe, {base:.0f} ns "
                     "without (timing noise larger than the probe cost)")
    return None
