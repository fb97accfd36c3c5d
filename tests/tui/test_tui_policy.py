"""Policy screen: a real `policy sweep` child process, its report as a table and bars."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input
from tui_support import FIXTURES, app_in, async_test, wait_for

from aorta_tui.tui.app import AortaApp
from aorta_tui.tui.screens.policy import PolicyScreen, winner_text


async def _policy_screen(app: AortaApp, pilot) -> PolicyScreen:  # noqa: ANN001
    await pilot.press("6")
    screen = app.screen
    assert isinstance(screen, PolicyScreen)
    screen.query_one("#pol-policies", Input).value = "baseline"
    screen.query_one("#pol-streams", Input).value = "2"
    screen.query_one("#pol-trials", Input).value = "1"
    screen.query_one("#pol-extra", Input).value = "--size tiny --device cpu --iterations 3 --warmup 1"
    return screen


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@async_test
async def test_running_a_policy_sweep_fills_the_table_from_its_report(tmp_path: Path) -> None:
    app = app_in(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _policy_screen(app, pilot)
        screen.query_one("#policy-table", DataTable).focus()
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.report is not None, timeout=90, what="the policy report")
        kinds = [e.kind for e in screen.events]
        assert kinds[0] == "run_started" and "progress" in kinds and kinds[-1] == "run_finished"
        report_path = next((tmp_path / "aorta-policy").glob("tiny_kernel_stress-*/policy.json"))
        on_disk = json.loads(report_path.read_text())
        assert screen.report is not None and screen.report.to_json() == on_disk
        table = screen.query_one("#policy-table", DataTable)
        # A heading row per metric, then one row per policy.
        assert table.row_count == len(on_disk["metrics"]) * (1 + len(on_disk["policies"]))
        metric = on_disk["metrics"][0]
        assert str(table.get_row_at(0)[0]).startswith(metric["name"])
        first = [str(c) for c in table.get_row_at(1)]
        median = on_disk["policies"][0]["metrics"][metric["name"]]["median"]
        assert first[0].strip() == "baseline"
        assert first[1] == f"{median:.4g}" and first[2] == "reference"
        # One trial is too few for an interval: the engine says so, and so does the screen.
        assert "n/a" in first[3]
        bars = str(screen.query_one("#policy-bars").render())
        assert "baseline" in bars and "no policy is significantly better" in bars
        # No stderr noise reached the terminal: it went to a file next to the run.
        assert list((tmp_path / "aorta-policy").glob(".*.stderr.log"))


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@async_test
async def test_quitting_stops_a_running_policy_sweep(tmp_path: Path) -> None:
    app = app_in(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _policy_screen(app, pilot)
        screen.query_one("#pol-trials", Input).value = "20"
        screen.query_one("#policy-table", DataTable).focus()
        await pilot.press("r")
        await wait_for(pilot, lambda: any(e.kind == "trial_started" for e in screen.events), timeout=60)
        pid = screen.engine_run.pid
    # The sweep's whole process group is gone (nothing left running that the user did not ask for).
    try:
        os.killpg(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive


@async_test
async def test_a_saved_report_opens_and_names_a_winner_only_when_significant(tmp_path: Path) -> None:
    report = json.loads((FIXTURES / "policy" / "policy.json").read_text())
    assert "no policy is significantly better" in winner_text(report, "throughput")
    # The same report with the engine's call flipped to a significant improvement.
    for policy in report["policies"]:
        if policy["name"] != report["reference"]:
            policy["vs_reference"]["throughput"] = {"verdict": "higher", "change_pct": 30.0, "assessment": "better"}
    saved = tmp_path / "policy.json"
    saved.write_text(json.dumps(report))
    app = app_in(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _policy_screen(app, pilot)
        screen.load_report(saved)
        await wait_for(pilot, lambda: screen.report is not None, what="the report read")  # by a worker
        bars = str(screen.query_one("#policy-bars").render())
        assert "better than baseline: cuda_max_connections_1" in bars
        bad = tmp_path / "other.json"
        bad.write_text(json.dumps({"kind": "something-else"}))
        screen.load_report(bad)
        await wait_for(pilot, lambda: any("not a policy report" in str(n.message) for n in app._notifications))
