"""Pure parts of scripts/multigpu_check.py and the hang probe's inputs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.errors import RecipeError
from aorta_tui.recipe import load_recipe
from aorta_tui.registry.registry import Registry

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
times = st.floats(min_value=1e-3, max_value=1e4, allow_nan=False)


@given(tc=times, tm=times)
def test_overlap_is_one_when_hidden_and_zero_when_serial(multigpu, tc: float, tm: float) -> None:
    assert multigpu.overlap_fraction(tc, tm, max(tc, tm)) == pytest.approx(1.0)
    assert multigpu.overlap_fraction(tc, tm, tc + tm) == pytest.approx(0.0, abs=1e-9)


@given(tc=times, tm=times, a=times, b=times)
def test_overlap_falls_as_the_combined_run_gets_slower(multigpu, tc: float, tm: float, a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    assert multigpu.overlap_fraction(tc, tm, lo) >= multigpu.overlap_fraction(tc, tm, hi)


def test_overlap_is_unknown_without_all_three_times(multigpu) -> None:
    assert multigpu.overlap_fraction(None, 1.0, 1.0) is None
    assert multigpu.overlap_fraction(0.0, 1.0, 1.0) is None


def test_allreduce_bandwidth_from_a_comms_only_result(multigpu) -> None:
    res = {"workload": {"params": {"comm_elements": 1_000_000}, "dtype": "float32"},
           "config": {"iterations": 2}, "summary": {"latency_p50_ms": 4.0},
           "timeline_fields": ["iteration", "stream", "label"],
           "timeline": [[0, 2, "all_reduce"], [0, 3, "all_reduce"], [1, 2, "all_reduce"], [1, 3, "all_reduce"]]}
    algbw, busbw, why = multigpu.allreduce_bandwidth(res, world=4)
    # two 4 MB all-reduces per iteration in 4 ms: algbw 2 GB/s; busbw = algbw x 2(n-1)/n = 2 x 1.5
    assert algbw == pytest.approx(2.0) and busbw == pytest.approx(3.0) and why is None
    assert multigpu.allreduce_bandwidth(res, world=1)[1:] == (None, "bus bandwidth needs 2+ ranks")
    res["timeline"] = [[0, 0, "gemm"]]
    assert multigpu.allreduce_bandwidth(res, world=2) == (None, None, "no all-reduce in this mode")


@given(st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=50),
       st.floats(min_value=0, max_value=100))
def test_percentile_lies_within_the_data(multigpu, values: list[float], q: float) -> None:
    v = sorted(values)
    assert v[0] <= multigpu.percentile(v, q) <= v[-1]


def test_markdown_table_has_one_row_per_input_and_says_na(multigpu) -> None:
    text = multigpu.md_table(["a", "b"], [[1, None], [2.5, "x"]])
    lines = text.splitlines()
    assert len(lines) == 4 and "n/a" in lines[2] and lines[1].startswith("|-")


def test_bad_item_names_are_refused(multigpu, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        multigpu.parse_args(["--only", "overlap,hnag"])
    assert exc.value.code == 2 and "unknown item(s) ['hnag']" in capsys.readouterr().err


def test_the_recipe_needs_its_sidecar_mitigation() -> None:
    recipe = REPO / "recipes" / "torchrun_hang_probe.yaml"
    r = load_recipe(recipe, registry=Registry([REPO / "recipes" / "torchrun_hang_probe.mitigations.json"]))
    assert r.mode == "probe" and r.confound.baseline_cell == "rank_hang_skip-none"
    assert r.hang_window_sec < 10 and r.hang_grace_period_at_start < 10 and r.timeout_per_trial
    assert "scripts/rank_hang.py" in r.command and "--timeout" in r.command
    with pytest.raises(RecipeError, match="rank_hang_skip"):
        load_recipe(recipe, registry=Registry())


def test_rank_program_outside_torchrun_says_how_to_start_it() -> None:
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "rank_hang.py")], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin"}, timeout=30)
    assert p.returncode == 2 and "torch.distributed.run" in p.stderr and "Traceback" not in p.stderr
