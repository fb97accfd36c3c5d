"""How a ``--json`` event stream ends when its command stops before, or without, its own
``run_finished``: the one ending every command's stream uses (docs/cli.md, docs/events.md).

A stop is a ``warning`` (code ``error``) with the message for people, then a failed
``run_finished`` whose exit code is the one the command exits with and whose summary holds the
error's parts a program reads (message, location, fix, a recipe's every problem); a Ctrl-C is an
interrupted ``run_finished`` (130). Every line is an event ``event_from_dict`` accepts: until
issue 36, ``sweep run --json`` printed an ``error`` line of its own that no reader could type.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aorta_tui.core.errors import AortaError, ExitCode
from aorta_tui.core.events import Event, JsonSink, RunFinished, RunStarted, RunWarning


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


class EndedStream:
    """``--json``'s sink for an engine that says its own ``run_started`` and ``run_finished``
    (a sweep, a policy sweep): it remembers whether the run said them, so a run stopped before
    either still ends its stream typed (:meth:`end`)."""

    def __init__(self, source: str) -> None:
        self._sink = JsonSink()
        self.source = source  # run_started's source, where the run was refused before its own
        self.run_id = ""
        self.started = self.finished = False

    def emit(self, event: Event) -> None:
        if isinstance(event, RunStarted) and not self.started:
            self.started, self.run_id = True, event.run_id
        elif isinstance(event, RunFinished) and event.run_id == self.run_id:
            self.finished = True
        self._sink.emit(event)

    def close(self) -> None:
        self._sink.close()

    def end(self, exc: BaseException) -> None:
        """``run_started`` (no run directory: the run was refused before it had one) unless the
        run said it, then the stop as a warning and a failed ``run_finished``."""
        if not self.started:
            self.emit(RunStarted("", source=self.source, run_dir="", total=0))
        if not self.finished:
            for event in ending_events(self.run_id, exc):
                self.emit(event)


@contextmanager
def ends_typed(stream: EndedStream | None) -> Iterator[None]:
    """Around a command's body: an error (a bug too: exit 70) ends ``stream`` typed before it
    propagates to the CLI, which prints it for people on stderr and exits with its code."""
    try:
        yield
    except Exception as exc:
        if stream is not None:
            stream.end(exc)
        raise
