"""attach --plain hands on the exit code a finished run recorded, and only one aorta-tui exits with."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.cli.follow_plain import run_exit_code
from aorta_tui.core.events import RunFinished


def test_a_recorded_code_is_handed_on():
    assert run_exit_code(RunFinished("r", status="completed", exit_code=0)) == 0
    assert run_exit_code(RunFinished("r", status="completed", exit_code=1)) == 1
    assert run_exit_code(RunFinished("r", status="failed", exit_code=3)) == 3
    assert run_exit_code(RunFinished("r", status="interrupted", exit_code=130)) == 130
    assert run_exit_code(RunFinished("r", status="failed", exit_code=0)) == 1  # not completed
    assert run_exit_code(RunFinished("r", status="completed", exit_code=None)) == 0


@given(st.integers().filter(lambda c: c not in (0, 1, 2, 3, 130)), st.sampled_from(["completed", "failed", "interrupted"]))
def test_a_code_no_aorta_tui_command_exits_with_is_1(code, status):
    # the fuzzer's forged journal: exit_code -833 made attach --plain exit 191
    assert run_exit_code(RunFinished("r", status=status, exit_code=code)) == 1
