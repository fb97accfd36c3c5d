"""Start a sweep detached from the caller (the TUI), and cancel one by its run directory.

A detached sweep is an ordinary ``aorta-tui sweep run --json`` in its own session: closing the
TUI or losing the SSH connection does not signal it, and whoever opens the run directory later
re-attaches by following its journal. Its run directory is the one its first ``RunStarted``
event names (never guessed from the files that appear).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from aorta_tui.core import spawn_gate
from aorta_tui.core.errors import RunDirError, UsageError
from aorta_tui.core.events import RunStarted
from aorta_tui.store.journal_reader import parse_journal_line
from aorta_tui.store.lock import lock_holder

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
    """Start the sweep and return its run directory, as its first ``RunStarted`` line names it.

    The sweep runs under a relay (``relay.engine_run --relay``) in its own session: the relay
    copies the orchestrator's ``--json`` events, and its stderr, to
    ``<output>/.launch-<pid>-<ns>.log`` and hands the ``RunStarted`` line over a pipe (the
    handshake), so nothing reaches the caller's terminal and the run outlives the caller.
    """
    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    args = ["sweep", "run", "--json", "--output", str(output)]
    if recipe_path is not None:
        args += ["--recipe", str(recipe_path)]
    if resume is not None:
        args += ["--resume", str(resume)]
    args += list(extra_args)
    if command:
        args += ["--", *command]
    log_path = output / f".launch-{os.getpid()}-{time.time_ns()}.log"
    with open(log_path, "wb") as log:
        relay = spawn_gate.popen([sys.executable, "-m", "aorta_tui.relay.engine_run", "--relay", str(log_path),
                                  "--", *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=log, start_new_session=True)
    # Reap it whenever it ends, so a long-lived TUI collects no zombies.
    threading.Thread(target=relay.wait, name=f"reap-{relay.pid}", daemon=True).start()
    try:
        started = _handshake(relay, wait_s)
    finally:
        assert relay.stdout is not None
        relay.stdout.close()
    if started is None or not started.run_dir:  # a refused sweep's stream names no run
        try:
            code: int | None = relay.wait(5.0)
        except subprocess.TimeoutExpired:
            code = None
        status = f"exit {code}" if code is not None else "no run_started line"
        raise UsageError(f"the sweep did not start ({status}): {launch_failure(log_path)}")
    return Path(started.run_dir)


def launch_failure(log_path: Path, limit: int = 64 << 10) -> str:
    """One readable line for why a detached sweep did not start: the message and fix its
    ``--json`` stream ended with (the failed ``run_finished``'s summary: a raw JSON line filled
    most of the TUI's screen), else its last ``error:`` line, else its last line; the whole log
    is at ``log_path``."""
    import json

    try:
        with open(log_path, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - limit))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError as exc:
        return f"its log {log_path} cannot be read ({exc.strerror or exc})"
    plain = []
    for line in reversed(lines):
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            plain.append(line.strip())
            continue
        ending = _failure_said(doc)
        if ending is not None:
            return ending
    said = [ln for ln in plain if ln.startswith("error:")] or [ln for ln in plain if ln]
    return said[0].removeprefix("error:").strip()[:500] if said else f"see {log_path}"


def _failure_said(doc: object) -> str | None:
    """``location: message (fix: hint)`` of a failed ``run_finished`` line, else None."""
    if not (isinstance(doc, dict) and doc.get("event") == "run_finished"
            and doc.get("status") == "failed" and isinstance(doc.get("summary"), dict)):
        return None
    summary = doc["summary"]
    message = summary.get("message") or summary.get("error")
    if not isinstance(message, str) or not message:
        return None
    where = f"{summary['location']}: " if summary.get("location") else ""
    fix = f" (fix: {summary['hint']})" if summary.get("hint") else ""
    return f"{where}{message}{fix}"


def _handshake(relay: subprocess.Popen[bytes], wait_s: float) -> RunStarted | None:
    """The ``RunStarted`` the relay hands over; None when it closed the pipe without one."""
    assert relay.stdout is not None
    fd = relay.stdout.fileno()
    deadline = time.monotonic() + wait_s
    data = b""
    while b"\n" not in data:
        ready, _w, _x = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise RunDirError(f"the sweep started (pid {relay.pid}) but announced no run within {wait_s:.0f}s",
                              hint="see the .launch-*.log in the output directory")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return None
        data += chunk
    event, _why = parse_journal_line(data.split(b"\n", 1)[0])
    return event if isinstance(event, RunStarted) else None


def cancel_run(run_dir: str | Path, *, sig: int = signal.SIGINT) -> int:
    """Ask the orchestrator holding the run's lock to stop (as Ctrl-C would). Returns its pid."""
    holder = lock_holder(Path(run_dir))
    if holder is None:
        raise RunDirError(f"{run_dir} is not running", hint="nothing to cancel; resume it to continue")
    if holder.pid is None:
        # Held, and the lock file does not name a live process (yet): signalling a guessed pid
        # could hit an unrelated process.
        raise RunDirError(f"{run_dir} is running, and its orchestrator's pid is not known yet",
                          hint="try again in a moment")
    pid = holder.pid
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        raise RunDirError(f"the orchestrator of {run_dir} (pid {pid}) is gone") from None
    return pid
