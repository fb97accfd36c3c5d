"""Trial logs as a new user meets them (issue 16 item 1): the README's quickstart run in a fresh
working directory with the DEFAULT output directory (``aorta-out``, so the journal's
``trial_dir`` is relative), then the TUI opened there: the tail under the grid, ``enter`` (the
trial's detail), ``l`` (the whole log); under tmux at 80x24 and 160x48 the tail fills the rows
there are, and a taller terminal shows more of it."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from textual.widgets import Log
from tmux_support import ENTRY, Tmux
from tui_support import FIXED_FACTS, REPO, async_test, wait_for

from aorta_tui.tui.app import AortaApp
from aorta_tui.tui.screens.matrix import MatrixScreen
from aorta_tui.tui.screens.trial import TrialDetailScreen, TrialLogScreen
from aorta_tui.tui.widgets.matrix_grid import MatrixGrid
from tests.engine_support import process_alive

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _batch(cwd: Path, *args: str) -> None:
    subprocess.run([str(ENTRY), "--batch", *args], cwd=cwd, check=True, capture_output=True, timeout=300,
                   env={**os.environ, "NO_COLOR": "1"})


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh directory with a copy of recipes/ after `aorta-tui --batch recipes/quickstart.yaml`."""
    cwd = tmp_path_factory.mktemp("newuser")
    shutil.copytree(REPO / "recipes", cwd / "recipes")
    _batch(cwd, "recipes/quickstart.yaml")
    return cwd


def _run_dir(cwd: Path) -> Path:
    (run,) = (cwd / "aorta-out" / "QUICKSTART").iterdir()
    return run


def _stdout_lines(cwd: Path, trial: str = "baseline-local/trial-000") -> list[str]:
    return (_run_dir(cwd) / "trials" / trial / "stdout.log").read_text().splitlines()


def test_the_journal_records_trial_dirs_relative_to_the_working_directory(quickstart: Path) -> None:
    # The precondition of the bug: a relative trial_dir that joined onto the run dir led nowhere.
    finished = [json.loads(line) for line in (_run_dir(quickstart) / "journal.jsonl").read_text().splitlines()
                if '"trial_finished"' in line]
    assert finished and all(e["trial_dir"].startswith("aorta-out/") for e in finished)


@async_test
async def test_home_then_the_run_then_a_trial_shows_its_tail_detail_and_whole_log(
        quickstart: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(quickstart)
    monkeypatch.delenv("AORTA_TUI_OUTPUT", raising=False)
    app = AortaApp(machine_facts=FIXED_FACTS)  # the defaults: this cwd, ./aorta-out
    lines = _stdout_lines(quickstart)
    # five steps, then the trial timeline's result_written mark (docs/run-directory.md)
    assert [ln.split()[0] for ln in lines] == ["aorta-step"] * 5 + ["aorta-mark"]
    assert lines[0].startswith("aorta-step 0") and lines[-1].startswith("aorta-mark result_written ")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: bool(getattr(app.screen, "_run_paths", None)), what="the run on Home")
        await pilot.press("enter")  # the runs table has the focus
        await wait_for(pilot, lambda: isinstance(app.screen, MatrixScreen), what="the matrix")
        matrix = app.screen
        await wait_for(pilot, lambda: matrix.state is not None and matrix.state.status == "completed")
        # The grid is drawn on the redraw timer: a key pressed before it has columns moves nothing.
        await wait_for(pilot, lambda: matrix.query_one(MatrixGrid).row_count > 0 and not matrix._dirty,
                       what="the grid drawn")
        await pilot.press("right")  # onto baseline-local's first trial
        await wait_for(pilot, lambda: matrix._selected_view() is not None, what="a trial under the cursor")
        await pilot.pause(0.3)
        detail = str(matrix.query_one("#trial-detail").render())
        for line in lines:  # every line of the tail, at 80x24
            assert line in detail, f"{line!r} missing from the tail:\n{detail}"
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TrialDetailScreen), what="the trial detail")
        await pilot.pause(0.3)
        box = app.screen
        assert "baseline-local/trial-000" in str(box.query_one("#trial-facts-text").render())
        assert lines[-1] in str(box.query_one("#trial-tail").render())
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, TrialLogScreen), what="the full log")
        logs = app.screen
        assert logs.current == "stdout.log"
        assert list(logs.query_one("#log-stdout-log", Log).lines) == lines
        await pilot.press("s")
        assert logs.current == "stderr.log"
        await pilot.press("escape", "escape")
        assert app.screen is matrix
        await pilot.press("l")  # straight from the grid too
        await wait_for(pilot, lambda: isinstance(app.screen, TrialLogScreen))


