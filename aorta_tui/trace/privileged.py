"""The helper's tracing verbs (root side): catalogue programs and tracefs reads, nothing more.

``trace_start`` takes probe-set names (members of the catalogue), a pid that must exist and
bounded numbers, detects the sets on this machine as root (tracefs, ``/proc/PID/maps``, the
loader cache: never a path from the unprivileged side), renders the program with
:func:`aorta_tui.trace.program.render` into a directory of its own (mode 0700, outside every
run directory), starts bpftrace and returns the read end of its stdout. ``trace_poll`` and
``trace_stop`` act on the traces it started, by the number it gave them. The tracefs verbs
read a format file by group and event name (identifiers), a fixed list of top-level files, and
the mount point. ``shutdown`` stops every bpftrace left running.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_tui.core.errors import AortaError
from aorta_tui.privsep import protocol as P
from aorta_tui.privsep.helper import Result, Verb, VerbFamily
from aorta_tui.trace import capability, program, tracefs
from aorta_tui.trace.launcher import bpftrace_argv, spawn_bpftrace

if TYPE_CHECKING:  # the probe catalogue is imported where a verb needs it
    from aorta_tui.trace.probes import ProbeContext

PID_MAX = 1 << 22  # /proc/sys/kernel/pid_max's ceiling
STDERR_MAX = 64 << 10
TRACEFS_FILES = ("available_events", "kprobe_events", "uprobe_events")
MAX_TRACES = 8
CALIBRATIONS = ("", "entry", "return")


def _catalogue() -> tuple[str, ...]:
    from aorta_tui.trace import probes

    return tuple(probes.CATALOGUE)


SET_NAMES = P.OneOf(_catalogue)
START_ARGS: dict[str, P.Check] = {
    "sets": P.ListOf(SET_NAMES),
    "mode": P.OneOf(program.MODES),
    "pid": P.Int(1, PID_MAX, optional=True),
    "maps_pid": P.Int(1, PID_MAX, optional=True),
    "heartbeat_ms": P.Int(10, 10_000),
    "interval_s": P.Float(0.05, 3600.0),
    "collector_launch_sets": P.ListOf(SET_NAMES),
    "json_output": P.Bool(),
    "block_buffered": P.Bool(),
    "perf_rb_pages": P.Int(1, 4096, optional=True),
    "calibration": P.OneOf(CALIBRATIONS),
}


@dataclass
class _Trace:
    proc: subprocess.Popen[bytes]
    workdir: Path


def _pid_owner_note(pid: int) -> str | None:
    """Whose process ``pid`` is, when it is not the invoking user's: the reason it is traced
    by the helper (root) and not by the user's tool."""
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        raise P.ProtocolError(P.REFUSED, f"no process with pid {pid}") from None
    sudo_uid = os.environ.get("SUDO_UID")
    if sudo_uid is not None and str(uid) == sudo_uid:
        return None
    try:
        owner = pwd.getpwuid(uid).pw_name
    except KeyError:
        owner = f"uid {uid}"
    return (f"pid {pid} belongs to {owner}, not to you: the privileged helper (root, started by "
            "sudo) attaches the probes to it; the tool itself runs as you and cannot read it")


class Traces:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._traces: dict[int, _Trace] = {}
        self._next = 1

    def start(self, args: dict[str, Any]) -> Result:
        if not args["sets"] and not args["calibration"]:
            raise P.ProtocolError(P.BAD_ARGUMENT, "sets names no probe set")
        if not set(args["collector_launch_sets"]) <= set(args["sets"]):
            raise P.ProtocolError(P.BAD_ARGUMENT, "collector_launch_sets must be among sets")
        notes = [n for n in {_pid_owner_note(p) for p in (args["pid"], args["maps_pid"]) if p} if n]
        with self._lock:
            if len(self._traces) >= MAX_TRACES:
                raise P.ProtocolError(P.REFUSED, f"{MAX_TRACES} traces are running already")
        text = _render(args)
        workdir = Path(tempfile.mkdtemp(prefix="aorta-helper-trace-"))  # 0700, root's
        try:
            proc = _spawn(text, workdir, args)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        assert proc.stdout is not None
        fd = os.dup(proc.stdout.fileno())
        proc.stdout.close()  # the client holds the only read end: EOF reaches it when bpftrace ends
        with self._lock:
            trace_id, self._next = self._next, self._next + 1
            self._traces[trace_id] = _Trace(proc, workdir)
        return {"id": trace_id, "pid": proc.pid, "notes": notes}, (fd,)

    def _get(self, trace_id: int) -> _Trace:
        with self._lock:
            trace = self._traces.get(trace_id)
        if trace is None:
            raise P.ProtocolError(P.REFUSED, f"no trace {trace_id} was started by this helper")
        return trace

    def poll(self, args: dict[str, Any]) -> Result:
        trace = self._get(args["id"])
        rc = trace.proc.poll()
        return {"running": rc is None, "returncode": rc}, ()

    def stop(self, args: dict[str, Any]) -> Result:
        with self._lock:
            trace = self._traces.pop(args["id"], None)
        if trace is None:
            raise P.ProtocolError(P.REFUSED, f"no trace {args['id']} was started by this helper")
        rc = _stop_proc(trace.proc, args["grace_s"])
        try:
            with open(trace.workdir / "stderr", "rb") as fh:
                err = fh.read(STDERR_MAX).decode("utf-8", "replace")
        except OSError:
            err = ""
        shutil.rmtree(trace.workdir, ignore_errors=True)
        return {"returncode": rc, "stderr": err}, ()

    def shutdown(self) -> None:
        with self._lock:
            ids = list(self._traces)
        for trace_id in ids:
            self.stop({"id": trace_id, "grace_s": 1.0})


