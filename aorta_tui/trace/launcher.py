"""Who starts bpftrace: this process (root without sudo) or the privileged helper (under sudo).

One seam, :class:`BpftraceLauncher`, handed to :class:`~aorta_tui.trace.runner.BpftraceRunner`:

* :class:`DirectLauncher` spawns bpftrace on the runner's program text, as root has always
  done;
* :class:`HelperLauncher` sends the helper the runner's :class:`ProgramSpec` (probe-set names
  from the catalogue, a pid, numbers), never the text: the helper renders the same program from
  its own catalogue (``trace/privileged.py``), starts bpftrace and passes back the read end of
  its stdout (SCM_RIGHTS), so the runner's reader thread reads it exactly as a local pipe.

Both return a handle with the part of ``subprocess.Popen`` the runner uses (``stdout``,
``poll``, ``wait``, ``send_signal``, ``kill``, ``returncode``, ``pid``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from aorta_tui.core import spawn_gate
from aorta_tui.core.errors import EnvironmentProblem
from aorta_tui.privsep import client as privsep


@dataclass(frozen=True)
class ProgramSpec:
    """What a catalogue program is rendered from (``program.render``'s inputs, by name)."""

    sets: tuple[str, ...]
    mode: str
    pid: int | None = None  # the predicate's pid (a traced command's or --pid)
    maps_pid: int | None = None  # --pid: whose mapped libraries detection looks at
    heartbeat_ms: int = 200
    interval_s: float = 1.0
    collector_launch_sets: tuple[str, ...] = field(default=())  # sets whose launch uprobe is left out
    # "entry" / "return": not the sets' program but the calibration's counting probes on their
    # calibration functions and libc's (trace/calibrate.py), with or without return probes
    calibration: str = ""
    # the sets a --lib NAME=PATH named: never sent (the helper takes no path); the helper
    # launcher refuses them, saying why
    lib_overrides: tuple[str, ...] = field(default=())

    def to_args(self, runner: LaunchTarget) -> dict[str, Any]:
        args = asdict(self)
        args["sets"] = list(self.sets)
        args["collector_launch_sets"] = list(self.collector_launch_sets)
        del args["lib_overrides"]
        args.update(json_output=runner.json_output, block_buffered=runner.block_buffered,
                    perf_rb_pages=runner.perf_rb_pages)
        return args


class LaunchTarget(Protocol):
    """What a launcher reads of (and leaves on) the runner it starts bpftrace for
    (:class:`aorta_tui.trace.runner.BpftraceRunner` fills it)."""

    program_text: str
    program_path: Path
    bpftrace: str
    json_output: bool
    block_buffered: bool
    output_buffering: str
    perf_rb_pages: int | None
    stderr_path: Path
    stderr_file: IO[bytes] | None  # bpftrace's stderr, when this process holds it (closed by stop)
    spec: ProgramSpec | None
    notes: list[str]

    def bpftrace_env(self) -> dict[str, str]: ...


class BpftraceProcess(Protocol):
    pid: int
    stdout: IO[bytes] | None
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...


class BpftraceLauncher(Protocol):
    def launch(self, runner: LaunchTarget) -> BpftraceProcess: ...


def bpftrace_argv(bpftrace: str, program_path: Path, *, json_output: bool, block_buffered: bool,
                  full_buffering: bool = True) -> list[str]:
    argv = [bpftrace]
    if json_output:
        argv += ["-f", "json"]
    elif block_buffered and full_buffering:
        # one 4 KiB write instead of one write per record; every heartbeat is pushed out by
        # the padding line the program prints after it (program.FLUSH_PAD)
        argv += ["-B", "full"]
    return [*argv, str(program_path)]


def spawn_bpftrace(argv: list[str], env: dict[str, str], stderr: IO[bytes]) -> subprocess.Popen[bytes]:
    """bpftrace with its stdout a pipe, its stderr a file, in a session of its own (a Ctrl-C in
    the terminal reaches the tool, which stops it, not bpftrace)."""
    try:
        return spawn_gate.popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=stderr, env=env, start_new_session=True)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot run bpftrace at {argv[0]}: {exc.strerror}",
                                 hint="install it (apt-get install bpftrace) or pass --bpftrace PATH") from None


