"""One engine command in a child process, read as typed events: the bridge front ends use.

``EngineRun(["policy", "sweep", ..., "--json"])`` starts ``aorta-tui <cmd> --json`` in its own
process group (its own session: a Ctrl-C meant for the caller never reaches it unasked), reads
its stdout as the one event stream (one event per line, the journal's format), learns what it
runs -- and where its run directory is -- from the first ``RunStarted`` line, and stops it by
signalling the whole group. Its stderr goes to a file, never to the caller's terminal (a TUI's
screen would be corrupted by it): the caller's ``stderr_path``, else a temporary file of the
run's, removed when it is stopped or closed unless an error message named it.

A line that is not an event is counted and located in ``damaged`` (the engine's own parser,
``journal_reader.parse_journal_line``, decides), never fatal. A command that exits before it said
``RunStarted`` raises :class:`EngineRunError` naming its exit status and the tail of its stderr.

No textual or rich here: the TUI wraps this in a Textual worker; ``launch_detached`` runs it in
a detached relay (``python -m aorta_tui.relay.engine_run --relay LOG -- CMD...``).
"""

from __future__ import annotations

import collections
import contextlib
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from aorta_tui.core import spawn_gate
from aorta_tui.core.errors import AortaError, ExitCode
from aorta_tui.core.events import Event, RunStarted
from aorta_tui.privsep import client as privsep
from aorta_tui.store.journal_follow import JournalLines
from aorta_tui.store.journal_reader import Damage

STDERR_TAIL = 2000  # characters of the child's stderr an error quotes
READ_CHUNK = 1 << 16
STOP_GRACE_S = 10.0  # after SIGINT, how long the group has to finish before SIGKILL


class EngineRunError(AortaError):
    """The engine command ended (or never started) without the stream the caller needs."""

    exit_code = ExitCode.USAGE


# every run this process started and has not stopped or closed: what ``interrupt_all`` signals
_STARTED: weakref.WeakSet[EngineRun] = weakref.WeakSet()


def interrupt_all(sig: int = signal.SIGINT) -> int:
    """Send ``sig`` to the process group of every run this process started that still runs,
    without waiting; how many were signalled. For a front end that must leave at once (its
    terminal hung up: ``cli/tui_launch``), where no screen's unmount will stop its runs: their
    groups are sessions of their own, so the terminal's hangup never reaches them, and a trace
    would otherwise go on tracing (bpftrace, the traced program) with nobody to read it."""
    return sum(run.send_signal(sig) for run in list(_STARTED))


def engine_argv(args: Sequence[str]) -> list[str]:
    """``aorta-tui ARGS`` as this interpreter runs it (no PATH lookup, the same venv)."""
    return [sys.executable, "-m", "aorta_tui", *args]


