"""Issue 16 item 5: step-time spread, sample count, a noise marker and a two-way confound check,
in matrix.json, matrix.md and the TUI, from the README's quickstart in a fresh directory with
the default output directory; and the one percentile the project computes with."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.core import stats
from aorta_tui.core.aggregate import aggregate, confound_check
from aorta_tui.core.process_record import ProcessRecord
from aorta_tui.core.trial_contract import TrialResult

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ENTRY = Path(sys.executable).with_name("aorta-tui")


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's command, as a new user runs it: `aorta-tui --batch recipes/quickstart.yaml`."""
    cwd = tmp_path_factory.mktemp("fresh-clone")
    (cwd / "recipes").mkdir()
    shutil.copy(REPO / "recipes" / "quickstart.yaml", cwd / "recipes" / "quickstart.yaml")
    res = subprocess.run([str(ENTRY), "--batch", "recipes/quickstart.yaml"], cwd=cwd,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    (run,) = sorted((cwd / "aorta-out" / "QUICKSTART").iterdir())
    return run


def test_matrix_json_has_spread_count_noise_and_the_device(quickstart: Path) -> None:
    m = json.loads((quickstart / "matrix.json").read_text())
    assert m["devices"]["trials"] == {"cpu": 6}  # a CPU-only box: every trial said so
    assert m["confound_threshold"] == 1.15 and m["confound_band"] == pytest.approx([1 / 1.15, 1.15])
    for cell in m["cells"]:
        st_ = cell["step_time_s"]
        assert cell["step_count"] == 10  # 2 trials x 5 steps
        assert st_["p25"] <= st_["p50"] <= st_["p75"]
        assert st_["iqr"] == pytest.approx(st_["p75"] - st_["p25"])
        assert cell["noise"]["flag"] in (None, "bimodal", "dispersed")
        assert cell["noise"]["reason"]
        if cell["cell"] != m["baseline_cell"]:
            assert cell["confound"]["threshold"] == 1.15


def test_matrix_md_says_device_threshold_and_how_to_read_the_columns(quickstart: Path) -> None:
    md = (quickstart / "matrix.md").read_text()
    assert "- device: cpu (6 of 6 trials)" in md
    assert "confound threshold: x1.15 either way" in md and "below 0.87x" in md
    header = next(line for line in md.splitlines() if line.startswith("| cell |"))
    for column in ("step p50", "step IQR (p25 – p75)", "| n |", "noise", "confound"):
        assert column in header
    assert "## How to read this" in md
    assert "`bimodal` = the step times form two groups" in md
    assert "`dispersed` = the IQR exceeds 0.5 x p50" in md
    rows = [line for line in md.splitlines() if line.startswith("| ") and "-local |" in line]
    assert len(rows) == 3 and all("| 10 |" in row for row in rows)


def test_the_matrix_screen_shows_p50_iqr_n_noise_and_the_threshold(quickstart: Path, monkeypatch) -> None:
    import asyncio

    from aorta_tui.tui.app import AortaApp
    from aorta_tui.tui.widgets.matrix_grid import MatrixGrid

    m = json.loads((quickstart / "matrix.json").read_text())

    async def drive() -> None:
        cwd = quickstart.parents[2]
        monkeypatch.chdir(cwd)  # `aorta-tui attach aorta-out/QUICKSTART/<run>` from the fresh clone
        app = AortaApp(cwd=cwd, output_dir=Path("aorta-out"), start_run=quickstart.relative_to(cwd))
        async with app.run_test(size=(80, 24)) as pilot:
            screen = app.screen
            for _ in range(100):
                await pilot.pause(0.05)
                if screen.state is not None and screen.state.status == "completed":
                    break
            await pilot.pause(0.4)
            grid = screen.query_one(MatrixGrid)
            headers = [str(c.label) for c in grid.columns.values()]
            assert headers[-6:] == ["fail", "step p50", "IQR", "n", "noise", "confound"]
            for row, cell in enumerate(screen.state.cells):
                want = next(c for c in m["cells"] if c["cell"] == cell)
                figures = [grid.get_cell_at((row, col)).plain for col in range(len(headers) - 6, len(headers))]
                assert figures[3] == "10"
                assert figures[4] == (want["noise"]["flag"] or "—")
                conf = want["confound"]  # matrix.md's column; its "within noise" is "in noise" here
                if conf.get("significant") is False:  # with the noise band it is inside
                    assert figures[5].startswith("in noise ±"), figures[5]
                else:
                    assert figures[5] == (conf.get("flag") or "—")
            summary = str(screen.query_one("#matrix-summary").render())
            assert "x1.15 either way" in summary

    asyncio.run(drive())


# --- the statistics themselves ------------------------------------------------------------

def rec(cell: str, trial: int, steps: list[float]) -> TrialResult:
    return TrialResult(f"{cell}/trial-{trial:03d}", cell, trial, "pass", process=ProcessRecord(wall_s=1.0),
                       step_times_s=steps, step_time_source="workload")


def test_a_much_faster_cell_is_flagged_too_not_only_a_slower_one() -> None:
    base = [rec("b", t, [1.0e-2, 1.01e-2, 0.99e-2]) for t in range(3)]
    fast = [rec("f", t, [3.0e-5, 3.1e-5, 2.9e-5]) for t in range(3)]
    out = confound_check(fast, base, 1.15)
    assert out["direction"] == "faster" and out["significant"] is True
    assert out["flag"] == "speed (x1/333)"
    slower = confound_check([rec("s", t, [1.2e-2] * 3) for t in range(3)], base, 1.15)
    assert slower["flag"] == "speed (+20%)" and slower["direction"] == "slower"
    near = confound_check([rec("n", t, [0.95e-2] * 3) for t in range(3)], base, 1.15)
    assert near["flag"] is None and "either way" in near["reason"]


def test_bimodal_steps_like_the_quickstart_baseline_are_marked() -> None:
    # ~30 us steps among 16-32 ms scheduler stalls (what the issue measured)
    steps = [3e-5] * 12 + [1.6e-2, 2.4e-2, 3.2e-2, 1.7e-2]
    cells = aggregate([rec("b", 0, steps)], ["b"], baseline_cell=None, threshold=1.15)
    assert cells[0].noise["flag"] == "bimodal"
    assert "12 steps around 30 µs and 4 around" in cells[0].noise["reason"]
    assert stats.noise_marker([1.0, 1.1, 0.9, 1.05, 0.95])["flag"] is None
    assert stats.noise_marker([1.0, 2.0, 1.2, 2.2, 1.6, 2.4, 1.1])["flag"] == "dispersed"
    assert stats.noise_marker([1.0, 1.0])["flag"] == "few samples"


values = st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=1, max_size=60)
qs = st.floats(min_value=0, max_value=100)


@settings(max_examples=300, deadline=None)
@given(values, qs)
def test_the_one_percentile_matches_numpy(xs: list[float], q: float) -> None:
    linear = stats.percentile(xs, q)
    assert linear == pytest.approx(float(np.percentile(xs, q)), rel=1e-9, abs=1e-9)
    assert min(xs) <= linear <= max(xs)
    nearest = stats.percentile(xs, q, method="nearest")
    assert nearest == pytest.approx(float(np.percentile(xs, q, method="inverted_cdf")), rel=1e-12, abs=1e-12)


def test_percentile_refuses_what_it_cannot_answer() -> None:
    for bad in (([], 50, "linear"), ([1.0], 101, "linear"), ([1.0], 50, "median")):
        with pytest.raises(ValueError):
            stats.percentile(bad[0], bad[1], method=bad[2])
    assert stats.percentile_ms([], 50) is None
