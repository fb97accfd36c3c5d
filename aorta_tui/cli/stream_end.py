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
from pathlib import Path
from typing import Any

from typer import Exit as TyperExit

from aorta_tui.core.errors import AortaError, ExitCode
from aorta_tui.core.events import (
    Event,
    EventSink,
    JsonSink,
    RunFinished,
    RunStarted,
    RunWarning,
)


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
    """``--json``'s sink that remembers whether the run said its own ``run_started`` and
    ``run_finished``, so the stream always has both: a run stopped before either (refused, a
    bug, a Ctrl-C) gets them here (:meth:`end`), a run whose engine says neither (a queue run)
    gets its start (:meth:`start`) and its document (:meth:`finish`).

    ``run_id``: the run's own id when known before it starts (a queue sweep's points say their
    own ``run_started``, which are not the sweep's); else the first ``run_started``'s, and
    ``refusal_id`` names a run refused before it said one (the agent's directory). ``sink``:
    where the lines go (a ``JsonSink`` on stdout by default; ``trace_stream.open_stream()``
    where the command's own prints must never mix in)."""

    def __init__(self, source: str, *, run_id: str = "", refusal_id: str = "",
                 sink: EventSink | None = None, run_dir: Path | None = None,
                 total: int = 0) -> None:
        self._sink: EventSink = sink if sink is not None else JsonSink()
        self.source, self.run_id, self._own = source, run_id or refusal_id, bool(run_id)
        self._run_dir, self._total = run_dir, total
        self.started = self.finished = False

    def emit(self, event: Event) -> None:
        if not self._own and isinstance(event, RunStarted) and not self.started:
            self.run_id = event.run_id
        if event.run_id == self.run_id:
            self.started = self.started or isinstance(event, RunStarted)
            self.finished = self.finished or isinstance(event, RunFinished)
        self._sink.emit(event)

    def close(self) -> None:
        self._sink.close()

    def start(self) -> None:
        """``run_started`` unless said: its run directory only where one was made."""
        if not self.started:
            made = self._run_dir is not None and self._run_dir.is_dir()
            self.emit(RunStarted(self.run_id, source=self.source,
                                 run_dir=str(self._run_dir) if made else "", total=self._total))

    def finish(self, result: dict[str, Any] | None) -> None:
        """A completed ``run_finished`` with the run's document, unless the run said its own."""
        if not self.finished:
            self.emit(RunFinished(self.run_id, status="completed", exit_code=0,
                                  summary={"result": result} if result is not None else {}))

    def end(self, exc: BaseException) -> None:
        """The stop ``exc`` as the stream's end: ``run_started`` unless said, then the warning
        and the failed (or interrupted) ``run_finished`` unless the run said its own."""
        self.start()
        if not self.finished:
            for event in ending_events(self.run_id, exc):
                self.emit(event)


@contextmanager
def ends_typed(stream: EndedStream | None) -> Iterator[None]:
    """Around a command's body: an error (a bug too: exit 70) or a Ctrl-C ends ``stream``
    typed before it propagates to the CLI, which says it for people on stderr and exits with
    its code. typer's own exit is not a stop: it passes untouched."""
    try:
        yield
    except (Exception, KeyboardInterrupt) as exc:
        if stream is not None and not isinstance(exc, TyperExit):
            stream.end(exc)
        raise
