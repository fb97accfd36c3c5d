"""``attach --plain``: the journal as plain lines, followed until the run ends. No Textual."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from aorta_tui.core.errors import ExitCode
from aorta_tui.core.events import Event, RunFinished, RunStarted
from aorta_tui.core.text import inert
from aorta_tui.store.journal_follow import JournalFollower, format_event_line
from aorta_tui.store.journal_reader import Damage

CHECK_S = 0.5


def _orchestrator_alive(run_dir: Path) -> bool:
    from aorta_tui.store.lock import lock_holder

    return lock_holder(run_dir) is not None


def follow_plain(run_dir: Path, out=None) -> int:  # noqa: ANN001 - a text stream
    """Print every event, then follow. Returns the run's own exit code, what its ``--batch``
    returned (0; 1 when every trial errored, or failures with ``--strict``; 130 when it was
    interrupted), 1 for a failed run without one, and 130 when its orchestrator is gone without
    a ``run_finished``. A script that attaches learns what the run's own command would say."""
    out = out or sys.stdout
    state: dict[str, object] = {"finished": None}
    reported = 0  # damaged journal lines already said

    def report_damage() -> None:
        nonlocal reported
        damaged = follower.reader.damaged
        for damage in damaged[reported:]:
            print(inert(f"warning: {damage.describe(follower.reader.path)}"), file=out, flush=True)
        reported = len(damaged)

    def on_events(events: list[Event]) -> None:
        report_damage()
        for event in events:
            # every field is the journal's text: escapes shown, never obeyed
            print(inert(format_event_line(event)), file=out, flush=True)
            if isinstance(event, RunStarted):
                state["finished"] = None
                state["source"] = event.source
            elif isinstance(event, RunFinished):
                state["finished"] = event

    def on_error(exc: BaseException) -> None:
        print(inert(f"warning: cannot follow {follower.reader.path}: {type(exc).__name__}: {exc}"),
              file=out, flush=True)

    follower = JournalFollower(run_dir, on_events, poll_s=CHECK_S, on_error=on_error)
    follower.start()
    try:
        while True:
            time.sleep(CHECK_S)
            finished = state["finished"]
            alive = _orchestrator_alive(run_dir)
            if finished is not None and not alive:
                break
            if finished is None and not alive:
                # Gone without a last word: read what it wrote just before dying, then say so.
                follower.stop()
                on_events(follower.reader.read_new())
                report_damage()
                if state["finished"] is None:
                    print(f"run stopped without finishing{_damage_note(follower.reader.damaged)}; "
                          f"resume it with `{_resume_command(state.get('source'), run_dir)}`",
                          file=out, flush=True)
                    return 130
                break
    except KeyboardInterrupt:
        print("detached (the run keeps going)", file=out, flush=True)
        return 0
    finally:
        follower.stop()
    report_damage()
    finished = state["finished"]
    assert isinstance(finished, RunFinished)
    return run_exit_code(finished)


# What a run's run_finished may hand on as this command's exit: a journal is a file anyone who
# can write the run directory can edit, and an exit status is one byte (-833 exited 191).
_HANDED_ON = frozenset({ExitCode.OK, ExitCode.FAILURES, ExitCode.USAGE, ExitCode.ENVIRONMENT,
                        ExitCode.INTERRUPTED})


def run_exit_code(finished: RunFinished) -> int:
    """The exit code a finished run recorded; where it is missing (or 0 for a run that did
    not complete), 0 for a completed run and 1 for any other; one aorta-tui never exits with
    (a damaged or forged journal): 1."""
    code, completed = finished.exit_code, finished.status == "completed"
    if not code:
        return 0 if completed else 1
    return code if isinstance(code, int) and not isinstance(code, bool) and code in _HANDED_ON else 1


def _resume_command(source: object, run_dir: Path) -> str:
    """How the engine that wrote this run resumes it (its ``run_started`` names the engine)."""
    import shlex

    where = shlex.quote(str(run_dir))
    if source == "policy":
        return f"aorta-tui policy resume {where}"
    if source == "queue_sweep":
        return f"aorta-tui queue resume {where}"
    return f"aorta-tui sweep run --resume {where}"


def _damage_note(damaged: list[Damage]) -> str:
    if not damaged:
        return ""
    lines = ", ".join(str(d.line) for d in damaged[:5]) + (" ..." if len(damaged) > 5 else "")
    return f" ({len(damaged)} damaged journal line{'s' if len(damaged) != 1 else ''} skipped: {lines})"
