"""Start a sweep detached from the caller (the TUI), and cancel one by its run directory.

A detached sweep is an ordinary ``aorta-tui sweep run --json`` in its own session: closing the
TUI or losing the SSH connection does not signal it, and whoever opens the run directory later
re-attaches by following its journal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from aorta_tui.core import ownership
from aorta_tui.core.errors import RunDirError, UsageError
from aorta_tui.core.rundir import CREATING_SUFFIX, JOURNAL, lock_holder

LAUNCH_LOG = "launcher.log"


def launch_detached(
    recipe_path: str | Path | None,
    output_dir: str | Path,
    extra_args: Sequence[str] = (),
    *,
    command: Sequence[str] = (),
    resume: str | Path | None = None,
    wait_s: float = 15.0,
) -> Path:
    """Start the sweep and return its run directory once the journal exists.

    The orchestrator's stdout (its ``--json`` events) and stderr go to
    ``<output>/.launch-<pid>-<ns>.log``, so nothing reaches the caller's terminal.
    """
    output = Path(output_dir)
    ownership.make_dirs(output)
    argv = [sys.executable, "-m", "aorta_tui", "sweep", "run", "--json", "--output", str(output)]
    if recipe_path is not None:
        argv += ["--recipe", str(recipe_path)]
    if resume is not None:
        argv += ["--resume", str(resume)]
    argv += list(extra_args)
    if command:
        argv += ["--", *command]
    log_path = output / f".launch-{os.getpid()}-{time.time_ns()}.log"
    before = _run_dirs(output)
    with open(log_path, "wb") as log:
        ownership.adopt(log_path)
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    # Reap it whenever it ends, so a long-lived TUI collects no zombies.
    threading.Thread(target=proc.wait, name=f"reap-{proc.pid}", daemon=True).start()
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if resume is not None and lock_holder(Path(resume)) is not None:
            return Path(resume)
        new = _run_dirs(output) - before
        if new:
            return new.pop()
        if proc.poll() is not None:
            text = log_path.read_text(errors="replace").strip()
            raise UsageError(f"the sweep did not start (exit {proc.returncode}): {text[-2000:]}")
        time.sleep(0.05)
    raise RunDirError(f"the sweep started (pid {proc.pid}) but wrote no journal within {wait_s:.0f}s",
                      hint=f"see {log_path}")


def _run_dirs(output: Path) -> set[Path]:
    """Run directories under ``output`` (not one still being created: it is about to be renamed)."""
    return {p.parent for p in output.glob(f"*/*/{JOURNAL}") if not p.parent.name.endswith(CREATING_SUFFIX)}


def cancel_run(run_dir: str | Path, *, sig: int = signal.SIGINT) -> int:
    """Ask the orchestrator holding the run's lock to stop (as Ctrl-C would). Returns its pid."""
    holder = lock_holder(Path(run_dir))
    if holder is None:
        raise RunDirError(f"{run_dir} is not running", hint="nothing to cancel; resume it to continue")
    if "pid" not in holder:
        # Held, and the lock file does not name a live process (yet): signalling a guessed pid
        # could hit an unrelated process.
        raise RunDirError(f"{run_dir} is running, and its orchestrator's pid is not known yet",
                          hint="try again in a moment")
    pid = int(holder["pid"])
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        raise RunDirError(f"the orchestrator of {run_dir} (pid {pid}) is gone") from None
    return pid
