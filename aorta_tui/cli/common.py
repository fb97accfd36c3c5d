"""What every command shares: turning engine errors into messages and typed exit codes.

Command modules import only typer and this module at import time, so ``aorta-tui --help``
stays fast; each command imports the engine inside its body.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

import typer

from aorta_tui.core.errors import AortaError, ExitCode
from aorta_tui.core.numerals import MAX_COUNT, MAX_SEED, ascii_digits

P = ParamSpec("P")
R = TypeVar("R")

INTERNAL_ERROR = int(ExitCode.INTERNAL)


def new_app(help_text: str) -> typer.Typer:
    return typer.Typer(
        help=help_text,
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )


def cli_command(fn: Callable[P, R]) -> Callable[P, R]:
    """Wrap a command so that no traceback reaches the user.

    ``AortaError`` prints its message (location, fix) and exits with its typed code;
    Ctrl-C exits 130; anything else is a bug: one line on stderr, the traceback in a file.
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except AortaError as exc:
            err(f"error: {exc.render()}")
            raise typer.Exit(int(exc.exit_code)) from None
        except KeyboardInterrupt:
            err("interrupted")
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except BrokenPipeError:
            # `aorta-tui ... | head` closed the pipe: not an error worth a message.
            _silence_stdout()
            raise typer.Exit(0) from None
        except Exception as exc:  # a bug: keep the traceback, spare the terminal
            path = _save_traceback()
            err(f"internal error: {type(exc).__name__}: {exc}\n  traceback saved to {path}; "
                "please report it")
            raise typer.Exit(INTERNAL_ERROR) from None

    return wrapper


