"""SVG snapshots of every screen at 80x24 and 160x48 (pytest-textual-snapshot).

Each screen shows fixed data recorded from real engine runs (tests/tui/fixtures): a probe
sweep's run directory, two envsnap snapshots, a trace engine histogram of a real bpftrace run,
a policy report. `pytest tests/tui/test_tui_snapshots.py --snapshot-update` accepts new looks;
`python tests/tui/publish_screenshots.py` then copies the accepted SVGs to docs/screenshots/.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from textual.widgets import Input, Select
from tui_support import DEMO_RUN, FIXED_FACTS, FIXTURES, LIVE_RUN, launching_run, workspace

from aorta_tui.core.events import event_from_dict
from aorta_tui.store.lock import RunLock
from aorta_tui.tui.app import AortaApp

SIZES = {"80x24": (80, 24), "160x48": (160, 48)}


async def _settle(pilot, predicate=lambda: True, timeout: float = 30.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        await pilot.pause(0.05)
    app = pilot.app
    for widget in app.screen.query("Input, TextArea"):
        widget.cursor_blink = False  # a blinking cursor would make snapshots flaky
    app.clear_notifications()
    await pilot.pause(0.3)  # a redraw of every timer-driven widget


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    root = workspace(tmp_path)
    shutil.copytree(FIXTURES / "recipes", root / "recipes")
    monkeypatch.chdir(root)
    yield root
    monkeypatch.delenv("TZ")
    time.tzset()


def _grid_drawn(screen) -> bool:  # noqa: ANN001
    """The matrix grid has its rows (it is drawn on the redraw timer, after the state is read)."""
    from aorta_tui.tui.widgets.matrix_grid import MatrixGrid

    return screen.query_one(MatrixGrid).row_count > 1 and not screen._dirty


def _widths_measured(table) -> bool:  # noqa: ANN001
    """Every column as wide as its widest cell: DataTable measures new rows when its message
    pump is idle, so a loaded box could snapshot the header at its labels' widths (seen 1 run
    in 6: the columns drawn narrower than the rows below them)."""
    from rich.cells import cell_len

    for index, column in enumerate(table.ordered_columns):
        cells = [table.get_row_at(r)[index] for r in range(table.row_count)]
        widest = max((cell_len(str(c)) for c in cells), default=0)
        if column.content_width < widest:
            return False
    return True


def _app(ws: Path, **kwargs) -> AortaApp:  # noqa: ANN003
    return AortaApp(cwd=ws, output_dir=ws / "aorta-out", machine_facts=FIXED_FACTS, **kwargs)


@pytest.mark.parametrize("size", SIZES)
def test_home(ws: Path, size: str, snap_compare) -> None:
    async def ready(pilot) -> None:  # noqa: ANN001
        from textual.widgets import DataTable

        runs = pilot.app.screen.query_one("#runs", DataTable)
        await _settle(pilot, lambda: runs.row_count == 2 and _widths_measured(runs))

    assert snap_compare(_app(ws), terminal_size=SIZES[size], run_before=ready)


@pytest.mark.parametrize("size", SIZES)
def test_matrix_finished_run(ws: Path, size: str, snap_compare) -> None:
    async def ready(pilot) -> None:  # noqa: ANN001
        screen = pilot.app.screen
        await _settle(pilot, lambda: screen.state is not None and screen.state.status == "completed")
        await _settle(pilot, lambda: _grid_drawn(screen))  # else the keys move a cursor on nothing
        await pilot.press("down", "right")  # a failing trial's detail

    assert snap_compare(_app(ws, start_run=ws / "aorta-out" / DEMO_RUN), terminal_size=SIZES[size],
                        run_before=ready)


def test_matrix_live_run(ws: Path, snap_compare) -> None:
    run = ws / "aorta-out" / LIVE_RUN
    lock = RunLock(run)
    lock.acquire()  # an orchestrator holds the run: it shows as running, with its ETA

    async def ready(pilot) -> None:  # noqa: ANN001
        screen = pilot.app.screen
        await _settle(pilot, lambda: screen.state is not None and screen.events_seen and screen.orchestrator_alive)
        await _settle(pilot, lambda: _grid_drawn(screen))
        await pilot.press("down", "right", "right")  # the running trial

    try:
        assert snap_compare(_app(ws, start_run=run), terminal_size=(160, 48), run_before=ready)
    finally:
        lock.release()


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("size", SIZES)
def test_matrix_launching_trial(ws: Path, size: str, snap_compare) -> None:
    # issue 38 item 1: a trial in its start-up (trial_launch, no trial_started yet) is running
    run = launching_run(ws)
    lock = RunLock(run)
    lock.acquire()

    async def ready(pilot) -> None:  # noqa: ANN001
        screen = pilot.app.screen
        await _settle(pilot, lambda: screen.state is not None and screen.events_seen >= 10
                      and screen.orchestrator_alive)
        await _settle(pilot, lambda: _grid_drawn(screen))
        await pilot.press("down", "down", "right", "right")  # the launching trial

    try:
        assert snap_compare(_app(ws, start_run=run), terminal_size=SIZES[size], run_before=ready)
    finally:
        lock.release()


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("size", SIZES)
def test_recipe_editor_with_an_error(ws: Path, size: str, snap_compare) -> None:
    async def ready(pilot) -> None:  # noqa: ANN001
        app = pilot.app
        await pilot.pause()
        app.open_recipe(Path("recipes/triage.yaml"))
        await pilot.pause()
        screen = app.get_screen("recipe")
        await _settle(pilot, lambda: bool(screen.issues))
        await pilot.press("escape", "enter")  # jump to the first issue

    assert snap_compare(_app(ws), terminal_size=SIZES[size], run_before=ready)


@pytest.mark.parametrize("size", SIZES)
def test_trace_monitor(ws: Path, size: str, snap_compare) -> None:
    data = json.loads((FIXTURES / "trace" / "ioctl-snapshot.json").read_text())

    async def ready(pilot) -> None:  # noqa: ANN001
        await pilot.press("4")
        screen = pilot.app.screen
        screen.query_one("#probe-set", Select).value = "ioctl"
        screen.query_one("#trace-target", Input).value = "python issue_ioctls.py"
        screen.offer(event_from_dict(data))
        await _settle(pilot, lambda: screen.redraws >= 1)

    assert snap_compare(_app(ws), terminal_size=SIZES[size], run_before=ready)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("size", SIZES)
def test_trace_monitor_launch_to_start(ws: Path, size: str, snap_compare) -> None:
    # the last round of recorded device-metric snapshots (the lead re-records them on the H200)
    lines = (FIXTURES / "launch_to_start_snapshots.jsonl").read_text().splitlines()
    last = {}
    for line in lines:
        data = json.loads(line)
        last[data["probe_set"]] = data

    async def ready(pilot) -> None:  # noqa: ANN001
        await pilot.press("4")
        screen = pilot.app.screen
        screen.query_one("#trace-target", Input).value = "python3 my_program.py"
        for data in last.values():
            screen.offer(event_from_dict(data))
        await _settle(pilot, lambda: screen.redraws >= 1)

    assert snap_compare(_app(ws), terminal_size=SIZES[size], run_before=ready)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("size", SIZES)
def test_trace_monitor_launch_parts(ws: Path, size: str, snap_compare) -> None:
    # issue 34: the default mode's live split of launch -> start (host / push / GPU queue) and
    # the program's cost share, from a fake collector record stream through the real join
    from launch_parts_stream import snapshots

    async def ready(pilot) -> None:  # noqa: ANN001
        await pilot.press("4")
        screen = pilot.app.screen
        screen.query_one("#trace-target", Input).value = "python3 train.py"
        for snap in snapshots():
            screen.offer(snap)
        await _settle(pilot, lambda: screen.redraws >= 1)

    assert snap_compare(_app(ws), terminal_size=SIZES[size], run_before=ready)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("size", SIZES)
def test_env_diff(ws: Path, size: str, snap_compare) -> None:
    async def ready(pilot) -> None:  # noqa: ANN001
        await pilot.press("5")
        screen = pilot.app.screen
        screen.set_paths(Path("env/cpu-box-plain.json"), Path("env/cpu-box-knobs.json"))
        await _settle(pilot, lambda: bool(screen._rows))
        await pilot.press("down", "down")

    assert snap_compare(_app(ws), terminal_size=SIZES[size], run_before=ready)


@pytest.mark.parametrize("size", SIZES)
def test_policy(ws: Path, size: str, snap_compare) -> None:
    async def ready(pilot) -> None:  # noqa: ANN001
        await pilot.press("6")
        screen = pilot.app.screen
        screen.load_report(Path("policy/policy.json"))
        await _settle(pilot, lambda: screen.report is not None)

    assert snap_compare(_app(ws), terminal_size=SIZES[size], run_before=ready)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("size", SIZES)
def test_help(ws: Path, size: str, snap_compare) -> None:
    async def ready(pilot) -> None:  # noqa: ANN001
        await pilot.press("3", "question_mark")
        await _settle(pilot)

    assert snap_compare(_app(ws), terminal_size=SIZES[size], run_before=ready)


def test_light_theme(ws: Path, snap_compare) -> None:
    async def ready(pilot) -> None:  # noqa: ANN001
        screen = pilot.app.screen
        await _settle(pilot, lambda: screen.state is not None and screen.state.status == "completed")

    assert snap_compare(_app(ws, start_run=ws / "aorta-out" / DEMO_RUN, light=True), terminal_size=(80, 24),
                        run_before=ready)
