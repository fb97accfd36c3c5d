"""Start the TUI after checking that there is a terminal to draw on.

Under ``sudo`` the terminal still belongs to the invoking user: sudo's ``env_reset`` may drop
TERM, LANG and COLORTERM. The tool's start (``privsep/boot.py``) has already put back the
invoking shell's values and become the user before this runs; what is still missing gets a
default here (a UTF-8 locale keeps the box-drawing characters intact).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from aorta_tui.core.errors import EnvironmentProblem, UsageError
from aorta_tui.privsep.boot import TERMINAL_VARS

if TYPE_CHECKING:
    from textual.app import App


def require_terminal() -> None:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(
            "the TUI needs a terminal, and stdin/stdout are not one",
            hint="use `aorta-tui --batch RECIPE` (add --json for one event per line) in scripts",
        )


def require_toolkit() -> None:
    """A Python without Textual (a GPU box's system torch env, say) gets the fix, not exit 70."""
    import importlib

    missing = []
    for name in ("textual", "watchfiles"):
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise EnvironmentProblem(
            f"the TUI needs {' and '.join(missing)}, which {sys.executable} cannot import",
            hint=f"{sys.executable} -m pip install {' '.join(missing)} (or reinstall aorta-tui with "
                 "its dependencies); the headless commands (--batch, trace, queue) work without it")


def keep_invoking_terminal(environ: dict[str, str] | None = None) -> None:
    """Under sudo, fill TERM/locale variables that sudo dropped from ``environ`` (the invoking
    user's, when known: boot.py already restored them from sudo's parent), else defaults."""
    if "SUDO_UID" not in os.environ:
        return
    source = environ or {}
    for name in TERMINAL_VARS:
        if name not in os.environ and source.get(name):
            os.environ[name] = source[name]
    if not any(os.environ.get(n) for n in ("LC_ALL", "LC_CTYPE", "LANG")):
        os.environ["LANG"] = "C.UTF-8"
    os.environ.setdefault("TERM", "xterm-256color")


SHUTDOWN_GRACE_S = 10.0
HANGUP_EXIT = 129  # 128 + SIGHUP: what a program whose terminal hung up exits with
TERMINAL_CHECK_S = 1.0


def watch_the_terminal(fd: int, *, check_s: float = TERMINAL_CHECK_S,
                       grace_s: float = SHUTDOWN_GRACE_S) -> None:
    """A daemon thread: once ``fd`` is no terminal any more (it hung up: an SSH connection
    dropped, tmux was killed), the TUI has ``grace_s`` to end by itself, then the process leaves
    with 129. Textual's writer thread dies on its first write to a hung-up terminal, and its
    driver's close then waits forever on that thread's full queue: `attach` processes were found
    alive 50 minutes after their tmux server was killed. One ``isatty`` (an ioctl) a second."""
    import threading
    import time

    def watch() -> None:
        while os.isatty(fd):
            time.sleep(check_s)
        time.sleep(grace_s)  # a shutdown that finishes ends the process (a daemon thread) first
        leave_hung_up()

    threading.Thread(target=watch, name="terminal-watch", daemon=True).start()


def leave_hung_up() -> NoReturn:
    """Exit 129 at once (the terminal is gone: nothing to give back), first asking each engine
    run the TUI started (a trace, a policy sweep) to stop as a screen's unmount would have: with
    SIGINT, not waited for (their own sessions, so the hangup never reaches them)."""
    engine_run = sys.modules.get("aorta_tui.relay.engine_run")  # not imported: none started
    if engine_run is not None:
        with contextlib.suppress(Exception):  # leaving comes first
            engine_run.interrupt_all()
    os._exit(HANGUP_EXIT)


class _StopSignals:
    """SIGTERM and SIGHUP while the TUI runs: the App is asked to exit, as ctrl+q does, so that
    Textual gives the terminal back (alternate screen, mouse reporting, raw mode off). Left to
    the start-up's quiet exit (cli/quiet_start.py) or to the default (death by the signal),
    the process ended with the terminal still in the TUI's modes. A signal ignored by whoever
    started us (nohup) stays ignored; a second one, or one with no TUI running (before its
    loop starts, after it ends), is the start-up's quiet exit; a SIGHUP whose terminal is gone
    leaves at once with 129."""

    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self, app: App[Any]) -> None:
        self.app = app
        self.received: int | None = None
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> _StopSignals:
        for sig in self.SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                self.previous[sig] = signal.signal(sig, self._stop)
        return self

    def __exit__(self, *_exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def _stop(self, signum: int, frame: object) -> None:
        from aorta_tui.cli.quiet_start import _interrupted_while_starting

        try:
            loop = asyncio.get_running_loop()  # the App's, on this (the main) thread
        except RuntimeError:
            loop = None
        if loop is None or self.received is not None:
            _interrupted_while_starting(signum, frame)
            return
        if signum == signal.SIGHUP and not os.isatty(sys.stdin.fileno()):
            # the terminal hung up (an SSH connection dropped, tmux was killed): nothing to give
            # back, and Textual's close would wait on its dead writer (watch_the_terminal)
            leave_hung_up()
        self.received = signum
        loop.call_soon_threadsafe(self.app.exit)


def launch_tui(*, start_run: Path | None = None, start_recipe: Path | None = None) -> None:
    """The TUI, for every way in (the bare program, `edit`, `attach`). Stopped by SIGTERM, it
    leaves as every interrupted command does (KeyboardInterrupt: "interrupted", exit 130);
    by SIGHUP, with 129 and no word (its terminal is most likely gone)."""
    require_terminal()
    keep_invoking_terminal()
    require_toolkit()
    from aorta_tui.tui.app import AortaApp

    app = AortaApp(start_run=start_run, start_recipe=start_recipe)
    watch_the_terminal(sys.stdin.fileno())
    with _StopSignals(app) as stop:
        app.run()
    if stop.received == signal.SIGHUP:
        raise SystemExit(HANGUP_EXIT)
    for line in app.farewell():  # on the terminal again, after the TUI's screen is gone
        print(line)
    if stop.received is not None:
        raise KeyboardInterrupt
