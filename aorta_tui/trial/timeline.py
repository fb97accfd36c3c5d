"""A trial's timeline: where its wall time went, on one clock.

Every mark is a ``CLOCK_MONOTONIC`` reading in nanoseconds (``time.monotonic_ns()`` on Linux),
which the orchestrator and the trial's processes share on one host. The supervisor
(:mod:`aorta_tui.trial.supervisor`) marks the fork/exec, the exit and the reap; the trial worker
(:mod:`aorta_tui.trial.worker`) marks what happens inside the child and hands its marks
back in ``workload_result.json`` (the channel the workload result already takes), except the
end of that write, which it prints as one ``aorta-mark result_written <ns>`` line on stdout
(the channel of its ``aorta-step`` lines). The orchestrator joins them into ``result.json``'s
``timeline``:

    {"clock": "CLOCK_MONOTONIC", "unit": "ns", "wall_start": <epoch s at spawn>,
     "marks": {name: ns}, "unavailable": {name: reason}, "info": {...},
     "phases": [{"name", "from", "start_ns", "end_ns", "ms"}], "beside": {...}}

``phases`` are the gaps between consecutive marks present, each named by the mark it ends at
("torch_imported: 1180 ms" = from the mark before to the end of ``import torch``), so they sum
to ``reaped - spawn``, which the process's ``wall_s`` contains. ``beside`` is what ran next to
the trial in the orchestrator: the GPU memory sampler, the hang monitor, snapshot captures.

This module imports nothing heavy: the trial worker imports it before anything else.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar, cast

from aorta_tui.core.numerals import ascii_digits

if TYPE_CHECKING:
    from importlib.abc import Loader
    from importlib.machinery import ModuleSpec
    from types import ModuleType

    from torch.overrides import TorchFunctionMode

CLOCK = "CLOCK_MONOTONIC"
MARK_PREFIX = "aorta-mark"

# Every mark, in the order it happens in a normal trial. The supervisor's: spawn, spawned,
# exited, reaped. The trial worker's: everything between.
MARKS: tuple[str, ...] = (
    "spawn",  # orchestrator: just before fork
    "spawned",  # orchestrator: exec succeeded (Popen returned)
    "interpreter_up",  # child: the trial worker's first statement
    "worker_ready",  # child: spec read, workload class loaded, config validated
    "setup_start",  # child: workload.setup() called
    "torch_import_start",
    "torch_imported",
    "device_ready",  # child: the first tensor on the workload's device (during setup)
    "workload_start",  # child: workload.run() called
    "first_step",
    "last_step",
    "workload_end",  # child: run() and cleanup() returned
    "result_write",  # child: writing workload_result.json begins
    "result_written",  # child: workload_result.json renamed into place
    "exited",  # orchestrator: the process ended (pidfd readable)
    "reaped",  # orchestrator: wait4 returned
)
SUPERVISOR_MARKS = ("spawn", "spawned", "exited", "reaped")
CHILD_MARKS = tuple(m for m in MARKS if m not in SUPERVISOR_MARKS)
# The phases the issue asks every trial to show (the others are finer steps between them).
REQUIRED = ("spawn", "spawned", "interpreter_up", "torch_imported", "device_ready",
            "workload_start", "first_step", "last_step", "result_written", "exited", "reaped")

OPAQUE_REASON = ("an opaque command (mode: probe): the supervisor sees only its fork/exec, exit "
                 "and reap; what happens inside the command is not reported to aorta-tui")


def now_ns() -> int:
    return time.monotonic_ns()


# -- the child's side ------------------------------------------------------------------------


def process_start_ns() -> int | None:
    """When this process was forked, on the monotonic clock (10 ms resolution: clock ticks).

    ``/proc/self/stat`` field 22 counts clock ticks since boot on ``CLOCK_BOOTTIME``; the
    offset to ``CLOCK_MONOTONIC`` (time suspended) is read now and taken off.
    """
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read()
        ticks = int(stat[stat.rindex(b")") + 2:].split()[19])
        hz = os.sysconf("SC_CLK_TCK")
        offset = time.clock_gettime_ns(time.CLOCK_BOOTTIME) - time.monotonic_ns()
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return ticks * 1_000_000_000 // hz - offset


class ChildMarks:
    """The marks one trial worker records. ``install_torch_hooks`` times ``import torch`` and
    the first tensor without changing what the workload does (no import of its own)."""

    def __init__(self, interpreter_up_ns: int) -> None:
        self.marks: dict[str, int] = {"interpreter_up": interpreter_up_ns}
        self.info: dict[str, Any] = {}
        self.unavailable: dict[str, str] = {}
        start = process_start_ns()
        if start is not None:
            self.info["process_start_ns"] = start
            self.info["process_start_resolution_ns"] = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
        self._finder: _TorchImportTimer | None = None
        self._first_tensor: TorchFunctionMode | None = None
        self.preloaded_reason = "torch was already imported when the trial began"

    def mark(self, name: str, at: int | None = None) -> None:
        self.marks[name] = now_ns() if at is None else at

    def mark_once(self, name: str) -> None:
        self.marks.setdefault(name, now_ns())

    # torch ------------------------------------------------------------------------------

    def install_torch_hooks(self) -> None:
        if "torch" in sys.modules:
            self.unavailable["torch_imported"] = self.preloaded_reason
            self._start_tensor_watch()
            return
        self._finder = _TorchImportTimer(self)
        sys.meta_path.insert(0, self._finder)

    def _torch_loaded(self, start: int, end: int) -> None:
        self.marks["torch_import_start"], self.marks["torch_imported"] = start, end
        self._start_tensor_watch()

    def _start_tensor_watch(self) -> None:
        try:
            self._first_tensor = _first_tensor_mode(self)
            self._first_tensor.__enter__()
        except Exception as exc:  # an old torch without modes: say so, run on
            self._first_tensor = None
            self.unavailable["device_ready"] = f"cannot watch for the first tensor: {exc}"

    def end_setup(self) -> None:
        """After ``setup``: stop watching (the mode costs a Python call per torch op)."""
        if self._finder is not None and self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        if self._first_tensor is not None:
            try:
                self._first_tensor.__exit__(None, None, None)
            except Exception as exc:  # the workload left a mode of its own on the stack
                self.info["tensor_watch_exit_error"] = str(exc)
            self._first_tensor = None

    def finish(self) -> dict[str, Any]:
        """What goes into ``workload_result.json`` (``timeline``)."""
        self.end_setup()
        why = dict(self.unavailable)
        if "torch_imported" in why:  # imported before the trial: its start was not seen either
            why.setdefault("torch_import_start", why["torch_imported"])
        if "torch_imported" not in self.marks:
            why.setdefault("torch_imported", "the workload did not import torch during the trial")
        if "device_ready" not in self.marks:
            why.setdefault("device_ready", "the workload created no torch tensor during setup")
        for name in ("first_step", "last_step"):
            if name not in self.marks:
                why.setdefault(name, "the workload reported no step")
        return {"marks": dict(self.marks), "info": dict(self.info),
                "unavailable": {k: v for k, v in why.items() if k not in self.marks}}


class _TorchImportTimer:
    """A meta-path finder that finds nothing itself: for ``torch`` it asks the finders after
    it and wraps the loader, so the import's start and end are timed; then it steps aside."""

    def __init__(self, marks: ChildMarks) -> None:
        self.marks = marks

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name != "torch":
            return None
        start = now_ns()
        sys.meta_path.remove(self)
        from importlib.util import find_spec

        spec = find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        # a proxy, not an importlib.abc.Loader subclass (whose defaults would shadow the real
        # loader's methods): everything but the two calls it times reaches the real loader
        # through __getattr__, so it is a Loader by duck typing, which mypy cannot see
        spec.loader = cast("Loader", _TimedLoader(spec.loader, start, self.marks))
        return spec


