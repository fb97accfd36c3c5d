"""Probe sweeps over real commands: verdicts, detectors, reports, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine_support import aorta, journal, only_run_dir

PROBE = """\
schema_version: 1
mode: probe
ticket: T-1
trials: {trials}
timeout_per_trial: {timeout}
hang_window_sec: 30
hang_grace_period_at_start: 60
mitigation_axis: [none, gpu_max_hw_queues_2]
diagnostic_axis: [none]
"""


def run_probe(tmp_path: Path, command: list[str], *, trials: int = 1, timeout: float = 30,
              extra: list[str] = ()) -> tuple[object, Path]:
    recipe = tmp_path / "probe.yaml"
    recipe.write_text(PROBE.format(trials=trials, timeout=timeout))
    out = tmp_path / "out"
    proc = aorta("--batch", str(recipe), "--output", str(out), "--no-snapshot", *extra, "--", *command)
    return proc, out


def results(run_dir: Path) -> dict[str, dict]:
    return {json.loads(p.read_text())["trial_id"]: json.loads(p.read_text())
            for p in run_dir.glob("trials/*/trial-*/result.json")}


def test_exit_code_3_is_a_failure_with_the_exit_detector(tmp_path):
    proc, out = run_probe(tmp_path, ["bash", "-c", "exit 3"])
    assert proc.returncode == 0, proc.stderr  # failures are findings, not errors, without --strict
    run = only_run_dir(out)
    res = results(run)
    assert set(res) == {"none-none/trial-000", "gpu_max_hw_queues_2-none/trial-000"}
    for r in res.values():
        assert r["verdict"] == "fail"
        assert r["process"]["exit_code"] == 3
        assert any(d["tier"] == 1 for d in r["detections"])
    matrix = json.loads((run / "matrix.json").read_text())
    assert matrix["schema_version"] == 1
    assert {c["cell"]: c["failed"] for c in matrix["cells"]} == {"none-none": 1, "gpu_max_hw_queues_2-none": 1}
    assert "none-none/trial-000" in (run / "matrix.md").read_text()
    assert "failing trials:" in proc.stdout


def test_strict_turns_failures_into_exit_1(tmp_path):
    proc, _ = run_probe(tmp_path, ["bash", "-c", "exit 3"], extra=["--strict"])
    assert proc.returncode == 1


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_timeout_is_an_error_and_kills_the_tree(tmp_path):
    marker = tmp_path / "grandchild.pid"
    proc, out = run_probe(tmp_path, ["bash", "-c", f"sleep 100 & echo $! > {marker}; sleep 100"], timeout=1)
    assert proc.returncode == 1, proc.stderr  # every trial errored (timed out): exit 1 (issue 27)
    res = results(only_run_dir(out))
    for r in res.values():
        assert r["verdict"] == "error"
        assert r["process"]["timed_out"] is True
    pid = int(marker.read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_cuda_error_in_output_is_detected(tmp_path):
    script = "echo 'RuntimeError: CUDA error: an illegal memory access was encountered' >&2; exit 0"
    proc, out = run_probe(tmp_path, ["bash", "-c", script])
    res = results(only_run_dir(out))
    for r in res.values():
        assert r["verdict"] == "fail"
        ids = {d["id"] for d in r["detections"]}
        assert any("cuda" in i for i in ids), ids


def test_env_reaches_the_command_at_creation(tmp_path):
    proc, out = run_probe(tmp_path, ["bash", "-c", 'echo "Q=${GPU_MAX_HW_QUEUES:-unset} D=$AORTA_ARTIFACT_DIR"'])
    run = only_run_dir(out)
    logs = {p.parent.parent.name: p.read_text() for p in run.glob("trials/*/trial-*/stdout.log")}
    assert logs["none-none"].startswith("Q=unset")
    assert logs["gpu_max_hw_queues_2-none"].startswith("Q=2")
    assert str(run / "trials") in logs["none-none"]


def test_json_mode_prints_the_journal(tmp_path):
    proc, out = run_probe(tmp_path, ["true"], extra=["--json"])
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert lines == journal(only_run_dir(out))
    kinds = [x["event"] for x in lines]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert kinds.count("trial_finished") == 2


def test_probe_without_command_is_a_usage_error_and_writes_nothing(tmp_path):
    recipe = tmp_path / "probe.yaml"
    recipe.write_text(PROBE.format(trials=1, timeout=5))
    proc = aorta("--batch", str(recipe), "--output", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "no command was given" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_bad_recipe_is_located_and_writes_nothing(tmp_path):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("schema_version: 1\nmode: probe\ntrials: two\n")
    proc = aorta("--batch", str(recipe), "--output", str(tmp_path / "out"), "--", "true")
    assert proc.returncode == 2
    assert f"{recipe}:3:" in proc.stderr and "trials" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_unknown_mitigation_names_the_line(tmp_path):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none, tf32_of]\ndiagnostic_axis: [none]\n")
    proc = aorta("--batch", str(recipe), "--dry-run", "--", "true")
    assert proc.returncode == 2
    assert f"{recipe}:4:" in proc.stderr and "tf32_off" in proc.stderr  # did you mean


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_upstream_recipes_dry_run_into_upstreams_cells(tmp_path):
    shared = Path(__file__).resolve().parents[1] / "fixtures" / "upstream-recipes"
    expected = {
        "probe-template-bash.yaml": ["none-none", "none-xnack", "tf32_off-none", "tf32_off-xnack"],
        "example-fsdp-smoke.yaml": ["baseline-local", "tf32_off-local", "xnack-local"],
        "example-inference-continuous-smoke.yaml": ["baseline-local"],
    }
    baselines = {"probe-template-bash.yaml": "none-none", "example-fsdp-smoke.yaml": "baseline-local",
                 "example-inference-continuous-smoke.yaml": "baseline-local"}
    for name, cells in expected.items():
        proc = aorta("--batch", str(shared / name), "--dry-run", "--json")
        assert proc.returncode == 0, proc.stderr
        plan = json.loads(proc.stdout)
        assert [c["name"] for c in plan["cells"]] == cells
        assert plan["baseline_cell"] == baselines[name]


def test_unknown_disabled_detector_is_located(tmp_path):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\n"
                      "diagnostic_axis: [none]\ndisable_detectors: ['tier4:cuda_eror']\n")
    proc = aorta("--batch", str(recipe), "--output", str(tmp_path / "out"), "--", "true")
    assert proc.returncode == 2
    assert f"{recipe}:6:" in proc.stderr and "cuda_error" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_disabled_detector_really_stays_quiet(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\n"
                      "diagnostic_axis: [none]\ndisable_detectors: ['tier4:cuda_error', 'tier4:illegal_memory_access']\n")
    script = "echo 'RuntimeError: CUDA error: an illegal memory access was encountered'"
    proc = aorta("--batch", str(recipe), "--output", str(tmp_path / "out"), "--no-snapshot", "--",
                 "bash", "-c", script)
    assert proc.returncode == 0, proc.stderr
    (res,) = results(only_run_dir(tmp_path / "out")).values()
    ids = {d["id"] for d in res["detections"] if d["severity"] in ("fail", "error")}
    assert "cuda_error" not in ids


def test_list_patterns_json_has_samples_that_match():
    import re

    proc = aorta("sweep", "list-patterns", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert {"cuda_error", "nccl_error", "python_traceback"} <= {r["id"] for r in rows}
    for r in rows:
        assert re.search(r["regex"], r["sample"]), r["id"]


def test_custom_pattern_condition_sees_captures_and_trial_variables(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\n"
        "custom_patterns:\n"
        "  - id: loss_spike\n    match: {regex: 'loss=(?P<loss>[0-9.]+)', condition: \"float(capture['loss']) > 10\"}\n"
        "    on_match: fail\n"
        "  - id: clean_exit_marker\n    match: {regex: 'done', condition: 'exit_code == 0'}\n"
        "    on_match: info\n"
    )
    proc = aorta("--batch", str(recipe), "--output", str(tmp_path / "out"), "--no-snapshot", "--",
                 "bash", "-c", "echo loss=3.5; echo loss=12.25; echo done")
    assert proc.returncode == 0, proc.stderr
    (res,) = results(only_run_dir(tmp_path / "out")).values()
    assert res["verdict"] == "fail"
    by_id = {d["id"].split(":")[-1]: d for d in res["detections"]}
    assert by_id["loss_spike"]["captures"]["loss"] == 12.25  # the 3.5 line did not satisfy it
    assert "clean_exit_marker" in by_id  # exit_code reached the condition after the trial ended
    assert by_id["clean_exit_marker"]["severity"] == "info"


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_hang_disabled_with_upstreams_spelling(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("schema_version: 1\nmode: probe\ntrials: 1\ntimeout_per_trial: 4\n"
                      "hang_window_sec: 0.5\nhang_grace_period_at_start: 0.2\n"
                      "mitigation_axis: [none]\ndiagnostic_axis: [none]\ndisable_detectors: ['tier2:hang']\n")
    proc = aorta("--batch", str(recipe), "--output", str(tmp_path / "out"), "--no-snapshot", "--",
                 "bash", "-c", "echo start; sleep 2; echo end")
    assert proc.returncode == 0, proc.stderr
    (res,) = results(only_run_dir(tmp_path / "out")).values()
    assert res["verdict"] == "pass", res["detections"]


def test_policy_axis_is_refused_rather_than_ignored(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\n"
                      "diagnostic_axis: [none]\npolicy_axis: [baseline, priority_lc]\n")
    proc = aorta("--batch", str(recipe), "--output", str(tmp_path / "out"), "--", "true")
    assert proc.returncode == 2
    assert f"{recipe}:6:" in proc.stderr and "aorta-tui policy sweep" in proc.stderr
    assert not (tmp_path / "out").exists()
    dry = aorta("--batch", str(recipe), "--dry-run", "--", "true")
    assert dry.returncode == 0 and "policy_axis is not run by sweeps yet" in dry.stdout


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_run_in_which_every_trial_errored_is_exit_1_from_a_fresh_directory(tmp_path):
    """Issue 27 item 4: every trial errored (here: a command that is not there, so no trial
    launched) is not a success, without --strict too; the default relative output is used."""
    recipe = tmp_path / "probe.yaml"
    recipe.write_text(PROBE.format(trials=1, timeout=30))
    work = tmp_path / "fresh"
    work.mkdir()
    proc = aorta("--batch", str(recipe), "--no-snapshot", "--", str(tmp_path / "no-such-command"),
                 cwd=work)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "exit code 1 (every trial errored: nothing was judged" in proc.stdout
    res = results(only_run_dir(work / "aorta-out"))
    assert len(res) == 2 and {r["verdict"] for r in res.values()} == {"error"}
    # a trial that never launched has no hang detector to report on
    assert not [d for r in res.values() for d in r["detections"] if d["tier"] == 2]
    (finished,) = [e for e in journal(only_run_dir(work / "aorta-out")) if e["event"] == "run_finished"]
    assert finished["exit_code"] == 1 and finished["summary"]["every_trial_errored"] is True
    mixed = aorta("--batch", str(recipe), "--no-snapshot", "--", "bash", "-c",
                  '[ "$AORTA_CELL" = none-none ] || exit 0; exec /no/such/file', cwd=work)
    assert mixed.returncode == 0, mixed.stdout + mixed.stderr  # one cell passed: a sweep's finding
