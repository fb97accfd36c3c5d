"""The trace monitor on snapshots recorded on the H200 (`trace queue --json` of
scripts/dispatch/bursts.py, tests/fixtures/trace/gpu-h200/dispatch/README.md), replayed through
the real trace worker: what a user saw there is what the screen shows here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tui_support import FIXED_FACTS, async_test, replay_in_monitor

from aorta_tui.tui.app import AortaApp
from aorta_tui.tui.widgets.histogram import fmt_latency

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "trace" / "gpu-h200" / "dispatch" / "rec.snapshots.jsonl"


def _last(probe_set: str) -> dict:
    rows = [json.loads(ln) for ln in H200.read_text().splitlines() if f'"{probe_set}"' in ln]
    return [r for r in rows if r.get("probe_set") == probe_set][-1]


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
@async_test
async def test_the_h200_recording_shows_launch_to_start_with_its_figures(tmp_path: Path, size) -> None:  # noqa: ANN001
    app = AortaApp(cwd=tmp_path, output_dir=tmp_path / "out", machine_facts=FIXED_FACTS)
    async with app.run_test(size=size) as pilot:
        screen = await replay_in_monitor(app, pilot, H200)
        assert screen.metric == "cuda.launch_to_start"
        last = _last("cuda.launch_to_start")
        unc_us = last["clock"]["uncertainty_ns"] / 1e3
        header = str(screen.query_one("#queue-measures").render())
        assert f"clocks aligned ±{unc_us:.3g} µs (" in header  # as measured there
        stats = str(screen.query_one("#queue-stats").render())
        assert f"{last['count']:,}" in stats  # 7,273 launches
        assert fmt_latency(last["percentiles"]["p50"], last["unit"]) in stats  # the recorded p50, as drawn