class _TimedLoader:
    def __init__(self, inner: Loader, start: int, marks: ChildMarks) -> None:
        self._inner, self._start, self._marks = inner, start, marks

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        try:
            self._inner.exec_module(module)
        finally:
            # torch sees its own loader afterwards (importlib.resources asks it for readers)
            module.__loader__ = self._inner
            if module.__spec__ is not None:
                module.__spec__.loader = self._inner
        self._marks._torch_loaded(self._start, now_ns())

    def __getattr__(self, item: str) -> Any:
        return getattr(self._inner, item)


def _first_tensor_mode(marks: ChildMarks) -> TorchFunctionMode:
    """A TorchFunctionMode that notes the first tensor a torch call returns (accelerator
    first: a CPU tensor made before the GPU one does not make the device ready)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class FirstTensor(TorchFunctionMode):
        def __torch_function__(self, func: Callable[..., object], types: Collection[type],
                               args: Sequence[object] = (),
                               kwargs: Mapping[str, object] | None = None) -> object:
            out = func(*args, **(kwargs or {}))
            if "device_ready" not in marks.marks and isinstance(out, torch.Tensor):
                device = out.device
                if device.type != "cpu" or "first_cpu_tensor_ns" not in marks.info:
                    if device.type == "cpu":
                        marks.info["first_cpu_tensor_ns"] = now_ns()
                        if not _accelerator_possible(torch):
                            marks.marks["device_ready"] = marks.info["first_cpu_tensor_ns"]
                            marks.info["device"] = "cpu"
                    else:
                        marks.marks["device_ready"] = now_ns()
                        marks.info["device"] = str(device)
            return out

    return FirstTensor()


def _accelerator_possible(torch: ModuleType) -> bool:
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def warm_torch_reason(warm: dict[str, Any]) -> str:
    """``torch_imported`` of a trial forked from a zygote that imported torch (``warm`` carries
    its ``torch_import_ns`` span): paid before the trial."""
    start, end = warm["torch_import_ns"]
    ms = (end - start) / 1e6
    if warm.get("zygote") == "own":  # the default's trial prepared ahead (trial/prepared.py)
        return (f"imported by this trial's own zygote, prepared ahead (pid {warm.get('zygote_pid')}, "
                f"{_fmt_ms(ms)}, before this trial started): trial_isolation: process")
    return (f"imported once by the warm zygote (pid {warm.get('zygote_pid')}, {_fmt_ms(ms)}, "
            "before this trial): trial_isolation: warm")


def fill_cpu_device(child: dict[str, Any]) -> None:
    """On a GPU box a workload that stays on the CPU never makes an accelerator tensor: its
    first CPU tensor is then when its device was ready."""
    marks, info = child.get("marks", {}), child.get("info", {})
    if "device_ready" not in marks and "first_cpu_tensor_ns" in info:
        marks["device_ready"] = info["first_cpu_tensor_ns"]
        info["device"] = "cpu"
        child.get("unavailable", {}).pop("device_ready", None)


def result_written_line(at: int) -> str:
    return f"{MARK_PREFIX} result_written {at}"


def read_stdout_marks(stdout: BinaryIO | None, tail_bytes: int = 64 * 1024) -> dict[str, int]:
    """The ``aorta-mark`` lines at the end of a trial's stdout (the last one of each name).

    ``stdout`` comes opened by the run's file layer (a trial's log is the trial's to swap for a
    FIFO or a link: the layer refuses both); ``None``, a log it refused, has no marks."""
    out: dict[str, int] = {}
    if stdout is None:
        return out
    try:
        size = os.fstat(stdout.fileno()).st_size
        stdout.seek(max(0, size - tail_bytes))
        text = stdout.read(tail_bytes).decode("utf-8", "replace")
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == MARK_PREFIX and parts[1] in MARKS and ascii_digits(parts[2]):
            out[parts[1]] = int(parts[2])
    return out


# -- the orchestrator's side -----------------------------------------------------------------


def build(
    supervisor: dict[str, int],
    *,
    wall_start: float | None,
    child: dict[str, Any] | None = None,
    child_missing: str | None = None,
    stdout_marks: dict[str, int] | None = None,
    beside: dict[str, Any] | None = None,
    unavailable: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One trial's ``timeline`` from the supervisor's marks and the child's report.

    A child mark outside ``[spawn, reaped]`` cannot be the trial's (another clock, a stale
    file): it is dropped and named in ``unavailable``.
    """
    marks: dict[str, int] = {k: int(v) for k, v in supervisor.items() if isinstance(v, int)}
    why: dict[str, str] = dict(unavailable or {})
    info: dict[str, Any] = {}
    lo, hi = marks.get("spawn"), marks.get("reaped")
    reported: dict[str, Any] = {}
    if child is not None:
        reported = dict(child.get("marks") or {})
        info.update(child.get("info") or {})
        why.update({k: str(v) for k, v in (child.get("unavailable") or {}).items()})
    reported.update(stdout_marks or {})
    for name, at in reported.items():
        if name not in CHILD_MARKS or not isinstance(at, int) or isinstance(at, bool):
            continue
        if lo is not None and hi is not None and not lo <= at <= hi:
            why[name] = f"reported at {at} ns, outside the process's life [{lo}, {hi}]: dropped"
            continue
        marks[name] = at
    _spawned_no_later_than_the_child(marks, info)
    if child is None and child_missing:
        for name in CHILD_MARKS:
            why.setdefault(name, child_missing)
    for name in MARKS:
        if name in marks:
            why.pop(name, None)
        elif name not in why:
            why[name] = "not recorded"
    return {
        "clock": CLOCK,
        "unit": "ns",
        "wall_start": wall_start,
        "marks": {k: marks[k] for k in MARKS if k in marks},
        "unavailable": {k: why[k] for k in MARKS if k in why},
        "info": info,
        "phases": phases(marks),
        "beside": beside or {},
    }


