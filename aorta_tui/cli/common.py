"""What every command shares: turning engine errors into messages and typed exit codes.

Command modules import only typer and this module at import time, so ``aorta-tui --help``
stays fast; each command imports the engine inside its body.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from aorta_tui.core.errors import AortaError, ExitCode

F = TypeVar("F", bound=Callable[..., Any])

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


def cli_command(fn: F) -> F:
    """Wrap a command so that no traceback reaches the user.

    ``AortaError`` prints its message (location, fix) and exits with its typed code;
    Ctrl-C exits 130; anything else is a bug: one line on stderr, the traceback in a file.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
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

    return wrapper  # type: ignore[return-value]


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



def seconds(*, at_least: float | None = None, at_most: float = 366 * 86400.0) -> Callable[[Any], float]:
    """The ``parser=`` of a duration option: a finite number of seconds, above 0 (or at least
    ``at_least``) and at most ``at_most`` (a year), else a usage error (exit 2) naming the option.

    A plain ``float`` option takes ``nan``, ``inf`` and ``1e309`` (which parses to inf), and
    click's ``min=`` lets ``nan`` through (every comparison with it is false): a trial timeout
    of either crashed the run, and ``Infinity`` in a run's JSON records is not JSON.
    """

    def parse(value: Any) -> float:
        try:
            number = float(value if isinstance(value, (int, float)) else str(value).strip())
        except (ValueError, OverflowError):  # OverflowError: an int too large for a float
            raise typer.BadParameter(f"{str(value)[:40]!r} is not a number of seconds") from None
        if not math.isfinite(number):
            raise typer.BadParameter(f"{str(value)[:40]!r} is not a finite number of seconds")
        low_ok = number > 0 if at_least is None else number >= at_least
        if not low_ok or number > at_most:
            low = "more than 0" if at_least is None else f"at least {at_least:g}"
            raise typer.BadParameter(f"{str(value)[:40]!r} is out of range: give {low} and at most "
                                     f"{at_most:.0f} seconds")
        return number

    return parse