def _context(args: dict[str, Any]) -> ProbeContext:
    from aorta_tui.trace import probes

    root = tracefs.find_tracefs()
    kp, kp_reason = tracefs.kprobes_supported(root)
    return probes.ProbeContext(tracefs=root, pid=args["maps_pid"], kprobes=kp, kprobes_reason=kp_reason)


def _render_calibration(args: dict[str, Any]) -> str:
    """The calibration's counting probes: libc's functions of each prologue class and each
    set's own calibration function in the library the helper's detection finds."""
    from aorta_tui.trace import probes
    from aorta_tui.trace.calibrate import calibration_program, calibration_targets

    ctx, extra = _context(args), {}
    for name in args["sets"]:
        ps = probes.get(name)
        det = ps.detect(ctx)
        if ps.calibration_function and det.library:
            extra[name] = (Path(det.library), ps.calibration_function)
    targets_ = calibration_targets(extra, {})
    if args["calibration"] == "return":
        targets_ = {n: targets_[n] for n in extra if n in targets_}
    if not targets_:
        raise P.ProtocolError(P.FAILED, "nothing to calibrate here: no libc function and no set library found")
    return calibration_program(targets_, with_returns=args["calibration"] == "return")


def _render(args: dict[str, Any]) -> str:
    """Detect the named sets here, as root, and render their program (refused when one cannot
    attach: the reason is the detection's)."""
    from aorta_tui.trace import probes

    if args["calibration"]:
        return _render_calibration(args)
    ctx = _context(args)
    selections = []
    for name in args["sets"]:
        ps = probes.get(name)
        det = ps.detect(ctx)
        if not det.available:
            raise P.ProtocolError(P.FAILED, f"probe set {name!r} cannot attach here: {det.reason}"
                                  + (f" (fix: {det.fix})" if det.fix else ""))
        if name in args["collector_launch_sets"]:
            block = getattr(ps, "launch_block", "launch")
            det.instances = [i for i in det.instances if i.block != block]
        selections.append((ps, det))
    try:
        return program.render(selections, mode=args["mode"], pid=args["pid"],
                              heartbeat_ms=args["heartbeat_ms"], interval_s=args["interval_s"]).text
    except AortaError as exc:
        raise P.ProtocolError(P.FAILED, exc.message) from None


def _spawn(text: str, workdir: Path, args: dict[str, Any]) -> subprocess.Popen[bytes]:
    program_path = workdir / "program.bt"
    program_path.write_text(text)
    bpftrace = capability.require_bpftrace(None)  # the helper's own: root's PATH or $AORTA_TUI_BPFTRACE
    argv = bpftrace_argv(bpftrace, program_path, json_output=args["json_output"],
                         block_buffered=args["block_buffered"])
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "BPFTRACE_STRLEN": "64"}
    if args["perf_rb_pages"]:
        env["BPFTRACE_PERF_RB_PAGES"] = str(args["perf_rb_pages"])
    with open(workdir / "stderr", "wb") as err:
        return spawn_bpftrace(argv, env, err)


def _stop_proc(proc: subprocess.Popen[bytes], grace_s: float) -> int | None:
    """SIGINT (bpftrace prints its exit maps), the grace, then SIGKILL of its whole session."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=grace_s)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            _kill_group(proc)
    return proc.returncode


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def _tracefs_root(_args: dict[str, Any]) -> Result:
    root = tracefs.find_tracefs()
    return {"root": str(root) if root else None}, ()


def _tracefs_format(args: dict[str, Any]) -> Result:
    root = tracefs.find_tracefs()
    if root is None:
        return {"text": None}, ()
    try:
        with open(root / "events" / args["group"] / args["event"] / "format", "rb") as fh:
            return {"text": fh.read(P.MAX_REPLY // 4).decode("utf-8", "replace")}, ()
    except OSError:
        return {"text": None}, ()


def _tracefs_has(args: dict[str, Any]) -> Result:
    root = tracefs.find_tracefs()
    return {"exists": bool(root and (root / args["name"]).exists())}, ()


def family() -> VerbFamily:
    traces = Traces()
    return VerbFamily(
        verbs={
            "trace_start": Verb(START_ARGS, traces.start),
            "trace_poll": Verb({"id": P.Int(1, 1 << 30)}, traces.poll),
            "trace_stop": Verb({"id": P.Int(1, 1 << 30), "grace_s": P.Float(0.0, 60.0)}, traces.stop),
            "tracefs_root": Verb({}, _tracefs_root),
            "tracefs_format": Verb({"group": P.Ident(), "event": P.Ident()}, _tracefs_format),
            "tracefs_has": Verb({"name": P.OneOf(TRACEFS_FILES)}, _tracefs_has),
        },
        shutdown=traces.shutdown,
    )
