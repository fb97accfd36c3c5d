"""Issue 12, items 4, 6 and 10: numbers a recipe may hold, and validation that stays linear.

Every numeric key has a range checked by validation (a located exit 2 naming the range), the
loader refuses integers too long to compute with, and repeated probe-axis entries cost O(n).
"""

from __future__ import annotations

import re

import pytest

from aorta_tui.recipe import RecipeValidationError, check_recipe_text, load_recipe_text
from aorta_tui.recipe import keys as K
from aorta_tui.recipe import validate as validate_mod
from tests.engine_support import aorta, only_run_dir

PROBE = ("schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\n"
         "diagnostic_axis: [none]\n")
LOCATED = re.compile(r"recipe\.yaml:\d+:\d+: ")

# (extra line, key path in the message, text the message must hold)
OUT_OF_RANGE = [
    ("hang_grace_period_at_start: 1.0e+30", "hang_grace_period_at_start", "at most 604800"),
    ("timeout_per_trial: 10000000000", "timeout_per_trial", "at most 604800"),
    ("hang_window_sec: 1.0e+300", "hang_window_sec", "at most 604800"),
    ("timeout_per_trial: " + "9" * 100, "timeout_per_trial", "100 digits"),
    ("timeout_per_trial: " + "9" * 400, "timeout_per_trial", "400 digits"),
    ("seed: " + "9" * 5000, "seed", "5000 digits"),
    ("seed: 9223372036854775808", "seed", "at most 9223372036854775807"),
    ("trials: 100001", "trials", "from 1 to 100000"),
    ("confound: {threshold: 1000000000000}", "confound.threshold", "at most 1000"),
    ("stop_after: {events: 1, max_trials: 200000}", "stop_after.max_trials", "at most 100000"),
]


@pytest.mark.parametrize(("extra", "path", "text"), OUT_OF_RANGE)
def test_out_of_range_numbers_are_located_errors(extra, path, text):
    base = PROBE if not extra.startswith("trials") else PROBE.replace("trials: 1\n", "")
    issues = check_recipe_text(base + extra + "\n", source="recipe.yaml")
    assert issues, f"{extra[:40]} validated"
    mine = [i for i in issues if i.path == path]
    assert mine, issues
    assert text in mine[0].message or text in (mine[0].hint or ""), mine[0]
    assert mine[0].line >= 1 and mine[0].column >= 1
    assert "internal error" not in mine[0].message
    assert len(mine[0].message) < 500  # never echoes the 5000 digits


def test_triage_steps_have_a_maximum():
    text = ("schema_version: 1\nworkload: gpu_smoke\ntrials: 1\nsteps: 1000000000\n"
            "cells: [{name: a, mitigations: [none], steps: 1000000000}]\n")
    issues = check_recipe_text(text)
    assert {i.path for i in issues} == {"steps", "cells[0].steps"}
    assert all(f"to {K.MAX_STEPS}" in (i.hint or "") for i in issues)


def test_huge_integers_in_workload_config_are_located():
    text = ("schema_version: 1\nworkload: gpu_smoke\ntrials: 1\nsteps: 1\n"
            f"workload_config: {{size: {'7' * 5000}}}\ncells: [{{name: a, mitigations: [none]}}]\n")
    issues = check_recipe_text(text)
    assert [(i.line, i.path) for i in issues] == [(5, "workload_config.size")]


@pytest.mark.parametrize(("extra", "path", "text"), OUT_OF_RANGE[:6])
def test_cli_validate_exits_2_with_a_location(tmp_path, extra, path, text):
    f = tmp_path / "recipe.yaml"
    f.write_text(PROBE + extra + "\n")
    proc = aorta("recipe", "validate", str(f))
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert LOCATED.search(proc.stderr) and path in proc.stderr and text in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr) < 4000


def test_the_largest_accepted_waits_run_a_trial(tmp_path):
    """The bounds themselves reach the worker's poll loop without overflowing it (exit 0)."""
    f = tmp_path / "recipe.yaml"
    f.write_text(PROBE + f"timeout_per_trial: {K.MAX_SECONDS}\nhang_window_sec: "
                 f"{K.MAX_SECONDS}\nhang_grace_period_at_start: {K.MAX_SECONDS}\n")
    out = tmp_path / "out"
    proc = aorta("--batch", str(f), "--output", str(out), "--no-snapshot", "--", "true")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '"verdict": "pass"' in next(only_run_dir(out).glob("trials/*/*/result.json")).read_text()


# -- item 10: linear duplicate detection ------------------------------------------------------
def _repeated_axes(n: int) -> str:
    many = ", ".join(["none"] * n)
    return f"schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [{many}]\n" \
           f"diagnostic_axis: [{many}]\n"


def _count_cell_names(monkeypatch: pytest.MonkeyPatch, text: str) -> tuple[int, list]:
    calls = 0
    real = validate_mod.probe_segment

    def counting(name: str) -> str:
        nonlocal calls
        calls += 1
        return real(name)

    monkeypatch.setattr(validate_mod, "probe_segment", counting)
    issues = check_recipe_text(text)
    return calls, issues


def test_repeated_axis_entries_cost_linear_work(monkeypatch):
    """6000 x 6000 repeats: one cell is built (was 36 million names, 36 s)."""
    calls, issues = _count_cell_names(monkeypatch, _repeated_axes(6000))
    assert calls == 2  # one (mitigation, diagnostic) pair: 'none' x 'none'
    assert issues and all("listed twice" in i.message for i in issues)
    assert issues[0].path == "diagnostic_axis[1]" or issues[0].path == "mitigation_axis[1]"
    assert "first at" in issues[0].message


def test_cross_product_over_the_cell_limit_is_refused_before_it_is_built(monkeypatch):
    names = ", ".join(f"m{i}" for i in range(200))
    text = ("schema_version: 1\nmode: probe\ntrials: 1\n"
            f"mitigation_axis: [{names}]\ndiagnostic_axis: [{names}]\n")
    calls, issues = _count_cell_names(monkeypatch, text)
    assert calls == 0
    assert [i.path for i in issues] == ["diagnostic_axis"]
    assert "200 x 200 = 40000 cells" in issues[0].message


def test_planned_trials_have_a_maximum():
    cells = ", ".join(f"{{name: c{i}, mitigations: [none]}}" for i in range(20))
    text = (f"schema_version: 1\nworkload: gpu_smoke\ntrials: {K.MAX_TRIALS}\nsteps: 1\n"
            f"cells: [{cells}]\n")
    with pytest.raises(RecipeValidationError) as info:
        load_recipe_text(text)
    assert "2000000 trials in all" in info.value.message



def test_an_oversized_value_is_not_echoed(tmp_path):
    """Item 13: a 1.3 MB value in the wrong place gives a short message, in process and CLI."""
    huge = "x" * 1_300_000  # three of them stay under the 4 MiB recipe limit
    text = PROBE.replace("trials: 1\n", f"trials: {huge}\n") + f"ticket: {huge}\n" + \
        f"mitigation_extra: {huge}\n"
    issues = check_recipe_text(text, source="recipe.yaml")
    assert {i.path for i in issues} >= {"trials", "ticket"}
    assert all(len(i.message) <= 400 and len(i.hint or "") <= 400 for i in issues), issues
    f = tmp_path / "recipe.yaml"
    f.write_text(text)
    proc = aorta("recipe", "validate", str(f))
    assert proc.returncode == 2 and len(proc.stderr) < 5000 and LOCATED.search(proc.stderr)
