"""Run bpftrace as a child process and hand its stdout to a callback in batches of lines.

* stdout is a pipe, read in chunks by one thread; in events mode bpftrace block-buffers it
  (``-B full``: one write per 4 KiB, not per record) and the program pads after every
  heartbeat so that the heartbeat is written at once;
* bpftrace's perf buffers are enlarged (:func:`perf_rb_pages`), unless
  ``BPFTRACE_PERF_RB_PAGES`` is set;
* stderr goes to a file, never to the terminal (bpftrace always prints a RLIMIT_MEMLOCK
  warning, and a TUI's screen must not be written to);
* the heartbeat (``@H <ns>``) tells :meth:`drain` which records must have been read;
* :meth:`stop` sends SIGINT (bpftrace prints its exit maps and detaches), then SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

from aorta_tui.core.errors import EnvironmentProblem
from aorta_tui.core.numerals import ascii_digits

if TYPE_CHECKING:
    from aorta_tui.trace.launcher import BpftraceLauncher, BpftraceProcess, ProgramSpec

_NOISE = ("couldn't set RLIMIT_MEMLOCK",)
BATCH_S = 0.05
BATCH_BYTES = 4 << 20
_F_SETPIPE_SZ = 1031


def _grow_pipe(fd: int, size: int = 16 << 20) -> None:
    """Ask for a bigger pipe (Linux); fall back silently to what /proc/sys/fs/pipe-max-size allows."""
    import fcntl

    for want in (size, 4 << 20, 1 << 20):
        try:
            fcntl.fcntl(fd, _F_SETPIPE_SZ, want)
            return
        except OSError:
            continue


PAGE = 4096
PERF_BUFFER_TOTAL = 64 << 20  # locked memory for bpftrace's perf buffers, over all CPUs


def perf_rb_pages(cpus: int | None = None) -> int:
    """Pages per CPU for bpftrace's perf ring buffers (``BPFTRACE_PERF_RB_PAGES``, default 64 =
    256 KiB): a buffer holds what arrives while bpftrace is off the CPU, so a larger one turns a
    scheduling stall into a delay instead of lost records (at 200k records/s, 256 KiB is ~15 ms,
    4 MiB ~0.25 s). A power of two (perf requires it), 64 MiB over all CPUs, 64 to 4096 pages."""
    n = max(1, cpus or os.cpu_count() or 1)
    want = max(1, PERF_BUFFER_TOTAL // PAGE // n)
    return max(64, min(4096, 1 << (want.bit_length() - 1)))


class BpftraceRunner:
    # "full": block-buffered stdout for the programs that ask (block_buffered); "line" (bpftrace's
    # default for a pipe, one write per record) for every program
    output_buffering = "full"
    perf_rb_pages: int | None = perf_rb_pages()  # None: bpftrace's default

    def __init__(
        self,
        program_text: str,
        *,
        bpftrace: str,
        on_lines: Callable[[list[str]], None],
        json_output: bool = False,
        stderr_path: Path | None = None,
        block_buffered: bool = False,
        spec: ProgramSpec | None = None,
        launcher: BpftraceLauncher | None = None,
    ) -> None:
        """``block_buffered``: bpftrace's stdout in 4 KiB writes (``-B full``); only for a program
        that pads after every heartbeat (``program.FLUSH_PAD``, as :func:`program.render`'s events
        programs do), or its heartbeats would wait in bpftrace's buffer.

        ``spec``: the typed description ``program_text`` was rendered from (probe sets, pid,
        mode): what the privileged helper regenerates the program from under sudo, since it
        takes no program text. A runner without one (calibration) cannot run through it."""
        self.block_buffered = block_buffered
        self.spec = spec
        self.launcher = launcher
        self.notes: list[str] = []  # what the launcher says (e.g. whose process the helper traces)
        self.program_text = program_text
        self.bpftrace = bpftrace
        self.on_lines = on_lines
        self.json_output = json_output
        self._tmpdir = tempfile.TemporaryDirectory(prefix="aorta-trace-")
        self.program_path = Path(self._tmpdir.name) / "program.bt"
        self.stderr_path = stderr_path or Path(self._tmpdir.name) / "bpftrace.stderr"
        self.proc: BpftraceProcess | None = None
        self.stderr_file: IO[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._hb_lock = threading.Condition()
        self.last_heartbeat_ns: int | None = None
        self.heartbeats = 0
        self.lines_read = 0
        self.returncode: int | None = None
        self.callback_errors: list[str] = []

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start bpftrace through the launcher (:mod:`aorta_tui.trace.launcher`): spawned here
        when this process may trace (root without sudo), by the privileged helper under sudo."""
        from aorta_tui.trace.launcher import default_launcher

        self.proc = (self.launcher or default_launcher()).launch(self)
        self._reader = threading.Thread(target=self._read_loop, name="bpftrace-reader", daemon=True)
        self._reader.start()

    def bpftrace_env(self) -> dict[str, str]:
        """bpftrace's environment variables this runner asks for (string length, perf buffers)."""
        env = {"BPFTRACE_STRLEN": os.environ.get("BPFTRACE_STRLEN", "64")}
        if self.perf_rb_pages:
            env["BPFTRACE_PERF_RB_PAGES"] = os.environ.get("BPFTRACE_PERF_RB_PAGES", str(self.perf_rb_pages))
        return env

    def wait_attached(self, timeout_s: float = 60.0) -> None:
        """Block until the first heartbeat: every probe is attached once it fires."""
        deadline = time.monotonic() + timeout_s
        with self._hb_lock:
            while self.heartbeats == 0:
                if self.proc is not None and self.proc.poll() is not None and not self._reader_alive():
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._hb_lock.wait(min(left, 0.1))
        if self.heartbeats == 0:
            rc = self.proc.poll() if self.proc else None
            self.stop()
            msg = self.stderr_text()
            if rc is None:
                raise EnvironmentProblem(
                    f"bpftrace did not start tracing within {timeout_s:.0f} s",
                    hint=f"see {self.stderr_path}; a busy machine may need a longer --attach-timeout",
                )
            raise EnvironmentProblem(
                f"bpftrace exited with code {rc} before tracing started: {msg or '(no message)'}",
                hint=_hint_for(msg),
            )

    def drain(self, after_ns: int, timeout_s: float = 5.0) -> bool:
        """Wait until a heartbeat stamped after ``after_ns`` was read (records before it are in)."""
        deadline = time.monotonic() + timeout_s
        with self._hb_lock:
            while (self.last_heartbeat_ns or 0) < after_ns:
                if not self._reader_alive():
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._hb_lock.wait(min(left, 0.05))
        return True

    def stop(self, grace_s: float = 5.0) -> int | None:
        """SIGINT, wait, then SIGKILL; joins the reader. Safe to call twice."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        if self._reader is not None:
            self._reader.join(timeout=5)
        if proc is not None:
            self.returncode = proc.returncode
        fh = self.stderr_file
        if fh is not None and not fh.closed:
            fh.close()
        return self.returncode

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stderr_text(self) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(ln for ln in text.splitlines() if ln.strip() and not any(n in ln for n in _NOISE)).strip()

    def cleanup(self) -> None:
        self.stop()
        self._tmpdir.cleanup()

    # -- reading -----------------------------------------------------------------------------
    def _reader_alive(self) -> bool:
        return self._reader is not None and self._reader.is_alive()

    def _read_loop(self) -> None:
        """Read stdout in coalesced batches.

        bpftrace writes one line at a time; waking the consumer per line costs the traced
        process dearly when it shares our interpreter (GIL), so lines are gathered for up to
        ``BATCH_S`` (or ``BATCH_BYTES``) before they are handed over. The pipe is enlarged so
        bpftrace never blocks while we gather.
        """
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        _grow_pipe(fd)
        rest = b""
        hb_mark = b'"@H ' if self.json_output else b"@H "
        eof = False
        while not eof:
            chunks: list[bytes] = []
            size = 0
            first_at: float | None = None
            while True:
                timeout = 0.2 if first_at is None else max(0.0, first_at + BATCH_S - time.monotonic())
                ready, _, _ = select.select([fd], [], [], timeout)
                if ready:
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        eof = True
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                    if first_at is None:
                        first_at = time.monotonic()
                    if size >= BATCH_BYTES:
                        break
                elif first_at is not None:
                    break  # batch window over
                elif self.proc.poll() is not None:
                    # exited; read whatever is left without blocking
                    ready, _, _ = select.select([fd], [], [], 0)
                    if not ready:
                        eof = True
                        break
            data = rest + b"".join(chunks)
            if eof:
                rest = b""
                if data:
                    self._deliver(data.decode("utf-8", "replace").splitlines(keepends=True), hb_mark)
                break
            cut = data.rfind(b"\n")
            if cut < 0:
                rest = data
                continue
            rest = data[cut + 1 :]
            self._deliver(data[: cut + 1].decode("utf-8", "replace").splitlines(keepends=True), hb_mark)
        with self._hb_lock:
            self._hb_lock.notify_all()

    def _deliver(self, lines: list[str], hb_mark: bytes) -> None:
        self.lines_read += len(lines)
        try:
            self.on_lines(lines)
        except Exception as exc:  # a consumer bug must not stall the pipe (bpftrace would drop)
            if len(self.callback_errors) < 5:
                self.callback_errors.append(f"{type(exc).__name__}: {exc}")
        mark = hb_mark.decode()
        if self.json_output:
            hbs = [ln for ln in lines if mark in ln and ln.startswith('{"type": "printf"')]
        else:
            hbs = [ln for ln in lines if ln.startswith(mark)]
        if hbs:
            ts = _heartbeat_ts(hbs[-1], self.json_output)
            with self._hb_lock:
                self.heartbeats += len(hbs)
                if ts is not None:
                    self.last_heartbeat_ns = max(self.last_heartbeat_ns or 0, ts)
                self._hb_lock.notify_all()


def _heartbeat_ts(line: str, json_output: bool) -> int | None:
    try:
        if json_output:
            i = line.index('"@H ') + 4
            j = i
            while j < len(line) and ascii_digits(line[j]):
                j += 1
            return int(line[i:j])
        return int(line.strip()[3:])
    except ValueError:
        return None


def _hint_for(stderr: str) -> str:
    low = stderr.lower()
    if "root" in low or "permission" in low or "operation not permitted" in low:
        return "run as root (sudo aorta-tui ...) or grant CAP_BPF and CAP_PERFMON"
    if "tracefs" in low or "debugfs" in low:
        return "mount -t tracefs nodev /sys/kernel/tracing"
    if "could not resolve symbol" in low or "no such file" in low:
        return "check the library with `aorta-tui trace info` and pass --lib NAME=/path"
    if "kprobe" in low:
        return "this kernel has no kprobes; use probe sets built on tracepoints or uprobes"
    return "run `aorta-tui trace info` to see what this machine supports"
