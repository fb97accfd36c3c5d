"""Issue 38: what a newcomer tripped on in the CLI, each done as the user did it: the real
``aorta-tui`` in a fresh directory, with the default output."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine_support import output_on_a_pty

pytestmark = pytest.mark.slow  # real processes

REPO = Path(__file__).resolve().parents[2]
ENTRY = str(Path(sys.executable).with_name("aorta-tui"))
PROBE = ("schema_version: 1\nmode: probe\nticket: QUICK\ntrials: 1\ntimeout_per_trial: 30\n"
         "mitigation_axis: [none]\ndiagnostic_axis: [none]\n")


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None,
        timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ENTRY, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL,
                          env={**os.environ, "COLUMNS": "80", **(env or {})})


# item 13 ------------------------------------------------------------------------------------

def test_readme_setup_heading_counts_the_numbered_commands() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    heading = re.search(r"^## Set-up: (\w+) commands$", text, re.M)
    assert heading is not None
    block = text[heading.end():].split("```bash", 1)[1].split("```", 1)[0]
    numbered = re.findall(r"^# (\d+)\. ", block, re.M)
    words = {"two": 2, "three": 3, "four": 4}
    assert words[heading.group(1)] == len(numbered) == int(numbered[-1])


def _next_lines(stdout: str) -> list[str]:
    lines = stdout.rstrip("\n").splitlines()
    return lines[lines.index("next:"):]


def test_the_next_lines_fit_80_columns_and_each_works_without_pandas(tmp_path: Path) -> None:
    (tmp_path / "probe.yaml").write_text(PROBE)
    # a fresh install: no pandas (the analysis extra) on the path
    block = tmp_path / "nopandas"
    block.mkdir()
    (block / "sitecustomize.py").write_text("import sys\nsys.modules['pandas'] = None\n")
    env = {"PYTHONPATH": str(block)}
    res = cli(tmp_path, "--batch", "probe.yaml", "--", "bash", "-c", "echo step ok", env=env)
    assert res.returncode == 0, res.stderr
    shown = _next_lines(res.stdout)
    assert all(len(line) <= 80 for line in shown), shown
    commands = [line.split() for line in shown[1:] if not line.lstrip().startswith("#")]
    assert [c[:2] for c in commands] == [["aorta-tui", "attach"], ["aorta-tui", "export"],
                                          ["aorta-tui", "bundle"]]
    # the export line works as printed (it needed pandas until CSV was written without it)
    export = cli(tmp_path, *commands[1][1:], env=env)
    assert export.returncode == 0, export.stderr
    assert "trials.csv" in export.stdout and "pandas" not in export.stderr


# item 10 ------------------------------------------------------------------------------------

def test_a_failed_policy_sweep_leaves_no_empty_output_directory(tmp_path: Path) -> None:
    res = cli(tmp_path, "policy", "sweep", "tiny_kernel_stress", "--policies", "cuda_graphs",
              "--streams", "2", "--trials", "1", "-i", "2", "--warmup", "1", "--device", "cpu",
              "--size", "tiny")
    assert res.returncode == 2, res.stderr
    assert "nothing was kept" in res.stderr
    assert not (tmp_path / "aorta-policy").exists(), list(tmp_path.rglob("*"))


# item 9 -------------------------------------------------------------------------------------

def _on_a_pty(cwd: Path, *args: str, columns: int = 80) -> str:
    return output_on_a_pty([ENTRY, *args], cwd, columns=columns)


def _workload_names(cwd: Path) -> list[str]:
    import json

    res = cli(cwd, "queue", "list", "--json")
    assert res.returncode == 0, res.stderr
    return [w["name"] for w in json.loads(res.stdout)]


def test_queue_list_piped_is_one_row_per_line_with_whole_names(tmp_path: Path) -> None:
    names = _workload_names(tmp_path)
    res = cli(tmp_path, "queue", "list")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == len(names) + 2  # the title, the header, a line per workload
    assert [ln.split()[0] for ln in lines[2:]] == names


def test_queue_list_on_an_80_column_terminal_never_breaks_a_name(tmp_path: Path) -> None:
    names = _workload_names(tmp_path)
    text = _on_a_pty(tmp_path, "queue", "list")
    cells = {cell.strip() for line in text.splitlines() for cell in re.split(r"[│┃|]", line)}
    assert "speculative_decode" in names and "hetero_kernels" in names
    assert set(names) <= cells, sorted(set(names) - cells)
    assert max(len(line) for line in text.splitlines()) <= 80


# item 11 ------------------------------------------------------------------------------------

def test_the_shipped_sanitizer_example_validates_and_runs_as_the_readme_says(
        tmp_path: Path) -> None:
    import shutil

    (tmp_path / "recipes" / "examples").mkdir(parents=True)
    shutil.copy(REPO / "recipes" / "examples" / "sanitizer.yaml", tmp_path / "sanitizer.yaml")
    res = cli(tmp_path, "recipe", "validate", "sanitizer.yaml")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "valid recipe (mode sanitizer" in res.stdout and "memcheck" in res.stdout
    bare = {"PATH": "/usr/bin:/bin"}  # no compute-sanitizer here: said, exit 3, no pass
    run = cli(tmp_path, "sweep", "run", "--recipe", "sanitizer.yaml", env=bare)
    assert run.returncode == 3, run.stdout + run.stderr
    assert "not available" in run.stdout + run.stderr


def test_the_sanitizer_schema_is_documented_key_by_key_where_the_error_points(
        tmp_path: Path) -> None:
    from aorta_tui.collect import sanitizer as S

    (tmp_path / "bad.yaml").write_text("schema_version: 1\nmode: sanitizer\n"
                                       "sanitizer_plan: [oops]\n")
    res = cli(tmp_path, "recipe", "validate", "bad.yaml")
    assert res.returncode == 2
    doc = re.search(r"docs/\w+\.md", res.stderr.split("sanitizer_plan must be a mapping")[1])
    assert doc is not None, res.stderr
    text = (REPO / doc.group(0)).read_text(encoding="utf-8")
    section = text.split("## Sanitizer recipes", 1)[1].split("\n## ", 1)[0]
    fields = set().union(*S.SOURCE_FIELDS.values())
    for key in (*S.TOP_LEVEL, *S.PLAN_KEYS, *S.SOURCE_KINDS, *S.SANITIZERS, *fields,
                "timeout_seconds", "consan_policy", "on_missing_backend", "report"):
        assert re.search(rf"[`.]{key}\b", section), key


# item 2 -------------------------------------------------------------------------------------

def _toolkit_without_extras(tmp_path: Path) -> Path:
    """A CUDA toolkit as the distribution packages lay it out: cupti.h in include/,
    libcupti.so.13 in lib64/, no extras/CUPTI (the real headers and library of the wheels)."""
    from tests.trace.test_trace_device_build import real_cupti_root

    root = real_cupti_root()
    if root is None:
        pytest.skip("no real CUPTI: scripts/test.sh unpacks the wheels into .venv/cupti-headers")
    home = tmp_path / "cuda"
    (home / "lib64").mkdir(parents=True)
    (home / "include").symlink_to(root / "include")
    (home / "lib64" / "libcupti.so.13").symlink_to(root / "lib" / "libcupti.so.13")
    return home


def test_trace_info_finds_cupti_where_env_probe_does(tmp_path: Path) -> None:
    import json

    home = _toolkit_without_extras(tmp_path)
    env = {"CUDA_HOME": str(home), "AORTA_CUPTI_ROOT": "", "XDG_CACHE_HOME": str(tmp_path)}
    info = cli(tmp_path, "trace", "info", env=env)
    section = info.stdout.split("GPU start times", 1)[1]
    row = next(line for line in section.splitlines() if line.strip().startswith("cuda "))
    assert "available: cupti collector" in row and f"CUDA toolkit {home}" in row, row
    probe = cli(tmp_path, "env", "probe", "--no-torch", "-o", "snap.json", env=env)
    assert probe.returncode == 0, probe.stderr
    cupti = json.loads((tmp_path / "snap.json").read_text())["cuda"]["cupti"]
    found = [cupti["path"]["value"], *(cupti["other_copies"].get("value") or [])]
    lib = os.path.realpath(home / "lib64" / "libcupti.so.13")
    assert lib in {os.path.realpath(p) for p in found}, found


# item 3 -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("fixture", "what", "command"), [
    ("tests/fixtures/hwqueue/run-cpu.json", "a `queue run` result", "queue compare"),
    ("tests/fixtures/hwqueue/sweep-cpu.json", "a `queue sweep` result", "queue compare"),
    ("tests/tui/fixtures/policy/policy.json", "a `policy sweep` report", "policy report"),
])
def test_env_diff_on_the_tools_other_json_names_what_it_is(tmp_path: Path, fixture: str,
                                                            what: str, command: str) -> None:
    import shutil

    shutil.copy(REPO / fixture, tmp_path / "base.json")
    shutil.copy(REPO / "tests/tui/fixtures/env/cpu-box-plain.json", tmp_path / "a.json")
    res = cli(tmp_path, "env", "diff", "base.json", "a.json")
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"base.json is {what}" in res.stderr and "not an environment snapshot" in res.stderr
    assert command in res.stderr
    assert "unknown snapshot schema_version" not in res.stderr


# item 14 ------------------------------------------------------------------------------------

def test_queue_compare_says_why_a_large_change_is_unchanged(tmp_path: Path) -> None:
    import shutil

    for name in ("run-cpu.json", "run-cpu-repeat3.json"):
        shutil.copy(REPO / "tests" / "fixtures" / "hwqueue" / name, tmp_path / name)
    res = cli(tmp_path, "queue", "compare", "run-cpu.json", "run-cpu-repeat3.json",
              env={"COLUMNS": "200"})
    assert res.returncode == 0, res.stderr
    row = next(ln for ln in res.stdout.splitlines() if ln.startswith("latency_mean_ms "))
    assert "+6628.5%" in row and "unchanged: 95% CIs overlap: base 0.129-0.174, test" in row
    small = next(ln for ln in res.stdout.splitlines() if ln.startswith("achieved_concurrency"))
    assert "unchanged: |change| < 5%" in small


# item 4 -------------------------------------------------------------------------------------

def test_the_gpu_hint_names_size_and_a_cpu_run_is_small_and_says_how_far_it_is(
        tmp_path: Path) -> None:
    import json

    hint = cli(tmp_path, "queue", "run", "hetero_kernels", "--streams", "8")
    assert hint.returncode == 3, hint.stdout + hint.stderr  # no GPU on the test machine
    assert "--device cpu" in hint.stderr and "--size" in hint.stderr
    # what the user typed next, piped: small sizes by default on a CPU, progress on stderr
    res = cli(tmp_path, "queue", "run", "hetero_kernels", "--streams", "8", "--device", "cpu",
              "-o", "r.json", timeout=600)
    assert res.returncode == 0, res.stderr
    progress = [ln for ln in res.stderr.splitlines() if re.match(r"\s+\d+/\d+ ", ln)]
    assert len(progress) >= 3, res.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["workload"]["size"] == "tiny"
    quiet = cli(tmp_path, "queue", "run", "tiny_kernel_stress", "--streams", "2", "--device",
                "cpu", "-i", "3", "-w", "1", "--quiet")
    assert quiet.returncode == 0 and not re.search(r"\d+/\d+ ", quiet.stderr), quiet.stderr


def test_matrix_md_says_why_a_far_faster_cell_is_within_noise(tmp_path: Path) -> None:
    # the newcomer's case: a p50 of 125 us against a baseline of 48 ms, marked "within noise":
    # the baseline's trials spread from 0.4 ms to 96 ms, and the row now says so
    (tmp_path / "probe.yaml").write_text(
        "schema_version: 1\nmode: probe\nticket: NOISE\ntrials: 3\ntimeout_per_trial: 30\n"
        "order: sequential\nstep_time_regex: 'step_time=([0-9.]+)'\n"
        "mitigation_axis: [none, tf32_off]\ndiagnostic_axis: [none]\n")
    script = (
        'if [ -n "$DISABLE_TF32" ]; then v=0.000125; else n=$(cat count 2>/dev/null || echo 0); '
        'echo $((n + 1)) > count; v=$(echo "0.096 0.0004 0.048" | cut -d" " -f$((n % 3 + 1))); '
        'fi; for i in 1 2 3; do echo "step_time=$v"; done')
    res = cli(tmp_path, "--batch", "probe.yaml", "--", "bash", "-c", script)
    assert res.returncode == 0, res.stdout + res.stderr
    matrix = next(tmp_path.glob("aorta-out/NOISE/*/matrix.md")).read_text()
    row = next(ln for ln in matrix.splitlines() if ln.startswith("| tf32_off-none |"))
    assert re.search(r"within noise \(x1/\d+; noise ±\d+\.\d+ ms\)", row), row


# a recipe given where a command goes; an upstream workload not carried here -----------------

def test_a_recipe_given_as_the_command_is_refused_with_the_flag_to_use(tmp_path: Path) -> None:
    (tmp_path / "quick.yaml").write_text(PROBE)
    got = cli(tmp_path, "sweep", "run", "quick.yaml")
    assert got.returncode == 2, got.stderr
    assert "is a recipe file, not a command" in got.stderr
    assert "sweep run --recipe quick.yaml" in got.stderr
    assert not (tmp_path / "aorta-out").exists()  # nothing was started


UPSTREAM_HRX = ("schema_version: 1\nticket: HRX\nworkload: hrx\ntrials: 1\nsteps: 1\n"
                "workload_config: {probe: module}\ncells:\n"
                "  - {name: hrx_off, mitigations: [none], environment: local}\n")


def test_an_upstream_workload_plans_and_a_run_says_it_is_not_carried(tmp_path: Path) -> None:
    (tmp_path / "hrx.yaml").write_text(UPSTREAM_HRX)
    checked = cli(tmp_path, "recipe", "validate", "hrx.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "upstream AORTA's" in checked.stdout
    ran = cli(tmp_path, "sweep", "run", "--recipe", "hrx.yaml")
    assert ran.returncode == 3, ran.stdout + ran.stderr
    assert "does not carry the workload" in ran.stderr
    assert "aorta sweep run" in ran.stderr  # where it can run


def test_a_misspelt_workload_is_still_a_located_error(tmp_path: Path) -> None:
    (tmp_path / "typo.yaml").write_text(UPSTREAM_HRX.replace("workload: hrx", "workload: trainig"))
    got = cli(tmp_path, "recipe", "validate", "typo.yaml")
    assert got.returncode == 2, got.stdout + got.stderr
    assert "unknown workload 'trainig'" in got.stdout + got.stderr
    assert "training" in got.stdout + got.stderr


@pytest.mark.parametrize("flag", [["--trials", "1"], ["-n", "1"], ["--steps", "3"],
                                  ["--mitigation-axis", "none"], ["--workload", "gpu_smoke"]])
def test_a_flag_mode_option_with_a_recipe_is_refused_not_ignored(tmp_path: Path, flag: list[str]) -> None:
    """`--batch quickstart.yaml --trials 1` ran the recipe's 2 trials a cell without a word."""
    (tmp_path / "quick.yaml").write_text(PROBE)
    got = cli(tmp_path, "--batch", "quick.yaml", *flag, "--dry-run")
    assert got.returncode == 2, got.stdout + got.stderr
    assert "is for flag mode (no recipe)" in got.stderr and "in the recipe" in got.stderr
    assert "Traceback" not in got.stderr


def test_the_trial_count_is_spelled_the_same_for_policies(tmp_path: Path) -> None:
    got = cli(tmp_path, "policy", "sweep", "tiny_kernel_stress", "--policies", "baseline",
              "--streams", "2", "-n", "4", "--timeout", "7", "--device", "cpu", "--dry-run")
    assert got.returncode == 0, got.stderr
    assert "4 trials per policy" in got.stdout
