"""What every probe set provides: metrics it emits, a detector, and template blocks to render."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TypeVar

from aorta_tui.core.errors import UsageError
from aorta_tui.trace import elfsyms, targets, tracefs
from aorta_tui.trace.metrics import Metric

_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def ident(name: str) -> str:
    """A C identifier (symbol, tracepoint field); anything else is refused."""
    if not _IDENT_RE.match(name):
        raise UsageError(f"{name!r} is not a valid identifier for a probe")
    return name



@dataclass
class ProbeContext:
    """What detection may look at: tracefs, the target pid, libraries given by the user."""

    tracefs: Path | None
    pid: int | None = None
    library_paths: dict[str, Path] = field(default_factory=dict)
    kprobes: bool = False
    kprobes_reason: str = ""


@dataclass
class Instance:
    """One template block to render, with its (validated by program.py) parameters."""

    block: str
    params: dict[str, str]


@dataclass
class ProbeDetection:
    probe_set: str
    available: bool
    instances: list[Instance] = field(default_factory=list)
    found: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    reason: str = ""
    fix: str = ""
    library: str | None = None
    library_how: str = ""
    prologues: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "available": self.available,
            "found": self.found,
            "missing": self.missing,
            "reason": self.reason or None,
            "fix": self.fix or None,
            "library": self.library,
            "library_found_by": self.library_how or None,
            "uprobe_prologues": self.prologues or None,
            "notes": self.notes,
        }


class ProbeSet:
    name: str = ""
    description: str = ""
    template: str = ""
    metrics: tuple[Metric, ...] = ()
    # metrics joined from a device-side collector (CUPTI), present only when it can be loaded
    device_metrics: tuple[Metric, ...] = ()
    # a cheap, side-effect-free function of the probed library, timed to calibrate the per-hit
    # uprobe cost on this very library (None: calibrate on libc functions of the same prologue)
    calibration_function: str | None = None

    def detect(self, ctx: ProbeContext) -> ProbeDetection:  # pragma: no cover - abstract
        raise NotImplementedError

    def template_text(self) -> str:
        return resources.files("aorta_tui.trace.probes").joinpath(self.template).read_text()

    def metric(self, name: str) -> Metric:
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(name)


# -- helpers shared by detectors ----------------------------------------------------------------

_Spec = TypeVar("_Spec")

def tracefs_missing(name: str) -> ProbeDetection:
    return ProbeDetection(
        probe_set=name,
        available=False,
        reason="tracefs is not mounted, so no tracepoint can be checked or attached",
        fix=tracefs.MOUNT_COMMAND,
    )


def uprobe_symbols(
    set_name: str,
    lib_key: str,
    patterns: list[str],
    ctx: ProbeContext,
    wanted: list[str],
) -> tuple[ProbeDetection, list[elfsyms.FunctionSymbol]]:
    """Resolve the library and the wanted symbols; the detection is unavailable when none exist."""
    path, how = targets.resolve_library(
        patterns, pid=ctx.pid, explicit=ctx.library_paths.get(lib_key)
    )
    det = ProbeDetection(probe_set=set_name, available=False, library_how=how)
    if path is None:
        det.reason = how
        det.fix = (
            f"install the runtime that provides {patterns[0]}, attach to a process that maps it "
            f"(--pid), or point at the library with --lib {lib_key}=/path/to/{patterns[0].rstrip('*')}"
        )
        det.missing = list(wanted)
        return det, []
    det.library = str(path)
    try:
        syms, missing = elfsyms.pick_unique(path, wanted)
    except elfsyms.ElfError as exc:
        det.reason = str(exc)
        det.fix = f"point --lib {lib_key}= at the real shared library"
        return det, []
    det.found = [s.name for s in syms]
    det.missing = missing
    det.prologues = {s.name: s.prologue for s in syms}
    return det, syms


def add_symbol_instances(
    det: ProbeDetection,
    block: str,
    table: Mapping[str, _Spec],
    names: Iterable[str],
    params: Callable[[_Spec], dict[str, str]],
) -> list[str]:
    """One ``block`` instance per name found in ``table``; ``kind`` is the name's index in the
    table (the record's aux), so the order of the table is the decoding key. Returns the names."""
    order = list(table)
    added = [n for n in names if n in table]
    for n in added:
        det.instances.append(Instance(block, {"lib": str(det.library), "symbol": n,
                                              **params(table[n]), "kind": str(order.index(n))}))
    return added
