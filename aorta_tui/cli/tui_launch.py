"""Start the TUI after checking that there is a terminal to draw on.

Under ``sudo`` the terminal still belongs to the invoking user: sudo's ``env_reset`` may drop
TERM, LANG and COLORTERM, so they are recovered from the sudo user's login environment where
missing (a UTF-8 locale keeps the box-drawing characters intact).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from aorta_tui.core.errors import EnvironmentProblem, UsageError

TERMINAL_VARS = ("TERM", "COLORTERM", "LANG", "LC_ALL", "LC_CTYPE", "NO_COLOR")


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


def _sudo_user_environ() -> dict[str, str]:
    """The invoking user's variables from sudo's parent process (the user's shell), if readable."""
    try:
        ppid = os.getppid()
        data = Path(f"/proc/{ppid}/environ").read_bytes()
        # sudo itself is our parent; its environment is the user's, before env_reset.
        pairs = (item.split(b"=", 1) for item in data.split(b"\0") if b"=" in item)
        return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}
    except OSError:
        return {}


def keep_invoking_terminal(environ: dict[str, str] | None = None) -> None:
    """Under sudo, fill TERM/locale variables that sudo dropped from the invoking user's."""
    if "SUDO_UID" not in os.environ:
        return
    source = environ if environ is not None else _sudo_user_environ()
    for name in TERMINAL_VARS:
        if name not in os.environ and source.get(name):
            os.environ[name] = source[name]
    if not any(os.environ.get(n) for n in ("LC_ALL", "LC_CTYPE", "LANG")):
        os.environ["LANG"] = "C.UTF-8"
    os.environ.setdefault("TERM", "xterm-256color")


def launch_tui(*, start_run: Path | None = None, start_recipe: Path | None = None) -> None:
    require_terminal()
    keep_invoking_terminal()
    require_toolkit()
    from aorta_tui.tui.app import AortaApp

    app = AortaApp(start_run=start_run, start_recipe=start_recipe)
    app.run()
    for line in app.farewell():  # on the terminal again, after the TUI's screen is gone
        print(line)
