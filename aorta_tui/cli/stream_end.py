"""How a ``--json`` event stream ends when its command stops before, or without, its own
``run_finished``: the one ending every command's stream uses (docs/cli.md, docs/events.md).

A stop is a ``warning`` (code ``error``) with the message for people, then a failed
``run_finished`` whose exit code is the one the command exits with and whose summary holds the
error's parts a program reads (message, location, fix, a recipe's every problem); a Ctrl-C is an
interrupted ``run_finished`` (130). Every line is an event ``event_from_dict`` accepts: until
issue 36, ``sweep run --json`` printed an ``error`` line of its own that no reader could type.
"""

from __future__ import annotations

from typing import Any

from aorta_tui.core.errors import AortaError, ExitCode
from aorta_tui.core.events import Event, RunFinished, RunWarning


def error_summary(exc: BaseException) -> dict[str, Any]:
    """The failed ``run_finished``'s summary: ``error`` (the rendered message, as stderr says
    it), and for the tool's own errors ``message``, ``location``, ``hint`` and, for a recipe,
    ``problems`` (each with ``source``, ``line``, ``column``, ``path``, ``message``, ``hint``)."""
    if not isinstance(exc, AortaError):
        return {"error": f"{type(exc).__name__}: {exc}"}
    out: dict[str, Any] = {"error": exc.render(), "message": exc.message,
                           "location": exc.location, "hint": exc.hint}
    issues = getattr(exc, "issues", None)  # a RecipeValidationError's located problems
    if isinstance(issues, list):
        out["problems"] = [{"source": getattr(exc, "source", None), **i.as_dict()} for i in issues]
    return out


def ending_events(run_id: str, exc: BaseException) -> list[Event]:
    """The events that end a stream stopped by ``exc`` (an unexpected exception is a bug: 70)."""
    if isinstance(exc, KeyboardInterrupt):
        return [RunFinished(run_id, status="interrupted", exit_code=int(ExitCode.INTERRUPTED))]
    code = int(exc.exit_code) if isinstance(exc, AortaError) else int(ExitCode.INTERNAL)
    summary = error_summary(exc)
    return [RunWarning(run_id, message=summary["error"], code="error"),
            RunFinished(run_id, status="failed", exit_code=code, summary=summary)]