class EngineRun:
    """A running ``aorta-tui`` command and its event stream. Not thread-safe: one reader."""

    def __init__(self, args: Sequence[str], *, stderr_path: str | Path | None = None,
                 env: dict[str, str] | None = None, cwd: str | Path | None = None,
                 argv: Sequence[str] | None = None) -> None:
        self.argv = list(argv) if argv is not None else engine_argv(args)
        self.stderr_path = Path(stderr_path) if stderr_path is not None else None
        self.env = env
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None
        self.started: RunStarted | None = None
        self._lines = JournalLines(sweep_ids=False)  # policy sweeps' trial ids are flat
        self._ready: collections.deque[tuple[bytes, Event | None]] = collections.deque()
        self._buffered: list[Event] = []  # read while waiting for RunStarted, not yet yielded
        self._stopping = threading.Event()
        # the stderr log this run made itself (no ``stderr_path`` given): removed when the run
        # is stopped or closed, unless an error message named it (``_cite_log``); a caller's
        # path is the caller's, never removed
        self._own_log: Path | None = None
        self._log_cited = False

    # --- starting -------------------------------------------------------------------------

    def start(self) -> EngineRun:
        if self.stderr_path is None:
            fd, name = tempfile.mkstemp(prefix="aorta-tui-engine-", suffix=".log")
            os.close(fd)
            self.stderr_path = self._own_log = Path(name)
        try:
            env, helper_fd = _with_helper_connection(self.env)
            try:
                with open(self.stderr_path, "ab") as err:
                    self.proc = spawn_gate.popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                 stderr=err, start_new_session=True, env=env, cwd=self.cwd,
                                                 pass_fds=() if helper_fd is None else (helper_fd,))
            finally:
                if helper_fd is not None:
                    os.close(helper_fd)
        except BaseException:
            self._remove_own_log()  # nothing ran: nothing in it to keep
            raise
        _STARTED.add(self)
        return self

    def __enter__(self) -> EngineRun:
        return self if self.proc is not None else self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def run_dir(self) -> Path | None:
        """The run directory its ``RunStarted`` named (None before it, or when it has none)."""
        if self.started is None or not self.started.run_dir:
            return None
        return Path(self.started.run_dir)

    @property
    def malformed(self) -> int:
        return len(self.damaged)

    @property
    def damaged(self) -> list[Damage]:
        return self._lines.damaged

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # --- reading --------------------------------------------------------------------------

    def lines(self, timeout: float | None = None) -> Iterator[tuple[bytes, Event | None]]:
        """Each complete stdout line with its event (None: counted in ``damaged``).

        With ``timeout``, raises :class:`EngineRunError` when no line arrived for that long.
        A last line without its newline (the command was killed mid-write) is damage too.
        """
        assert self.proc is not None and self.proc.stdout is not None, "start() first"
        while True:
            while not self._ready:
                chunk = self._read_chunk(timeout)
                if not chunk:
                    self._lines.end()
                    return
                self._ready.extend(self._lines.feed(chunk))
            # one at a time off the queue: a caller that stops at RunStarted (wait_started)
            # leaves the lines of the same chunk for the next reader
            raw, event = self._ready.popleft()
            if self.started is None and isinstance(event, RunStarted):
                self.started = event
            yield raw + b"\n", event

    def _read_chunk(self, timeout: float | None) -> bytes:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        if timeout is not None:
            ready, _w, _x = select.select([fd], [], [], timeout)
            if not ready:
                raise EngineRunError(
                    f"{self._what()} (pid {self.pid}) printed no event line within {timeout:.3g}s",
                    hint=f"see {self._cite_log()}")
        try:
            return os.read(fd, READ_CHUNK)
        except OSError:
            return b""

    def wait_started(self, timeout: float | None = None) -> RunStarted:
        """Read until the ``RunStarted`` line; the events before it are kept for ``events()``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.started is None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            got = next(self.lines(timeout=left), None)
            if got is None:
                self._raise_not_started()
            elif got[1] is not None and got[1] is not self.started:
                self._buffered.append(got[1])
        return self.started

    def events(self) -> Iterator[Event]:
        """Every event, ``RunStarted`` first; ends when the command closes its stdout.

        Raises :class:`EngineRunError` when the stream ended without a ``RunStarted``.
        """
        if self.started is None:
            self.wait_started()
        assert self.started is not None
        yield self.started
        buffered, self._buffered = self._buffered, []
        yield from buffered
        for _raw, event in self.lines():
            if event is not None:
                yield event

    def wait(self, timeout: float | None = None) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stderr_tail(self, limit: int = STDERR_TAIL) -> str:
        if self.stderr_path is None:
            return ""
        try:
            with open(self.stderr_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - limit * 4))
                text = fh.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        return text.strip()[-limit:]

    # --- stopping -------------------------------------------------------------------------

    def send_signal(self, sig: int = signal.SIGINT) -> bool:
        """Send ``sig`` to the whole process group without waiting; False when it has ended."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            return False
        return True

    def stop(self, sig: int = signal.SIGINT, grace_s: float = STOP_GRACE_S) -> int | None:
        """Signal the whole process group (``sig``: the engine stops cleanly and writes what it
        has), SIGKILL it after ``grace_s``, and end any process of the group left behind.
        Returns the exit status."""
        proc = self.proc
        if proc is None:
            return None
        self._stopping.set()
        if proc.poll() is None:
            _killpg(proc.pid, sig)
            if not self._exited_unreaped(grace_s):
                _killpg(proc.pid, signal.SIGKILL)
                self._exited_unreaped(5.0)
        # The leader is a zombie (or reaped): its pid, hence the group's id, cannot be reused
        # while it is unreaped, so a grandchild that ignored ``sig`` is ended here.
        _killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5.0)
        _STARTED.discard(self)
        self._remove_own_log()
        return proc.returncode

    def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.stop()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        _STARTED.discard(self)
        self._remove_own_log()

    def _remove_own_log(self) -> None:
        """Remove the log this run made itself, once (kept when a message named it)."""
        if self._own_log is None or self._log_cited:
            return
        with contextlib.suppress(OSError):
            self._own_log.unlink()
        self._own_log = None

    def _cite_log(self) -> Path | None:
        """``stderr_path``, for a message that names it: the file is kept from then on."""
        self._log_cited = True
        return self.stderr_path

    def _exited_unreaped(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the leader to exit, leaving it a zombie (WNOWAIT)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        waiter = threading.Event()
        while True:
            if self.proc.returncode is not None:
                return True
            try:
                info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # reaped by someone else (Popen.poll on another thread)
                return True
            if info is not None:
                return True
            if time.monotonic() >= deadline:
                return False
            waiter.wait(0.02)  # a short wait on an Event, never a bare sleep loop

    # --- errors ---------------------------------------------------------------------------

    def _what(self) -> str:
        """``aorta-tui policy sweep`` (the command's first words, as the user would type them)."""
        if self.argv[1:3] == ["-m", "aorta_tui"]:
            return " ".join(["aorta-tui", *[w for w in self.argv[3:5] if not w.startswith("-")]])
        return " ".join(self.argv[:2])

    def _raise_not_started(self) -> None:
        assert self.proc is not None
        try:
            code = self.proc.wait(10.0)
        except subprocess.TimeoutExpired:
            code = None
        status = f"exited with status {code}" if code is not None else "closed its output"
        tail = self.stderr_tail()
        raise EngineRunError(
            f"{self._what()} {status} before it started a run (no run_started line)"
            + (f": {tail}" if tail else ""),
            hint=f"its stderr is in {self._cite_log()}")


def _with_helper_connection(env: dict[str, str] | None) -> tuple[dict[str, str] | None, int | None]:
    """Under sudo the engine command runs as the user, like this process: it gets a connection
    of its own to the privileged helper (for tracing), handed down by descriptor number."""
    conn = privsep.current()
    if conn is None:
        return env, None
    fd = conn.child_connection()
    return {**(os.environ if env is None else env), privsep.FD_ENV: str(fd)}, fd


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


# --- the detached relay ---------------------------------------------------------------------


def relay_main(argv: list[str]) -> int:
    """``--relay LOG -- ARGS...``: run ``aorta-tui ARGS``, copy its stdout lines to LOG, and
    hand the first ``RunStarted`` line to our own stdout (the launcher's handshake pipe), then
    close it. The launcher may exit at once; this relay (in its own session) keeps copying so
    the engine never writes into a broken pipe. Exits with the command's status."""
    if len(argv) < 3 or argv[0] != "--relay" or "--" not in argv:
        print("usage: python -m aorta_tui.relay.engine_run --relay LOG -- ARGS...", file=sys.stderr)
        return int(ExitCode.USAGE)
    log_path = Path(argv[1])
    args = argv[argv.index("--") + 1 :]
    handshake: IO[bytes] | None = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # nothing but the handshake line ever reaches the launcher
    run = EngineRun(args, stderr_path=log_path).start()
    # After the start: an ignored signal would be inherited by the engine across exec, and
    # ``cancel_run``'s SIGINT must reach it. The relay itself only drains the engine's output.
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    with open(log_path, "ab") as log:
        for raw, event in run.lines():
            log.write(raw)
            log.flush()
            if handshake is not None and event is not None and event is run.started:
                _hand_over(handshake, raw)
                handshake = None  # handed over once, and closed
    if handshake is not None:
        handshake.close()  # no RunStarted: the launcher reads EOF and reports the log
    return run.wait()


def _hand_over(handshake: IO[bytes], raw: bytes) -> None:
    with contextlib.suppress(OSError):  # the launcher gave up waiting: the run goes on
        handshake.write(raw)
        handshake.flush()
    with contextlib.suppress(OSError):
        handshake.close()


if __name__ == "__main__":
    sys.exit(relay_main(sys.argv[1:]))
