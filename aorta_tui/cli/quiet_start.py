"""The program's first lines (issue 37 item 10): Ctrl-C while it is still importing is one line
and exit 130, not a traceback from deep inside an import. Imported first by ``cli/entry.py``
(both ways in: the ``aorta-tui`` script and ``python -m aorta_tui``); ``cli/main.py`` adds
SIGTERM and SIGHUP and hands SIGINT back to KeyboardInterrupt once a command runs.
"""

from __future__ import annotations

# the C module, already loaded (`import signal` builds enums for milliseconds); typeshed has
# no stub for it, hence the one ignore
import _signal  # type: ignore[import-not-found]
import os
import sys


def _interrupted_while_starting(_signum: int, _frame: object) -> None:
    # Ctrl-C (or SIGTERM, SIGHUP: cli/main.py) while the program is still importing: nothing
    # has started that needs cleaning up, so leave at once with the one line every interrupted
    # command prints (not a traceback from deep inside an import, nor a silent death).
    # Leave also when the line cannot be written (EIO: a hangup closed the terminal): raising
    # instead, inside `aorta-tui edit`'s running TUI, made an internal error and a traceback
    # file in /tmp.
    try:
        os.write(2, b"interrupted\n")
    finally:
        os._exit(130)


def _started_as_the_program() -> bool:
    """True when this import is the ``aorta-tui`` program starting (its console script, or
    ``python -m aorta_tui``), not a test or a library importing the CLI."""
    argv0 = sys.argv[0] if sys.argv else ""
    name = os.path.basename(argv0)
    return name == "aorta-tui" or (name == "__main__.py" and os.path.basename(os.path.dirname(argv0)) == "aorta_tui")


# The first thing the program does, before any import of ours that takes time (issue 37 item
# 10): from here on Ctrl-C is one line and exit 130; cli/main.py adds SIGTERM and SIGHUP and
# hands SIGINT back to KeyboardInterrupt once a command runs.
if _started_as_the_program() and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, _interrupted_while_starting)