def _spawned_no_later_than_the_child(marks: dict[str, int], info: dict[str, Any]) -> None:
    """``spawned`` is when the supervisor saw the exec succeed (Popen returned). On a loaded box
    the child can run its first statements before the supervisor is scheduled again, so a child
    mark may come before it: the exec succeeded before the child's first mark, so that mark
    is the closer bound. ``spawned`` takes it (phases never run backwards), and what the
    supervisor saw is kept in ``info["spawned_seen_ns"]``."""
    seen = marks.get("spawned")
    first = min((marks[m] for m in CHILD_MARKS if m in marks), default=None)
    if seen is not None and first is not None and first < seen:
        marks["spawned"] = max(first, marks.get("spawn", first))
        info["spawned_seen_ns"] = seen


def phases(marks: dict[str, int]) -> list[dict[str, Any]]:
    """Consecutive gaps between the marks present, in the canonical order."""
    present = [(name, marks[name]) for name in MARKS if name in marks]
    out = []
    for (prev, start), (name, end) in zip(present, present[1:], strict=False):
        out.append({"name": name, "from": prev, "start_ns": start, "end_ns": end,
                    "ms": round((end - start) / 1e6, 3)})
    return out


def is_ordered(timeline: dict[str, Any]) -> bool:
    values = [timeline["marks"][m] for m in MARKS if m in timeline.get("marks", {})]
    return all(a <= b for a, b in zip(values, values[1:], strict=False))


