"""Env diff screen on real snapshots captured by the envsnap engine (without torch, for speed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import DataTable
from tui_support import FIXED_FACTS, app_in, async_test, wait_for

from aorta_tui.tui.app import AortaApp
from aorta_tui.tui.screens.env_diff import EnvDiffScreen

KNOBS = {"NVIDIA_TF32_OVERRIDE": "0", "CUBLAS_WORKSPACE_CONFIG": ":4096:8", "GPU_MAX_HW_QUEUES": "2",
         "NCCL_DEBUG": "INFO"}


def _capture(path: Path, extra_env: dict[str, str]) -> Path:
    env = {k: v for k, v in os.environ.items() if k not in KNOBS}
    env.update(extra_env)
    subprocess.run([sys.executable, "-m", "aorta_tui.envsnap", "--output", str(path), "--no-torch"],
                   check=True, capture_output=True, env=env, timeout=60)
    return path


def _fields(screen: EnvDiffScreen) -> list[str]:
    table = screen.query_one("#diff-table", DataTable)
    return [str(table.get_row_at(i)[1]).strip() for i in range(table.row_count)]


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@async_test
async def test_env_diff_ranks_filters_searches_and_shows_provenance(tmp_path: Path) -> None:
    a = _capture(tmp_path / "a.json", {})
    b = _capture(tmp_path / "b.json", KNOBS)
    app = app_in(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("5")
        screen = app.screen
        assert isinstance(screen, EnvDiffScreen)
        screen.set_paths(a, b)
        await wait_for(pilot, lambda: bool(screen._rows), what="the diff")
        by_path = {r.path: r for r in screen._rows}
        # The engine's ranking, shown as is.
        assert by_path["env_vars.NVIDIA_TF32_OVERRIDE"].rank == "numerics"
        assert by_path["env_vars.CUBLAS_WORKSPACE_CONFIG"].rank == "numerics"
        assert by_path["env_vars.GPU_MAX_HW_QUEUES"].rank == "scheduling"
        assert by_path["env_vars.NCCL_DEBUG"].b == "INFO"
        assert by_path["env_vars.NCCL_DEBUG"].a == "unset"
        # Ranked: numerics rows come before scheduling rows before informational ones.
        shown = [r.rank for r in screen._shown if r is not None]
        order = {"numerics": 0, "scheduling": 1, "informational": 2}
        assert [order[r] for r in shown] == sorted(order[r] for r in shown)
        # Volatile fields (timestamps, load) are hidden until asked for.
        hidden = screen.hidden_volatile
        assert hidden > 0
        before = len(screen._rows)
        stable = {r.path for r in screen._rows}
        await pilot.press("v")
        await wait_for(pilot, lambda: len(screen._rows) == before + hidden, what="volatile fields")
        added = [r for r in screen._rows if r.path not in stable]
        assert len(added) == hidden and all("volatile" in r.provenance for r in added)
        await pilot.press("v")
        await wait_for(pilot, lambda: len(screen._rows) == before)
        # Hide numerics: only scheduling and informational rows stay.
        await pilot.press("n")
        assert all(r.rank != "numerics" for r in screen._shown if r is not None)
        await pilot.press("n")
        # Search narrows to matching fields.
        await pilot.press("slash")
        await pilot.press(*"TF32")
        assert [f for f in _fields(screen) if f.startswith("env_vars.")] == ["env_vars.NVIDIA_TF32_OVERRIDE"]
        await pilot.press("enter")  # back to the table
        table = screen.query_one("#diff-table", DataTable)
        assert screen.focused is table
        table.move_cursor(row=1)
        await pilot.pause(0.05)
        detail = str(screen.query_one("#diff-detail").render())
        assert "env:NVIDIA_TF32_OVERRIDE" in detail and "numerics" in detail


@async_test
async def test_a_run_directory_stands_for_its_host_snapshot(tmp_path: Path) -> None:
    from tui_support import DEMO_RUN, workspace

    ws = workspace(tmp_path)
    run = ws / "aorta-out" / DEMO_RUN
    app = AortaApp(cwd=ws, output_dir=ws / "aorta-out", machine_facts=FIXED_FACTS)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("5")
        screen = app.screen
        screen.set_paths(run, run / "env" / "local.json")
        await wait_for(pilot, lambda: "differences" in str(screen.query_one("#diff-summary").render()))
        assert not [n for n in app._notifications if n.severity == "error"]


@async_test
async def test_a_broken_snapshot_is_a_notification_not_a_crash(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": ')
    app = app_in(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5")
        app.screen.set_paths(bad, bad)
        await wait_for(pilot, lambda: any("bad.json" in str(n.message) for n in app._notifications),
                       what="an error notification naming the file")
        assert app.is_running
