"""The one bridge from the engine to the screens: a Textual thread worker posts typed messages.

A screen that runs an engine command starts it with ``relay.engine_run.EngineRun`` and hands it
to :meth:`EngineBridge.follow_engine`; a screen that shows a run directory hands the directory to
:meth:`EngineBridge.follow_journal`. Either way one ``@work(thread=True)`` worker reads, and posts
to the screen:

* :class:`EngineEvent` for each event (handled with ``@on(EngineEvent)``);
* :class:`EngineSnapshots` carrying the newest ``HistogramSnapshot`` per metric; an undelivered
  one is superseded by the next (``can_replace``), so a flood of snapshots costs one handler
  call per screen cycle, never one per snapshot;
* :class:`JournalGrew` when a journal's follower has new events; they wait in the message's
  :class:`PendingEvents` and one handler call takes them all (the later messages coalesce);
* :class:`EngineEnded` when the command ended: its exit status, or why it never started a run.

Every message names its source (the ``EngineRun`` or the ``PendingEvents``), so a screen drops
what a run it no longer shows sends late.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from textual import work
from textual.message import Message
from textual.message_pump import MessagePump
from textual.worker import get_current_worker

from aorta_tui.core.events import Event, HistogramSnapshot
from aorta_tui.relay.engine_run import EngineRun, EngineRunError


class EngineEvent(Message):
    """One event of ``run``'s stream (a snapshot goes in :class:`EngineSnapshots`)."""

    bubble = False  # for the screen that runs it; the app has nothing to do with it

    def __init__(self, run: EngineRun, event: Event) -> None:
        super().__init__()
        self.run = run
        self.event = event


class EngineSnapshots(Message):
    """The newest snapshot of every metric ``run`` streamed so far, and how many arrived."""

    bubble = False

    def __init__(self, run: EngineRun, latest: dict[str, HistogramSnapshot], arrived: int) -> None:
        super().__init__()
        self.run = run
        self.latest = latest
        self.arrived = arrived

    def can_replace(self, message: Message) -> bool:
        # A later one of the same run holds everything this one does, newer.
        return isinstance(message, EngineSnapshots) and message.run is self.run


class EngineEnded(Message):
    """``run`` ended with ``exit_code``; ``error`` says why when it never started a run."""

    bubble = False

    def __init__(self, run: EngineRun, exit_code: int | None, error: str = "") -> None:
        super().__init__()
        self.run = run
        self.exit_code = exit_code
        self.error = error


class PendingEvents:
    """Events a journal follower read that its screen has not taken yet (thread-safe)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._events: list[Event] = []

    def put(self, events: list[Event]) -> None:
        with self._lock:
            self._events.extend(events)

    def take(self) -> list[Event]:
        with self._lock:
            events, self._events = self._events, []
        return events


class JournalGrew(Message):
    """``pending`` holds new events of a followed journal."""

    bubble = False

    def __init__(self, pending: PendingEvents) -> None:
        super().__init__()
        self.pending = pending

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, JournalGrew) and message.pending is self.pending


class JournalFailed(Message):
    bubble = False

    def __init__(self, pending: PendingEvents, error: BaseException) -> None:
        super().__init__()
        self.pending = pending
        self.error = error


class EngineBridge:
    """Mixin for a screen: the workers that read an engine and post the messages above."""

    def _poster(self) -> Callable[[Message], bool]:
        """The screen's post_message (thread-safe), from the screen this is mixed into."""
        assert isinstance(self, MessagePump), "EngineBridge is mixed into a Screen"
        return self.post_message

    @work(thread=True, group="engine", exit_on_error=False, name="engine run")
    def follow_engine(self, run: EngineRun) -> None:
        """Read ``run`` (started) to its end, posting each event; never raises into the app."""
        post = self._poster()
        worker = get_current_worker()
        latest: dict[str, HistogramSnapshot] = {}
        arrived = 0
        try:
            for event in run.events():
                if worker.is_cancelled:
                    break
                if isinstance(event, HistogramSnapshot):
                    latest[event.probe_set] = event
                    arrived += 1
                    post(EngineSnapshots(run, dict(latest), arrived))
                else:
                    post(EngineEvent(run, event))
            code = run.wait()
        except EngineRunError as exc:
            post(EngineEnded(run, run.returncode, exc.render()))
            return
        post(EngineEnded(run, code))

    @work(thread=True, group="journal", exit_on_error=False, name="journal")
    def follow_journal(self, pending: PendingEvents) -> None:
        """Read ``pending.run_dir``'s journal from the start, then follow it until
        ``pending.stop`` is set."""
        from aorta_tui.store.journal_follow import follow_journal

        post = self._poster()

        def deliver(events: list[Event]) -> None:
            pending.put(events)
            post(JournalGrew(pending))

        try:
            follow_journal(pending.run_dir, deliver, pending.stop)
        except Exception as exc:  # shown, never a crash
            if not pending.stop.is_set():
                post(JournalFailed(pending, exc))
