"""What every aorta-tui screen shares: header, footer, global keys, errors as notifications."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Header
from textual.worker import Worker, WorkerState

if TYPE_CHECKING:
    from aorta_tui.tui.host import AortaHost


def busy(worker: Worker[Any] | None) -> bool:
    """Whether ``worker`` has not finished. A thread worker cannot be stopped (cancelling one
    only marks it), so a timer that started one per tick behind a read that hangs would pile
    threads up: a tick that finds its last worker busy is skipped, the next one asks again."""
    return worker is not None and worker.state in (WorkerState.PENDING, WorkerState.RUNNING)


M = TypeVar("M", bound=Message)


def answer_from_worker(screen: Screen[Any], read: Callable[[], M], failed: Callable[[], M], *, group: str,
                       name: str) -> None:
    """Run ``read`` in a thread worker of ``screen`` and post the answer it returns; when it
    raises, post ``failed()`` instead (then the error ends the worker, which says it). Always
    answered: the answer's handler clears the screen's "a read runs" state (LatestRead), so a
    read that fails never holds the next one back."""

    def work() -> None:
        answer: M | None = None
        try:
            answer = read()
        finally:
            screen.post_message(answer if answer is not None else failed())

    screen.run_worker(work, thread=True, group=group, exit_on_error=False, name=name)


class AortaScreen(Screen):
    """A full screen of the app. Subclasses implement ``compose_body`` and their commands."""

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    TITLE_TEXT = "aorta-tui"
    # The widget that has focus on arrival and after escape, so that the number keys that
    # switch screens are never typed into a text field by accident.
    MAIN_WIDGET = ""
    AUTO_FOCUS = "*"  # Textual's: what has focus on arrival; a subclass's is its MAIN_WIDGET

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.AUTO_FOCUS = cls.MAIN_WIDGET or "*"

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        yield from self.compose_body()
        yield Footer()

    def compose_body(self) -> ComposeResult:  # pragma: no cover - every screen overrides
        yield from ()

    def on_mount(self) -> None:
        self.title = self.TITLE_TEXT

    def from_thread(self, callback: Callable[..., object], *args: object, **kwargs: object) -> None:
        """``call_from_thread`` for our own threads, which may outlive the app by a moment."""
        try:
            app = self.app
        except RuntimeError:  # NoActiveAppError: the screen is gone with its app
            return
        if not app.is_running:
            return
        try:
            app.call_from_thread(callback, *args, **kwargs)
        except RuntimeError as exc:
            if "not running" not in str(exc):  # only "the app exited meanwhile" is expected
                raise

    def action_focus_main(self) -> None:
        if self.MAIN_WIDGET:
            self.query_one(self.MAIN_WIDGET).focus()

    def display_path(self, path: object) -> str:
        """A path as the user would type it: relative to the working directory when inside it."""
        from pathlib import Path

        p = Path(str(path))
        try:
            return str(p.relative_to(self.aorta.cwd))
        except ValueError:
            return str(p)

    @property
    def aorta(self) -> AortaHost:
        # the app is an AortaApp, which satisfies AortaHost; it is not imported here because
        # it imports every screen
        return cast("AortaHost", self.app)

    def palette_commands(self) -> Iterable[SystemCommand]:
        """This screen's actions for the command palette (each described key binding has one)."""
        for binding in self.BINDINGS:
            if isinstance(binding, Binding) and binding.description and binding.action != "focus_main":
                yield SystemCommand(
                    f"{self.TITLE_TEXT}: {binding.description}",
                    f"key {binding.key}",
                    lambda action=binding.action: self.run_action(action),
                )

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker that raised is reported as a notification; the screen keeps running."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            exc = event.worker.error
            render = getattr(exc, "render", None)
            message = render() if callable(render) else f"{type(exc).__name__}: {exc}"
            self.notify(message, title=event.worker.name or "error", severity="error", timeout=12)