def _fmt_ms(ms: float) -> str:
    return f"{ms / 1000:.2f} s" if ms >= 1000 else f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1f} ms"


def summary(timeline: dict[str, Any] | None, *, top: int = 4) -> str:
    """One line: the total and the largest phases, e.g. ``2.18 s: torch_imported 1.18 s, ...``."""
    if not isinstance(timeline, dict) or not timeline.get("phases"):
        return ""
    ph = timeline["phases"]
    total = sum(p["ms"] for p in ph)
    big = sorted(ph, key=lambda p: -p["ms"])[:top]
    return f"{_fmt_ms(total)}: " + ", ".join(f"{p['name']} {_fmt_ms(p['ms'])}" for p in big)


def timeline_lines(result: dict[str, Any]) -> list[str]:
    """The trial detail's timeline, one line per phase and per thing that ran beside it.

    ``result`` is a trial's ``result.json``. Plain text (the TUI styles it).
    """
    tl = result.get("timeline") if isinstance(result, dict) else None
    if not isinstance(tl, dict):
        return ["timeline: not recorded (a result written before aorta-tui recorded timelines)"]
    lines = [f"timeline ({tl.get('clock', CLOCK)}; {summary(tl) or 'no phases'})"]
    marks = tl.get("marks") or {}
    origin = marks.get("spawn")
    for p in tl.get("phases") or []:
        at = "" if origin is None else f"  at +{_fmt_ms((p['end_ns'] - origin) / 1e6)}"
        lines.append(f"  {p['name']:<18} {_fmt_ms(p['ms']):>9}{at}")
    for name, why in (tl.get("unavailable") or {}).items():
        lines.append(f"  {name:<18} not available: {why}")
    for what, item in (tl.get("beside") or {}).items():
        lines.append(f"  beside: {what}: {describe_beside(item)}")
    return lines


def describe_beside(item: object) -> str:
    if not isinstance(item, dict):
        return str(item)
    if not item.get("ran", True):
        return f"did not run ({item.get('reason', 'no reason given')})"
    parts = [f"{k}={v}" for k, v in item.items() if k not in ("ran", "reason")]
    return ", ".join(parts)


def cell_medians(timelines: Iterable[dict[str, Any] | None]) -> dict[str, Any]:
    """``matrix.json``: the median of each phase over a cell's trials (ms), with the count."""
    per: dict[str, list[float]] = {}
    n = 0
    for tl in timelines:
        if not isinstance(tl, dict) or not isinstance(tl.get("phases"), list):
            continue
        n += 1
        for p in tl["phases"]:
            if isinstance(p, dict) and isinstance(p.get("ms"), (int, float)):
                per.setdefault(str(p.get("name")), []).append(float(p["ms"]))
    order = {name: i for i, name in enumerate(MARKS)}
    return {
        "trials": n,
        "phase_median_ms": {k: round(statistics.median(v), 3)
                            for k, v in sorted(per.items(), key=lambda kv: order.get(kv[0], 99))},
    }


_T = TypeVar("_T")


class Stopwatch:
    """Wall and thread-CPU time spent in calls of one helper (the hang monitor's checks)."""

    def __init__(self) -> None:
        self.calls = 0
        self.wall_ns = 0
        self.cpu_ns = 0

    def time(self, fn: Callable[..., _T], *args: object) -> _T:
        w, c = time.perf_counter_ns(), time.thread_time_ns()
        try:
            return fn(*args)
        finally:
            self.calls += 1
            self.wall_ns += time.perf_counter_ns() - w
            self.cpu_ns += time.thread_time_ns() - c

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "wall_ms": round(self.wall_ns / 1e6, 3),
                "cpu_ms": round(self.cpu_ns / 1e6, 3)}
