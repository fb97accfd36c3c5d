"""Issue 14, item 3: stop_after as upstream means it, upstream's `sweep run` flags, the top-level
`mitigations list` / `environments list`, and the deprecated `probe` / `triage` aliases. Every
test runs the real CLI in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine_support import aorta, journal, only_run_dir

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

PROBE = """\
schema_version: 1
mode: probe
ticket: T
trials: 3
mitigation_axis: [none]
diagnostic_axis: [none]
{extra}"""


def _finished(run_dir: Path) -> list[dict]:
    return [e for e in journal(run_dir) if e.get("event") == "trial_finished"]


def test_stop_after_runs_a_passing_cell_max_trials_times(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(PROBE.format(extra="stop_after: {events: 1, max_trials: 5}\n"))
    validate = aorta("recipe", "validate", "--json", str(recipe))
    assert json.loads(validate.stdout)["total_trials"] == 5, validate.stdout
    dry = aorta("sweep", "run", "--recipe", str(recipe), "--dry-run", "--json", "--", "true")
    assert len(json.loads(dry.stdout)["trials"]) == 5, dry.stdout
    out = tmp_path / "out"
    run = aorta("sweep", "run", "--recipe", str(recipe), "-o", str(out), "--", "true")
    assert run.returncode == 0, run.stderr
    assert len(_finished(only_run_dir(out))) == 5


def test_stop_after_stops_at_the_event(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(PROBE.format(extra=""))
    out = tmp_path / "out"
    run = aorta("sweep", "run", "--recipe", str(recipe), "-o", str(out), "--stop-after-events",
                "2", "--max-trials", "6", "--", "false")
    assert run.returncode == 0, run.stderr
    trials = _finished(only_run_dir(out))
    assert [t["verdict"] for t in trials] == ["fail", "fail"]


def test_disable_detector_flag_takes_upstream_ids(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(PROBE.format(extra="trials: 1\n").replace("trials: 3\n", ""))
    out = tmp_path / "out"
    run = aorta("sweep", "run", "--recipe", str(recipe), "-o", str(out), "--disable-detector",
                "tier1:exit_nonzero", "--", "false")
    assert run.returncode == 0, run.stderr
    (trial,) = _finished(only_run_dir(out))
    assert trial["verdict"] == "pass"


@pytest.mark.parametrize(("flags", "code", "words"), [
    (["--disable-detector", "tier4:nan_signatur"], 2, "did you mean 'tier4:nan_signature'"),
    (["--stop-after-events", "2"], 2, "--max-trials"),
    (["--max-trials", "2"], 2, "--stop-after-events"),
    (["--stop-after-events", "3", "--max-trials", "2"], 2, "below the event target"),
    (["--collect", "rocprf"], 2, "did you mean 'rocprof'"),
    (["--baseline-cell", "x"], 2, "flag mode"),
    (["--env-passthrough-mode", "fil"], 2, "inherit, file"),
])
def test_bad_flags_are_located_usage_errors(tmp_path: Path, flags: list[str], code: int,
                                            words: str) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(PROBE.format(extra=""))
    run = aorta("sweep", "run", "--recipe", str(recipe), "-o", str(tmp_path / "o"), *flags,
                "--", "true")
    assert run.returncode == code, (run.stdout, run.stderr)
    assert words in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "o").exists()  # nothing half-written


def test_env_passthrough_mode_flag_overrides_the_recipe(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(PROBE.format(extra="trials: 1\n").replace("trials: 3\n", ""))
    dry = aorta("recipe", "resolve", str(recipe), "--", "true")
    assert "env_passthrough_mode: inherit" in dry.stdout
    out = tmp_path / "out"
    run = aorta("sweep", "run", "--recipe", str(recipe), "-o", str(out),
                "--env-passthrough-mode", "file", "--", "sh", "-c", "test -n \"$AORTA_ENV_FILE\"")
    assert run.returncode == 0, run.stderr
    (trial,) = _finished(only_run_dir(out))
    assert trial["verdict"] == "pass"


def test_flag_mode_baseline_and_threshold(tmp_path: Path) -> None:
    dry = aorta("sweep", "run", "--workload", "gpu_smoke", "--mitigation-axis", "none,tf32_off",
                "--baseline-cell", "tf32_off-local", "--confound-threshold", "1.3", "--dry-run",
                "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["baseline_cell"] == "tf32_off-local"


def test_verbose_streams_trials_to_stderr(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(PROBE.format(extra="trials: 1\n").replace("trials: 3\n", ""))
    run = aorta("sweep", "run", "--recipe", str(recipe), "-o", str(tmp_path / "o"), "--json",
                "-v", "--", "true")
    assert run.returncode == 0, run.stderr
    assert "none-none/trial-000: pass" in run.stderr
    assert all(json.loads(line) for line in run.stdout.splitlines())  # stdout stays JSON


def test_mitigations_and_environments_list_with_a_sidecar(tmp_path: Path) -> None:
    sidecar = tmp_path / "s.json"
    sidecar.write_text(json.dumps({"version": 1, "mitigations": {"my_fix": {"MY_FLAG": "1"}},
                                   "environments": {"my_env": {"env": {"A": "b"}}}}))
    mits = aorta("mitigations", "list", "--file", str(sidecar))
    assert mits.returncode == 0, mits.stderr
    assert "my_fix" in mits.stdout and "MY_FLAG=1" in mits.stdout
    envs = aorta("environments", "list", "--file", str(sidecar), "--json")
    assert envs.returncode == 0, envs.stderr
    assert "my_env" in {e["name"] for e in json.loads(envs.stdout)}


@pytest.mark.parametrize(("argv", "replacement", "stdout_has"), [
    (["probe", "--list-patterns"], "sweep list-patterns", "nvidia_xid"),
    (["triage", "list-mitigations"], "sweep list-mitigations", "tf32_off"),
    (["triage", "list-environments"], "sweep list-environments", "local"),
])
def test_deprecated_aliases_print_one_notice_and_delegate(argv, replacement, stdout_has) -> None:
    run = aorta(*argv)
    assert run.returncode == 0, run.stderr
    notice = [line for line in run.stderr.splitlines() if "deprecated" in line]
    assert len(notice) == 1 and replacement in notice[0]
    assert stdout_has in run.stdout


def test_probe_alias_runs_a_probe_sweep(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(PROBE.format(extra="trials: 1\n").replace("trials: 3\n", ""))
    out = tmp_path / "out"
    run = aorta("probe", "--recipe", str(recipe), "-o", str(out), "--", "sh", "-c", "exit 0")
    assert run.returncode == 0, run.stderr
    assert "'aorta probe' is deprecated" in run.stderr
    assert len(_finished(only_run_dir(out))) == 1


TRIAGE = """\
schema_version: 1
workload: gpu_smoke
trials: 1
steps: 1
{extra}cells:
  - {{name: a, mitigations: [none], environment: {env}}}
