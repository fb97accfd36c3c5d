"""Run one trial process through the engine's worker layer (``aorta_tui.core.worker``).

The child gets its complete environment at creation, its own process group (a timeout or a
cancel ends the whole tree), stdout/stderr in files. GPU memory sampling is turned off for
policy trials: it polls a vendor tool (nvidia-smi, rocm-smi) once a second, which would put
extra work on the device whose scheduling we are measuring.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from threading import Event

from aorta_tui.core.worker import ProcessSpec, run_process


@dataclass(frozen=True)
class TrialProcess:
    argv: Sequence[str]
    env: Mapping[str, str]  # the child's complete environment
    cwd: Path
    stdout_path: Path
    stderr_path: Path
    timeout_s: float | None = None


@dataclass
class TrialOutcome:
    exit_code: int | None
    signal: int | None = None
    timed_out: bool = False
    cancelled: bool = False
    exec_error: str | None = None
    wall_s: float = 0.0
    peak_rss_kb: int | None = None
    peak_rss_reason: str | None = None


def run_trial_process(spec: TrialProcess, *, cancel: Event | None = None,
                      on_start: Callable[[int], None] | None = None) -> TrialOutcome:
    out = run_process(
        ProcessSpec(argv=list(spec.argv), env=dict(spec.env), cwd=spec.cwd,
                    stdout_path=spec.stdout_path, stderr_path=spec.stderr_path,
                    timeout_s=spec.timeout_s, sample_gpu=False),
        cancel=cancel, on_start=on_start)
    return TrialOutcome(exit_code=out.exit_code, signal=out.signal, timed_out=out.timed_out,
                        cancelled=out.cancelled, exec_error=out.exec_error, wall_s=out.wall_s,
                        peak_rss_kb=out.peak_rss_kb, peak_rss_reason=out.peak_rss_reason)
