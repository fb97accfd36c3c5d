"""The root side: a loop that answers typed requests, and nothing else.

It is forked by :mod:`aorta_tui.privsep.boot` before the tool drops to the invoking user and
keeps root. What it may do is the table of verbs it is handed (:class:`Verb`: a schema that
:func:`protocol.check_request` enforces, and the function that runs the checked arguments);
everything else gets a typed refusal and the loop goes on. It dies with the tool: the kernel
sends it SIGTERM when its parent dies (``PR_SET_PDEATHSIG``, also after a SIGKILL), and the
end of its first connection means the same; either way every verb family's ``shutdown`` runs
first (bpftrace stopped, GPU knobs restored).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aorta_tui.privsep import protocol

PR_SET_PDEATHSIG = 1
Result = tuple[dict[str, Any], tuple[int, ...]]  # the reply's result, descriptors sent beside it


@dataclass(frozen=True)
class Verb:
    args: Mapping[str, protocol.Check]
    run: Callable[[dict[str, Any]], Result]


@dataclass
class VerbFamily:
    """The verbs of one job (tracing, GPU knobs, snapshot fields) and what undoes it at exit."""

    verbs: dict[str, Verb]
    shutdown: Callable[[], None] = lambda: None


@dataclass
class Helper:
    families: list[VerbFamily]
    load_error: str | None = None  # why the verb families could not be loaded (said in refusals)
    verbs: dict[str, Verb] = field(default_factory=dict)
    _stopping: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.verbs = {"ping": Verb({}, lambda _a: ({"pong": True, "pid": os.getpid()}, ())),
                      "connect": Verb({}, self._connect)}
        for family in self.families:
            clash = set(family.verbs) & set(self.verbs)
            if clash:
                raise ValueError(f"verbs defined twice: {sorted(clash)}")
            self.verbs.update(family.verbs)

    def answer(self, frame: object) -> tuple[dict[str, Any], tuple[int, ...]]:
        """The reply to one frame; a refusal for anything not a valid request, never a raise."""
        try:
            verb, args = protocol.check_request(frame, {k: v.args for k, v in self.verbs.items()})
            result, fds = self.verbs[verb].run(args)
            return protocol.ok(result), fds
        except protocol.ProtocolError as exc:
            extra = f" (the helper could not load its verbs: {self.load_error})" if (
                self.load_error and exc.code == protocol.UNKNOWN_VERB) else ""
            return protocol.refusal(exc.code, exc.message + extra), ()
        except Exception as exc:  # a verb that fails must not take the helper down
            return protocol.refusal(protocol.FAILED, f"{type(exc).__name__}: {exc}"), ()

    def serve(self, sock: socket.socket) -> None:
        """Answer requests on ``sock`` until the other side closes it."""
        reply: dict[str, Any]
        out_fds: tuple[int, ...]
        while True:
            try:
                frame, fds = protocol.recv(sock, protocol.MAX_REQUEST)
            except protocol.ConnectionClosed:
                return
            except OSError:
                return
            except protocol.ProtocolError as exc:
                reply, out_fds = protocol.refusal(exc.code, exc.message), ()
            else:
                for fd in fds:  # the helper takes no descriptor from the unprivileged side
                    os.close(fd)
                reply, out_fds = (self.answer(frame) if not fds else
                                  (protocol.refusal(protocol.REFUSED, "the helper accepts no descriptors"), ()))
            try:
                protocol.send(sock, reply, out_fds)
            except OSError:
                return
            finally:
                for fd in out_fds:
                    os.close(fd)

    def _connect(self, _args: dict[str, Any]) -> Result:
        """A second connection (for the tool's own child command, e.g. the TUI's trace monitor):
        its end goes back to the client; the helper serves the other in a thread."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        threading.Thread(target=self._serve_and_close, args=(mine,), daemon=True,
                         name="privsep-conn").start()
        fd = theirs.detach()
        return {"connected": True}, (fd,)

    def _serve_and_close(self, sock: socket.socket) -> None:
        with sock:
            self.serve(sock)

    def shutdown(self) -> None:
        """Undo what the verbs started (stop bpftrace, restore GPU knobs); once."""
        if not self._stopping.acquire(blocking=False):
            return
        for family in self.families:
            with contextlib.suppress(Exception):
                family.shutdown()


def die_with_parent(parent_pid: int) -> None:
    """SIGTERM when the parent dies (a SIGKILL too), and leave now if it already has."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        os._exit(3)
    if os.getppid() != parent_pid:  # died between fork and prctl: no signal will come
        os._exit(0)


def quiet_std_streams() -> None:
    """The helper never writes to the user's terminal (a TUI's screen) nor reads from it."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def run_helper(sock: socket.socket, parent_pid: int, load: Callable[[], list[VerbFamily]]) -> None:
    """The forked child's whole life: serve the tool, then undo and exit. Never returns."""
    code = 0
    try:
        die_with_parent(parent_pid)
        quiet_std_streams()
        # Ctrl-C and a hang-up reach the terminal's process group, helper included: the tool
        # decides when to stop, the helper follows it (EOF or the parent-death signal).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        try:
            families, load_error = load(), None
        except Exception as exc:  # still answer, and say why every verb is missing
            families, load_error = [], f"{type(exc).__name__}: {exc}"
        helper = Helper(families, load_error=load_error)

        def on_term(_signum: int, _frame: object) -> None:
            helper.shutdown()
            os._exit(0)

        signal.signal(signal.SIGTERM, on_term)
        helper.serve(sock)
        helper.shutdown()
    except BaseException:  # noqa: BLE001 - the helper's exit must not run the tool's code
        code = 1
    finally:
        sys.stdout.flush() if sys.stdout else None
        os._exit(code)