"""


def test_emulated_environment_plans_and_refuses_to_run(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(TRIAGE.format(extra="", env="emulated-rocjitsu"))
    dry = aorta("sweep", "run", "--recipe", str(recipe), "--dry-run")
    assert dry.returncode == 0 and "mirage" in dry.stdout, dry.stderr
    run = aorta("sweep", "run", "--recipe", str(recipe), "-o", str(tmp_path / "o"),
                env={"PATH": "/usr/bin:/bin", "MIRAGE_BIN": ""})
    assert run.returncode == 3, run.stderr
    assert "rocjitsu" in run.stderr and "mirage" in run.stderr and "Traceback" not in run.stderr
    assert not list((tmp_path / "o").glob("*/*/trials/*"))


@pytest.mark.parametrize("collect", ["collect: [layer_numerics]\n",
                                     "collect:\n  rocprof:\n  layer_numerics: {NANLOG_SAMPLE_EVERY: '1'}\n"])
def test_collect_loads_plans_and_runs_or_stops_on_a_missing_profiler(
        tmp_path: Path, collect: str) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(TRIAGE.format(extra=collect, env="local"))
    validate = aorta("recipe", "validate", str(recipe))
    assert validate.returncode == 0 and "collect: layer_numerics" in validate.stdout, validate.stderr
    out = tmp_path / "o"
    run = aorta("sweep", "run", "--recipe", str(recipe), "-o", str(out),
                env={"PATH": "/usr/bin:/bin", "ROCPROF_BIN": ""})
    if "rocprof" in collect:  # a profiler the recipe needs is missing: exit 3, nothing run
        assert run.returncode == 3, run.stderr
        assert "rocprof cannot run here: rocprofv3 is not on PATH" in run.stderr
        assert "r.yaml:" in run.stderr and "Traceback" not in run.stderr
        assert not list(out.glob("*/*/trials/*"))
        return
    assert run.returncode == 0, run.stderr
    (trial,) = only_run_dir(out).glob("trials/*/*/result.json")
    collectors = json.loads(trial.read_text())["collectors"]
    # gpu_smoke builds no torch module: layer_numerics ran and watched nothing (and says so)
    assert collectors["layer_numerics"]["status"] == "ran"
    assert "no watched module ran" in collectors["layer_numerics"]["note"]


def test_collect_typo_is_located(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(TRIAGE.format(extra="collect: [layer_numeric]\n", env="local"))
    validate = aorta("recipe", "validate", str(recipe))
    assert validate.returncode == 2
    assert ":5:" in validate.stderr and "did you mean 'layer_numerics'" in validate.stderr


def test_upstream_sidecar_typo_is_located(tmp_path: Path) -> None:
    sidecar = tmp_path / "s.json"
    sidecar.write_text('{\n  "version": 1,\n  "mitigatons": {"x": {"A": "1"}}\n}\n')
    run = aorta("mitigations", "list", "--file", str(sidecar))
    assert run.returncode == 2
    assert "s.json:3:" in run.stderr and "did you mean 'mitigations'" in run.stderr
    sidecar.write_text('{"version": 1, "mitigations": {"x": {"A": 1}}}')
    run = aorta("mitigations", "list", "--file", str(sidecar))
    assert run.returncode == 2 and "s.json" in run.stderr and "Traceback" not in run.stderr
