"""Run one trial process: the engine's worker layer when present, else a small local twin.

The engine's ``aorta_tui.core.worker`` (``ProcessSpec`` / ``run_process``) is preferred; this
module's fallback has the same shape so the evaluator does not care which one it gets: the
child's complete environment is given at creation, it runs in its own process group (a
timeout or a cancel kills the whole tree), stdout/stderr go to files.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from threading import Event
from typing import Any


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
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.exec_error


def run_trial_process(spec: TrialProcess, *, cancel: Event | None = None,
                      on_start: Callable[[int], None] | None = None) -> TrialOutcome:
    try:
        from aorta_tui.core import worker  # type: ignore[attr-defined]
    except ImportError:
        return _run_local(spec, cancel=cancel, on_start=on_start)
    return _run_engine(worker, spec, cancel=cancel, on_start=on_start)


def _run_engine(worker: Any, spec: TrialProcess, *, cancel: Event | None,
                on_start: Callable[[int], None] | None) -> TrialOutcome:
    pspec = worker.ProcessSpec(argv=list(spec.argv), env=dict(spec.env), cwd=spec.cwd,
                               stdout_path=spec.stdout_path, stderr_path=spec.stderr_path,
                               timeout_s=spec.timeout_s)
    out = worker.run_process(pspec, cancel=cancel or Event(), on_start=on_start)
    return TrialOutcome(
        exit_code=getattr(out, "exit_code", None),
        signal=getattr(out, "signal", None),
        timed_out=bool(getattr(out, "timed_out", False)),
        cancelled=bool(getattr(out, "cancelled", False)) or bool(cancel and cancel.is_set()),
        exec_error=getattr(out, "exec_error", None),
        wall_s=float(getattr(out, "wall_s", 0.0) or 0.0),
        peak_rss_kb=getattr(out, "peak_rss_kb", None),
    )


def _run_local(spec: TrialProcess, *, cancel: Event | None,
               on_start: Callable[[int], None] | None) -> TrialOutcome:
    spec.stdout_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(spec.stdout_path, "wb") as out, open(spec.stderr_path, "wb") as err:
        try:
            proc = subprocess.Popen(list(spec.argv), env=dict(spec.env), cwd=spec.cwd,
                                    stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError as exc:
            return TrialOutcome(exit_code=None, exec_error=f"{spec.argv[0]}: {exc.strerror}")
        if on_start:
            on_start(proc.pid)
        timed_out = cancelled = False
        try:
            while True:
                try:
                    proc.wait(timeout=0.05)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if cancel is not None and cancel.is_set():
                    cancelled = True
                    _kill_group(proc)
                    break
                if spec.timeout_s is not None and time.monotonic() - start > spec.timeout_s:
                    timed_out = True
                    _kill_group(proc)
                    break
        except BaseException:
            _kill_group(proc)  # the orchestrator is going away: take the trial with it
            raise
    wall = time.monotonic() - start
    code = proc.returncode
    return TrialOutcome(
        exit_code=code if code is not None and code >= 0 else None,
        signal=-code if code is not None and code < 0 else None,
        timed_out=timed_out, cancelled=cancelled, wall_s=wall,
        peak_rss_kb=None,  # RUSAGE_CHILDREN is a max over all children: not this one's
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    except ProcessLookupError:
        pass