class DirectLauncher:
    """This process runs bpftrace itself (it is root, or has CAP_BPF+CAP_PERFMON)."""

    def launch(self, runner: LaunchTarget) -> BpftraceProcess:
        # made 0600 by the open itself, never through a path chmod after the write
        fd = os.open(runner.program_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as program:
            os.fchmod(program.fileno(), 0o600)  # an existing file keeps its mode through O_CREAT
            program.write(runner.program_text)
        argv = bpftrace_argv(runner.bpftrace, runner.program_path, json_output=runner.json_output,
                             block_buffered=runner.block_buffered,
                             full_buffering=runner.output_buffering == "full")
        err = runner.stderr_file = open(runner.stderr_path, "wb")  # noqa: SIM115 - closed in stop()
        try:
            return spawn_bpftrace(argv, {**os.environ, **runner.bpftrace_env()}, err)
        except BaseException:
            err.close()
            raise


class HelperBpftrace:
    """A bpftrace the helper runs: its stdout here, its life asked of the helper."""

    def __init__(self, conn: privsep.Client, trace_id: int, pid: int, stdout_fd: int, stderr_path: Path) -> None:
        self._conn = conn
        self.trace_id = trace_id
        self.pid = pid
        self.stdout: IO[bytes] | None = os.fdopen(stdout_fd, "rb", buffering=0)
        self.returncode: int | None = None
        self._stderr_path = stderr_path
        self._lock = threading.Lock()  # the reader thread polls while the runner stops

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                state = self._conn.call("trace_poll", id=self.trace_id)
            except privsep.HelperRefused:
                with self._lock:  # the helper is gone (bpftrace with it), or a stop came first
                    if self.returncode is None:
                        self.returncode = -int(signal.SIGKILL)
                return self.returncode
            if not state.get("running"):
                self._stop(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"bpftrace (helper trace {self.trace_id})", timeout or 0)
            time.sleep(0.05)
        return code

    def send_signal(self, sig: int) -> None:
        # SIGINT is the runner's "stop, print the exit maps"; the helper does it with its grace
        self._stop(5.0 if sig == signal.SIGINT else 0.0)

    def kill(self) -> None:
        self._stop(0.0)

    def _stop(self, grace_s: float) -> None:
        with self._lock:
            if self.returncode is None:
                self._stop_locked(grace_s)

    def _stop_locked(self, grace_s: float) -> None:
        try:
            out = self._conn.call("trace_stop", id=self.trace_id, grace_s=grace_s)
        except privsep.HelperRefused as exc:
            out = {"returncode": -int(signal.SIGKILL), "stderr": exc.message}
        rc = out.get("returncode")
        self.returncode = rc if type(rc) is int else -int(signal.SIGKILL)
        self._stderr_path.write_text(str(out.get("stderr") or ""))


# Root without sudo's variables: ``privsep/boot.py`` drops to the user whenever SUDO_UID names
# one, even in a root shell that `sudo -i` started; without them there is nobody to drop to.
ROOT_WITHOUT_SUDO = "sudo env -u SUDO_UID -u SUDO_GID -u SUDO_USER aorta-tui"


class HelperLauncher:
    """Under sudo: the helper renders the program from the runner's spec and runs bpftrace."""

    def __init__(self, conn: privsep.Client) -> None:
        self.conn = conn

    def launch(self, runner: LaunchTarget) -> BpftraceProcess:
        if runner.spec is None:
            raise EnvironmentProblem(
                "the privileged helper runs only the programs it renders from the probe catalogue, "
                "and this bpftrace program is not one of them",
                hint=f"if it must run, run the tool wholly as root: `{ROOT_WITHOUT_SUDO} ...` (everything "
                     "it starts then runs as root too)")
        if runner.spec.lib_overrides:
            names = ", ".join(runner.spec.lib_overrides)
            # Why not pass the path on: the helper attaches uprobes as root only to libraries it
            # found itself for a catalogue set; a path from the user's side would let the user
            # have root attach to (and read symbols of) any file it names.
            raise EnvironmentProblem(
                f"--lib {names}=PATH cannot be used under sudo: the tool runs as you, and the privileged "
                "helper that attaches the probes takes no path from it (it attaches only to the "
                "catalogue's libraries it finds itself: the traced --pid's mapped libraries, else the "
                "loader cache)",
                hint=f"drop --lib and trace the running program by pid (`sudo aorta-tui trace queue "
                     f"--probes {names} --pid PID`: its libraries are found in its maps); or put the "
                     "library where the loader finds it (`ldconfig`); or, trusting the traced command "
                     f"with root (it then runs as root), `{ROOT_WITHOUT_SUDO} trace queue ... --lib ...`")
        result, fds = self.conn.call_with_fds("trace_start", **runner.spec.to_args(runner))
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise EnvironmentProblem("the privileged helper started bpftrace but sent no output pipe")
        runner.notes.extend(str(n) for n in result.get("notes", []))
        return HelperBpftrace(self.conn, int(result["id"]), int(result["pid"]), fds[0], runner.stderr_path)


def default_launcher() -> BpftraceLauncher:
    """The helper when the tool runs under sudo, this process otherwise."""
    conn = privsep.current()
    return HelperLauncher(conn) if conn is not None else DirectLauncher()