@async_test
async def test_the_logs_are_found_whatever_the_tuis_working_directory(
        quickstart: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # somewhere else entirely: `aorta-tui attach /abs/run/dir`
    app = AortaApp(cwd=tmp_path, output_dir=tmp_path / "none", start_run=_run_dir(quickstart),
                   machine_facts=FIXED_FACTS)
    async with app.run_test(size=(100, 30)) as pilot:
        matrix = app.screen
        await wait_for(pilot, lambda: matrix.state is not None and matrix.state.status == "completed")
        await wait_for(pilot, lambda: matrix.query_one(MatrixGrid).row_count > 1 and not matrix._dirty,
                       what="the grid drawn")
        await pilot.press("down", "right")  # the second cell's first trial
        await wait_for(pilot, lambda: matrix._selected_view() is not None, what="a trial under the cursor")
        await pilot.pause(0.3)
        view = matrix._selected_view()
        assert view is not None and view.trial == 0
        assert _stdout_lines(quickstart, view.trial_id)[-1] in str(matrix.query_one("#trial-detail").render())


# --- the real program under tmux ----------------------------------------------------------


LONG_PROBE = """\
schema_version: 1
mode: probe
ticket: LOGS
trials: 1
mitigation_axis: [none]
diagnostic_axis: [none]
"""


@needs_tmux
@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_the_tail_fills_the_terminal_in_the_real_program(quickstart: Path, tmp_path: Path,
                                                         size: tuple[int, int]) -> None:
    # The quickstart's trial (6 lines) whole at both sizes, and a 60-line log: more at 160x48.
    cwd = tmp_path
    shutil.copytree(quickstart / "aorta-out", cwd / "aorta-out")
    (cwd / "long.yaml").write_text(LONG_PROBE)
    _batch(cwd, "long.yaml", "--", "bash", "-c", "for i in $(seq 1 60); do echo log-line-$i; done")
    tmux = Tmux(f"aorta-logs-{os.getpid()}-{size[0]}")
    try:
        (run,) = (cwd / "aorta-out" / "QUICKSTART").iterdir()
        tmux.start(f"{ENTRY} attach {shlex.quote('aorta-out/QUICKSTART/' + run.name)}", cwd, size)
        tmux.wait_for("completed")
        tmux.keys("Right")
        screen = tmux.wait_for("aorta-step 4")
        for line in _stdout_lines(quickstart):
            assert line in screen, f"{line!r} not on the {size} screen:\n{screen}"
        tmux.keys("l")
        tmux.wait_for(f"{len(_stdout_lines(quickstart))} lines")
        tmux.keys("Escape", "C-q")
        assert tmux.gone(), "ctrl+q did not quit"

        (long_run,) = (cwd / "aorta-out" / "LOGS").iterdir()
        tmux.kill()
        tmux = Tmux(tmux.socket + "-long")  # a fresh server: a lingering one keeps its old size
        tmux.start(f"{ENTRY} attach aorta-out/LOGS/{long_run.name}", cwd, size)
        tmux.wait_for("completed")
        tmux.keys("Right")
        screen = tmux.wait_for("log-line-60")
        shown = sum(1 for row in screen.splitlines() if "log-line-" in row)
        rows_below_grid = size[1] - 8  # header, summary, grid (header + 1 row), rule, footer
        assert shown >= rows_below_grid - 4, f"{shown} tail lines at {size}:\n{screen}"
        tmux.keys("enter")
        tmux.wait_for("directory: aorta-out/LOGS/")
        screen = tmux.wait_for("log-line-60")  # the tail is drawn after the facts, a frame later
        assert sum(1 for row in screen.splitlines() if "log-line-" in row) >= size[1] - 12
        tmux.keys("l")
        screen = tmux.wait_for("60 lines")
        assert sum(1 for row in screen.splitlines() if "log-line-" in row) >= size[1] - 8
    finally:
        tmux.kill()


@needs_tmux
def test_a_terminal_that_hangs_up_ends_the_program(quickstart: Path, tmp_path: Path) -> None:
    # `attach` processes were alive 50 minutes after their tmux server was killed (an SSH
    # connection that drops is the same): Textual's writer thread dies on the first write to the
    # hung-up terminal, and its driver's close then waits forever on that thread's full queue.
    # Now the process leaves SHUTDOWN_GRACE_S after its terminal hung up at the latest.
    from aorta_tui.cli.tui_launch import SHUTDOWN_GRACE_S, TERMINAL_CHECK_S

    cwd = tmp_path
    (cwd / "long.yaml").write_text(LONG_PROBE)
    _batch(cwd, "long.yaml", "--", "bash", "-c", "for i in $(seq 1 60); do echo log-line-$i; done")
    (long_run,) = (cwd / "aorta-out" / "LOGS").iterdir()
    tmux = Tmux(f"aorta-hangup-{os.getpid()}")
    program = None
    try:
        tmux.start(f"{ENTRY} attach aorta-out/LOGS/{long_run.name}", cwd, (100, 30))
        tmux.wait_for("completed")
        tmux.keys("Right")
        tmux.wait_for("log-line-60")
        tmux.keys("l")
        tmux.wait_for("60 lines")
        found = subprocess.run(["pgrep", "-f", f"attach aorta-out/LOGS/{long_run.name}"],
                               capture_output=True, text=True).stdout.split()
        (program,) = [int(p) for p in found if Path(f"/proc/{p}/exe").resolve().name.startswith("python")]
        tmux.kill()  # the terminal hangs up under the program
        deadline = TERMINAL_CHECK_S + SHUTDOWN_GRACE_S + 20.0
        waited = 0.0
        while process_alive(program) and waited < deadline:
            time.sleep(0.25)
            waited += 0.25
        assert not process_alive(program), f"pid {program} still runs {deadline:.0f} s after its terminal hung up"
    finally:
        tmux.kill()
        if program is not None and process_alive(program):
            os.kill(program, 9)