@contextlib.contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP stop a long command the way Ctrl-C does (a KeyboardInterrupt: its
    clean-up, its last journal line and its resume hint), not the start-up's quiet exit that
    skips them; a signal ignored by whoever started us (nohup) stays ignored. The handlers
    before are put back after. Main thread only, as every command runs."""

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)
                if signal.getsignal(sig) is not signal.SIG_IGN}
    stopped = False
    try:
        yield
    except KeyboardInterrupt:
        stopped = True
        raise
    finally:
        # stopped: the next presses change nothing, ignored in the kernel, as Python puts
        # SIG_DFL back for its own handlers while it exits (sweep/drive.run_until_done too)
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_IGN if stopped else handler)
        if stopped:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _save_traceback() -> str:
    fd, path = tempfile.mkstemp(prefix="aorta-tui-traceback-", suffix=".txt")
    with os.fdopen(fd, "w") as fh:
        traceback.print_exc(file=fh)
    return path


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def number(*, integer: bool = False, above: float | None = None, at_least: float | None = None,
           at_most: float, unit: str = "") -> Callable[[Any], float | int]:
    """The ``parser=`` of every numeric option: one way to read a number from the command line.

    A finite number (an integer when ``integer``), above ``above`` or at least ``at_least``, and
    at most ``at_most``; anything else is a usage error (exit 2) that click locates at the
    option. A plain ``float`` option takes ``nan``, ``inf`` and ``1e309`` (inf), click's
    ``min=`` lets ``nan`` through (every comparison with it is false), and a plain ``int``
    option takes a 30-digit seed that no JSON reader or recipe check accepts back: each of
    these was an exit 70, a non-JSON ``NaN`` in a file, or a run that could never be resumed.
    """
    what = "an integer" if integer else "a number"
    if unit:
        what += f" of {unit}"

    def parse(value: object) -> float | int:
        got = _read_number(value, integer=integer, what=what)
        low_ok = ((above is None or got > above) and (at_least is None or got >= at_least))
        if not low_ok or got > at_most:
            low = (f"more than {above:g}" if above is not None
                   else f"at least {at_least:g}" if at_least is not None else "")
            high = f"{at_most:d}" if isinstance(at_most, int) else f"{at_most:g}"
            raise typer.BadParameter(f"{_shown(value)} is out of range: give {what}"
                                     f"{' ' + low + ' and' if low else ''} at most {high}")
        return got

    return parse


def _shown(value: object) -> str:
    text = str(value)
    return repr(text[:40] + ("..." if len(text) > 40 else ""))


def _read_number(value: object, *, integer: bool, what: str) -> float | int:
    """``value`` (text, or a default already a number) as a finite int or float."""
    if isinstance(value, bool):
        raise typer.BadParameter(f"{_shown(value)} is not {what}")
    text = value if isinstance(value, (int, float)) else str(value).strip()
    try:
        if integer:
            if isinstance(text, float) or (isinstance(text, str) and not (
                    len(text) <= 40 and ascii_digits(text.removeprefix("-")))):
                raise ValueError  # no float, no Unicode digits, no more than any option means
            got_int = int(text)
            if abs(got_int) > MAX_SEED:  # past 64 bits: no JSON reader or RNG takes it back
                raise typer.BadParameter(f"{_shown(value)} is out of range: give {what} of at "
                                         f"most {MAX_SEED} either way")
            return got_int
        got = float(text)
    except (ValueError, OverflowError):  # OverflowError: an int too large for a float
        raise typer.BadParameter(f"{_shown(value)} is not {what}") from None
    if not math.isfinite(got):
        raise typer.BadParameter(f"{_shown(value)} is not a finite number")
    return got


def seconds(*, at_least: float | None = None, at_most: float = 366 * 86400.0) -> Callable[[Any], float]:
    """The ``parser=`` of a duration option: a finite number of seconds, above 0 (or at least
    ``at_least``) and at most ``at_most`` (a year), else a usage error (exit 2) naming the option.
    """
    parse = number(above=0.0 if at_least is None else None, at_least=at_least, at_most=at_most,
                   unit="seconds")
    return lambda value: float(parse(value))


def seed_number() -> Callable[[Any], int]:
    """The ``parser=`` of ``--seed``: the recipe key's range (0 to 2**63-1), so a run started
    with it can be resumed from its ``recipe.resolved.yaml``."""
    parse = number(integer=True, at_least=0, at_most=MAX_SEED)
    return lambda value: int(parse(value))


def count(*, at_least: int = 1, at_most: int = MAX_COUNT) -> Callable[[Any], int]:
    """The ``parser=`` of a count option (trials, streams, iterations, a pid): an integer in
    ASCII digits from ``at_least`` to ``at_most``, else a usage error (exit 2) naming the option.
    A plain ``int`` option took Arabic-Indic digits and any size. ``at_least=0`` where the
    command checks its own minimum with a fix to offer (``--budget 0``, ``--nodes 0``): the
    parser still refuses what is never a count (negative, not an integer) before that."""
    parse = number(integer=True, at_least=at_least, at_most=at_most)
    return lambda value: int(parse(value))


def check_output_file(path: os.PathLike[str] | str | None, *, option: str = "-o") -> None:
    """Refuse, before any work, an ``-o FILE`` that names no file to replace: a directory, a
    FIFO, a device or a socket there, or a link to one (``-o /dev/stdout``). The document is
    written atomically, a rename over the name: it would replace the FIFO, or as root the
    link in /dev, with a regular file (exit 2, naming the option). A folder this user cannot
    write in is exit 3 (:func:`_check_output_folder`)."""
    if path is None:
        return
    import stat

    from aorta_tui.core.errors import UsageError
    from aorta_tui.core.inputs import describe_kind

    try:
        mode = os.stat(path).st_mode  # follows a link: /dev/stdout is one to a pipe or a tty
    except (FileNotFoundError, PermissionError):  # EACCES: a folder above is not searchable
        _check_output_folder(path, option, file_there=False)
        return
    except OSError:
        return  # e.g. a loop of links: the write says what is wrong, naming the file
    if not stat.S_ISREG(mode):
        raise UsageError(f"{option} {path} is {describe_kind(mode)}, not a file to write",
                         hint=f"give {option} a file name; the document replaces it atomically "
                              "(the event stream is --json's, on stdout)")
    _check_output_folder(path, option, file_there=True)


def _check_output_folder(path: os.PathLike[str] | str, option: str, *, file_there: bool) -> None:
    """The folder an ``-o FILE`` is written in (made where missing) must be writable by this
    process: the document is a temporary file there, renamed over the name. Under ``sudo`` this
    process is already the invoking user, so a root-only folder is refused here, before any work,
    not by an exit 70 after a whole trace (seen on the H200, 2026-12-04).

    ``file_there``: the caller found the file (so it is written in its folder, and a refusal
    names the file, whose it is). Else one climb, up from the file's folder to the nearest folder
    this user can see: that is the one the writer makes the missing ones below, and the one a
    refusal names (``permission_problem`` is handed it rather than climbing again). The path is
    climbed as given, so a relative ``-o`` is named relative, as ``permission_problem`` names it."""
    import stat
    from pathlib import Path

    from aorta_tui.core.errors import UsageError
    from aorta_tui.core.inputs import permission_problem

    given = Path(path)
    if file_there:
        if not os.access(given.parent, os.W_OK | os.X_OK):  # real ids: the same as the effective ones here
            raise permission_problem(path, nearest=given)
        return
    folder, denied = given.parent, False
    while True:
        try:
            mode = os.stat(folder).st_mode
            break
        except FileNotFoundError:  # the writer makes the missing folders below the one found
            pass
        except PermissionError:  # a folder above cannot be searched by this user: whose it is
            denied = True
        if folder == folder.parent:
            return  # nothing this user can see (no working directory): the write says what is wrong
        folder = folder.parent
    if denied:
        raise permission_problem(path, nearest=folder)
    if not stat.S_ISDIR(mode):
        raise UsageError(f"{option} {path}: {os.path.abspath(folder)} is not a folder",
                         hint=f"give {option} a file in a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise permission_problem(path, nearest=folder)
