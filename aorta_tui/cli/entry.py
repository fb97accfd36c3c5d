"""The ``aorta-tui`` program's first lines: a bare ``aorta-tui`` opens the TUI at once.

Building the command line (typer, click and every command module, ``cli/main.py``) costs
0.3-0.6 s on a loaded 2-core box, all of it before the TUI's first frame, and a bare
``aorta-tui`` uses none of it. Every other invocation goes to ``cli/main.py`` unchanged.
"""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_while_starting(_signum: int, _frame: object) -> None:
    # Ctrl-C while the TUI is still importing: nothing has started, leave with the one line
    # every interrupted command prints (cli/main.py does the same for the other commands).
    os.write(2, b"interrupted\n")
    os._exit(130)


def run() -> None:
    if sys.argv[1:]:  # a command, an option (--batch, --help, --version): the whole CLI
        from aorta_tui.cli.main import run as run_command_line

        run_command_line()
        return
    sys.exit(_tui())


def _drop_privileges_under_sudo() -> None:
    """Under sudo, the TUI too becomes the invoking user before it touches anything, with the
    privileged helper forked first (cli/main.py does this at import for every command; the
    TUI's path does not import it)."""
    if os.geteuid() == 0 and "SUDO_UID" in os.environ:
        from aorta_tui.cli.privileged import load_verbs
        from aorta_tui.privsep.boot import drop_if_sudo

        drop_if_sudo(load_verbs)


def _tui() -> int:
    """The TUI, with the exit codes and messages ``cli_command`` gives every command."""
    _drop_privileges_under_sudo()
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted_while_starting)
    from aorta_tui.cli.tui_launch import launch_tui
    from aorta_tui.core.errors import AortaError, ExitCode

    signal.signal(signal.SIGINT, signal.default_int_handler)  # the TUI takes Ctrl-C as a key
    try:
        launch_tui()
    except AortaError as exc:
        print(f"error: {exc.render()}", file=sys.stderr, flush=True)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr, flush=True)
        return int(ExitCode.INTERRUPTED)
    except Exception as exc:  # a bug: the command line's own report (a saved traceback)
        from aorta_tui.cli.common import INTERNAL_ERROR, _save_traceback

        path = _save_traceback()
        print(f"internal error: {type(exc).__name__}: {exc}\n  traceback saved to {path}; "
              "please report it", file=sys.stderr, flush=True)
        return INTERNAL_ERROR
    return 0
