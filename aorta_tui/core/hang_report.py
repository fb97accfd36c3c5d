"""Tier 2's report of a hang, as a value every layer can hold: the hang monitor
(``trial/hang.py``) makes it, the classifier reads it through ``classify/model.Outcome``, and
result.json's ``process.hang`` (``core/process_record.ProcessRecord.hang``) holds it, so the
trial detail says it in words (:meth:`HangReport.summary`) instead of printing a dict.

Here in ``core`` with the names of its three signals, the tier-2 detector ids, because the
process record is core's and core imports nothing above it; ``classify/model.py`` names them for
the classifier from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aorta_tui.core.inputs import FieldReader

# Tier 2's detector ids: the hang monitor's signals.
OUTPUT_SILENCE = "output_silence"
GPU_IDLE = "gpu_idle"
IO_IDLE = "io_idle"
SIGNAL_NAMES: tuple[str, ...] = (OUTPUT_SILENCE, GPU_IDLE, IO_IDLE)


@dataclass(frozen=True)
class HangReport:
    """Why tier 2 fired. ``signals[name]`` is how long the signal had held (after the grace
    period) when the monitor decided, or ``None`` when it was not holding; ``unavailable``
    names the signals that could not be measured or were disabled, with the reason."""

    signals: dict[str, float | None]
    unavailable: dict[str, str] = field(default_factory=dict)
    window_s: float = 0.0
    grace_s: float = 0.0
    elapsed_s: float = 0.0
    cpu_s_in_window: float | None = None
    # what io_idle summed when supervisors were left out, e.g. "2 worker process(es), not the
    # launcher (torch.distributed.run pid 4242)"; None when the whole tree counted
    io_scope: str | None = None

    def held(self) -> list[str]:
        return [n for n, v in self.signals.items() if v is not None and v >= self.window_s]

    def summary(self) -> str:
        held = ", ".join(f"{n.replace('_', ' ')} {self.signals[n]:.1f} s" for n in self.held())
        text = f"hang after {self.elapsed_s:.1f} s: {held}"
        if self.unavailable:
            text += "; " + "; ".join(f"{n} not available ({r})" for n, r in self.unavailable.items())
        if self.io_scope is not None and IO_IDLE in self.held():
            text += f"; io counted over {self.io_scope}"
        if self.cpu_s_in_window is not None:
            text += f"; tree used {self.cpu_s_in_window:.1f} CPU s in the last window"
        return text

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HangReport:
        return cls(
            signals=dict(data.get("signals", {})),
            unavailable=dict(data.get("unavailable", {})),
            window_s=float(data.get("window_s", 0.0)),
            grace_s=float(data.get("grace_s", 0.0)),
            elapsed_s=float(data.get("elapsed_s", 0.0)),
            cpu_s_in_window=data.get("cpu_s_in_window"),
            io_scope=data.get("io_scope"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "signals": dict(self.signals),
            "unavailable": dict(self.unavailable),
            "window_s": self.window_s,
            "grace_s": self.grace_s,
            "elapsed_s": self.elapsed_s,
            "cpu_s_in_window": self.cpu_s_in_window,
            "io_scope": self.io_scope,
        }


def read_hang_report(f: FieldReader, d: dict[str, Any], path: str) -> HangReport:
    """A :class:`HangReport` (``HangReport.to_dict``'s object) at ``path``, checked."""
    # kept as written (an int stays an int), so the file reads back to its own bytes; a key
    # missing has HangReport.from_dict's default
    return HangReport(
        signals={k: f.opt_number(v, f"{path}.signals.{k}")
                 for k, v in f.obj_at(d, "signals", path).items()},
        unavailable={k: str(f.check(v, "string", f"{path}.unavailable.{k}"))
                     for k, v in f.obj_at(d, "unavailable", path).items()},
        window_s=f.number(d, "window_s", path, 0.0), grace_s=f.number(d, "grace_s", path, 0.0),
        elapsed_s=f.number(d, "elapsed_s", path, 0.0),
        cpu_s_in_window=f.number(d, "cpu_s_in_window", path),
        io_scope=f.opt_text(d, "io_scope", path))
