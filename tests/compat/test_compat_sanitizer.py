"""Issue 14 item 2: ``mode: sanitizer`` recipes run under compute-sanitizer (collect/sanitizer.py).

The CPU path runs a fake ``compute-sanitizer`` (a real executable on PATH, here) that parses
the real tool's arguments, runs the program after ``--`` as a real subprocess, writes a report
in compute-sanitizer's format to ``--log-file`` and exits as the real one does. The real tool
runs in scripts/gpu_sanitizer_check.sh on the GPU box.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.collect.sanitizer import (
    SanitizerRecipe,
    load_sanitizer_recipe,
    parse_report,
    run_sanitizer_recipe,
)
from aorta_tui.collect.sanitizer_report import read_sanitizer_report
from aorta_tui.core.errors import ExitCode
from aorta_tui.core.events import event_from_dict
from aorta_tui.recipe import RecipeValidationError

# Its last test records what the others ran in the attack harness table, so the whole file
# runs in one tier (slow: --fast leaves it all out) and on one xdist worker (its group: CI
# runs this tier with --dist loadgroup), in file order; a worker's counts reach no other.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("tally-compat_sanitizer")]

MEMCHECK_OOB = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at oob_write(int *, int)+0x70 in /src/oob.cu:6
=========     by thread (256,0,0) in block (0,0,0)
=========     Address 0x7f2b5e000400 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f2b5e000000 of size 1024 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2dfbef] in libcuda.so.1
=========
========= Invalid __global__ write of size 4 bytes
=========     at oob_write(int *, int)+0x70 in /src/oob.cu:6
=========     by thread (257,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 32 errors
"""
RACECHECK_RACE = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at smem_race(int *)+0x30 in /src/race.cu:7
=========     and Read access at smem_race(int *)+0x60 in /src/race.cu:11 [248 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""
CLEAN = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
RACE_CLEAN = ("========= COMPUTE-SANITIZER\n"
              "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n")

FAKE = r'''#!{python}
"""A stand-in compute-sanitizer: the real one's argv, a real child, its report format."""
import json, os, subprocess, sys
args = sys.argv[1:]
opts = {{}}
while args and args[0] != "--":
    opts[args[0]] = args[1]
    args = args[2:]
prog = args[1:]
with open(os.environ["FAKE_SAN_ARGV"], "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\n")
code = subprocess.call(prog)
report = open(os.path.join(os.environ["FAKE_SAN_DIR"], opts["--tool"] + ".txt")).read()
with open(opts["--log-file"], "w") as fh:
    fh.write(report)
errors = "ERROR SUMMARY: 0 errors" not in report and "(0 errors" not in report
sys.exit(int(opts["--error-exitcode"]) if errors else code)
'''


@pytest.fixture
def fake_sanitizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bin dir holding the fake on PATH; reports in FAKE_SAN_DIR/<tool>.txt."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "compute-sanitizer"
    tool.write_text(FAKE.format(python=sys.executable))
    tool.chmod(0o755)
    reports = tmp_path / "reports"
    reports.mkdir()
    for name, text in (("memcheck", CLEAN), ("racecheck", RACE_CLEAN), ("synccheck", CLEAN),
                       ("initcheck", CLEAN)):
        (reports / f"{name}.txt").write_text(text)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SAN_DIR", str(reports))
    monkeypatch.setenv("FAKE_SAN_ARGV", str(tmp_path / "argv.jsonl"))
    return reports


def _recipe(tmp_path: Path, tools: str, argv: list[str], extra: str = "") -> Path:
    p = tmp_path / "san.yaml"
    p.write_text(textwrap.dedent(f"""\
        schema_version: 1
        mode: sanitizer
        ticket: SAN-T
        sanitizer_plan:
          target: cuda
          source:
            kind: command
            argv: {json.dumps(argv)}
          sanitizers: [{tools}]
        """) + extra)
    return p


def _program(tmp_path: Path, code: int = 0) -> list[str]:
    marker = tmp_path / "ran"
    return [sys.executable, "-c", f"open({str(marker)!r}, 'a').write('x'); raise SystemExit({code})"]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aorta_tui", *args], capture_output=True,
                          text=True, timeout=120, env=env or dict(os.environ))


def test_memcheck_finds_the_planted_oob_write_located(tmp_path, fake_sanitizer) -> None:
    (fake_sanitizer / "memcheck.txt").write_text(MEMCHECK_OOB)
    recipe = load_sanitizer_recipe(_recipe(tmp_path, "memcheck", _program(tmp_path)))
    run_dir, checks = run_sanitizer_recipe(recipe, tmp_path / "out")
    (c,) = checks
    assert (c.state, c.verdict, c.errors) == ("ran", "fail", 32)
    assert c.first is not None
    assert (c.first.kind, c.first.kernel, c.first.source) == (
        "invalid_global_write", "oob_write(int *, int)", "/src/oob.cu:6")
    assert (c.first.thread, c.first.block, c.first.log_line) == ("(256,0,0)", "(0,0,0)", 2)
    assert "log line 2" in c.reason and "/src/oob.cu:6" in c.reason
    assert (tmp_path / "ran").read_text() == "x"  # the program really ran under the tool
    report = read_sanitizer_report(run_dir / "sanitizer_report.json")
    assert report.overall_verdict == "fail"
    first = report.checks[0].first
    assert first is not None and first.kind == "invalid_global_write"
    assert (run_dir / "memcheck.log").read_text() == MEMCHECK_OOB


def test_racecheck_finds_the_planted_race_and_the_argv_is_exact(tmp_path, fake_sanitizer) -> None:
    (fake_sanitizer / "racecheck.txt").write_text(RACECHECK_RACE)
    argv = _program(tmp_path)
    recipe = load_sanitizer_recipe(_recipe(tmp_path, "racecheck", argv))
    run_dir, (c,) = run_sanitizer_recipe(recipe, tmp_path / "out")
    assert (c.verdict, c.first.kind, c.first.source) == ("fail", "race", "/src/race.cu:7")
    sent = json.loads((tmp_path / "argv.jsonl").read_text().splitlines()[0])
    assert sent == ["--tool", "racecheck", "--error-exitcode", "86", "--print-limit", "100",
                    "--target-processes", "all", "--log-file", str(run_dir / "racecheck.log"),
                    "--", *argv]


def test_clean_program_passes_all_four_tools_exit_0(tmp_path, fake_sanitizer) -> None:
    r = _recipe(tmp_path, "memcheck, racecheck, synccheck, initcheck", _program(tmp_path))
    got = _cli("sweep", "run", "--recipe", str(r), "-o", str(tmp_path / "out"))
    assert got.returncode == 0, got.stdout + got.stderr
    for tool in ("memcheck", "racecheck", "synccheck", "initcheck"):
        assert f"{tool}: pass: 0 errors" in got.stdout
    assert (tmp_path / "ran").read_text() == "xxxx"


def test_cli_exit_1_on_a_finding(tmp_path, fake_sanitizer) -> None:
    (fake_sanitizer / "memcheck.txt").write_text(MEMCHECK_OOB)
    got = _cli("sweep", "run", "--recipe", str(_recipe(tmp_path, "memcheck", _program(tmp_path))),
               "-o", str(tmp_path / "out"), "--json")
    assert got.returncode == ExitCode.FAILURES, got.stderr
    lines = [json.loads(line) for line in got.stdout.splitlines()]
    assert [e["event"] for e in lines] == ["run_started", "run_finished"]
    assert [type(event_from_dict(e)).__name__ for e in lines] == ["RunStarted", "RunFinished"]
    assert lines[-1]["exit_code"] == ExitCode.FAILURES
    assert lines[-1]["summary"]["result"]["checks"][0]["verdict"] == "fail"
    assert lines[0]["run_dir"] == lines[-1]["summary"]["result"]["run_dir"]


def test_program_failing_without_a_finding_is_an_error_not_a_pass(tmp_path, fake_sanitizer) -> None:
    recipe = load_sanitizer_recipe(_recipe(tmp_path, "memcheck", _program(tmp_path, code=3)))
    _, (c,) = run_sanitizer_recipe(recipe, tmp_path / "out")
    assert (c.verdict, c.exit_code) == ("error", 3)
    assert "exited 3" in c.reason


def test_a_report_without_summary_is_an_error(tmp_path, fake_sanitizer) -> None:
    (fake_sanitizer / "memcheck.txt").write_text(
        "========= COMPUTE-SANITIZER\n========= Error: Target application terminated before "
        "first instrumented API call\n")
    recipe = load_sanitizer_recipe(_recipe(tmp_path, "memcheck", _program(tmp_path)))
    _, (c,) = run_sanitizer_recipe(recipe, tmp_path / "out")
    assert c.verdict == "error" and "line 2: Error: Target application terminated" in c.reason


def test_timeout_kills_the_program_group(tmp_path, fake_sanitizer) -> None:
    argv = [sys.executable, "-c", "import time; time.sleep(60)"]
    p = _recipe(tmp_path, "memcheck", argv, "  policy:\n    timeout_seconds: 1\n")
    recipe = load_sanitizer_recipe(p)
    _, (c,) = run_sanitizer_recipe(recipe, tmp_path / "out")
    assert (c.state, c.verdict) == ("timed_out", "error")
    assert c.seconds is not None and c.seconds < 20


def test_no_compute_sanitizer_is_not_available_exit_3(tmp_path) -> None:
    env = {**os.environ, "PATH": str(tmp_path), "CUDA_HOME": str(tmp_path / "nocuda")}
    r = _recipe(tmp_path, "memcheck", _program(tmp_path))
    got = _cli("sweep", "run", "--recipe", str(r), "-o", str(tmp_path / "out"),
               env={**env, "PATH": f"{tmp_path}:{os.path.dirname(sys.executable)}"})
    assert got.returncode == ExitCode.ENVIRONMENT, got.stdout + got.stderr
    assert "memcheck: not_checked: not available: compute-sanitizer is not on PATH" in got.stdout
    assert not (tmp_path / "ran").exists()


def test_rocm_sanitizers_are_not_available_and_dry_run_plans(tmp_path) -> None:
    r = _recipe(tmp_path, "waitcheck, consan", ["/bin/true"])
    got = _cli("sweep", "run", "--recipe", str(r), "-o", str(tmp_path / "out"))
    assert got.returncode == ExitCode.ENVIRONMENT
    assert "waitcheck: not_checked: not available: RocJITsu's rj_waitcheck" in got.stdout
    got = _cli("sweep", "run", "--recipe", str(r), "-o", str(tmp_path / "out"), "--dry-run")
    assert got.returncode == 0 and "consan: not_checked: dry_run" in got.stdout


def test_flags_that_do_not_apply_are_refused(tmp_path) -> None:
    r = _recipe(tmp_path, "memcheck", ["/bin/true"])
    got = _cli("sweep", "run", "--recipe", str(r), "--trials", "3", "-o", str(tmp_path / "o"))
    assert got.returncode == ExitCode.USAGE and "--trials" in got.stderr
    got = _cli("sweep", "run", "--recipe", str(r), "-o", str(tmp_path / "o"), "--", "ls")
    assert got.returncode == ExitCode.USAGE and "-- <command>" in got.stderr


@pytest.mark.parametrize("flag", [
    ["--executor", "slurm"], ["--nodes", "2"], ["--gpus-per-node", "2"],
    ["--trial-isolation", "exec"], ["--bytecode-cache", "off"], ["--i-trust-this-directory"],
    ["--metrics", "0"], ["--no-snapshot"]], ids=lambda f: f[0])
def test_every_sweep_flag_a_sanitizer_recipe_has_no_use_for_is_refused(tmp_path, flag) -> None:
    """These were taken and ignored without a word (the module's promise: refused)."""
    r = _recipe(tmp_path, "memcheck", ["/bin/true"])
    got = _cli("sweep", "run", "--recipe", str(r), *flag, "-o", str(tmp_path / "o"))
    assert got.returncode == ExitCode.USAGE, got.stderr
    assert f"not valid for a mode: sanitizer recipe: {flag[0]}" in got.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("extra", "where", "what"), [
    ("  policy:\n    on_missing_backend: skip\n", ":11:", "always fails closed"),
    ("  policy:\n    timeout_seconds: -1\n", ":11:", "positive number"),
    ("  output:\n    report: ../x.json\n", ":11:", "must be a file name"),
    ("  bogus: 1\n", ":10:3", "unknown key 'bogus'"),
])
def test_bad_recipes_are_located(tmp_path, extra, where, what) -> None:
    with pytest.raises(RecipeValidationError) as e:
        load_sanitizer_recipe(_recipe(tmp_path, "memcheck", ["/bin/true"], extra))
    text = e.value.render()
    assert where in text and what in text, text
    assert e.value.exit_code == ExitCode.USAGE


def test_unknown_tool_and_deferred_source_kind(tmp_path) -> None:
    with pytest.raises(RecipeValidationError) as e:
        load_sanitizer_recipe(_recipe(tmp_path, "memchek", ["/bin/true"]))
    assert "did you mean 'memcheck'" in e.value.render()
    p = tmp_path / "w.yaml"
    p.write_text("schema_version: 1\nmode: sanitizer\nsanitizer_plan:\n  target: cuda\n"
                 "  source: {kind: workload, name: training}\n  sanitizers: [memcheck]\n")
    with pytest.raises(RecipeValidationError) as e:
        load_sanitizer_recipe(p)
    assert "not supported yet" in e.value.render() and ":5:" in e.value.render()


def test_recipe_validate_of_a_sanitizer_recipe_is_not_a_triage_plan(tmp_path) -> None:
    from aorta_tui.recipe import load_recipe

    with pytest.raises(RecipeValidationError) as e:
        load_recipe(_recipe(tmp_path, "memcheck", ["/bin/true"]))
    assert "sweep run --recipe" in e.value.render()


def test_recipe_validate_loads_a_sanitizer_recipe_and_prints_its_plan(tmp_path, fake_sanitizer) -> None:
    r = _recipe(tmp_path, "memcheck, racecheck, consan", ["/bin/true", "--n", "4"])
    got = _cli("recipe", "validate", str(r))
    assert got.returncode == 0, got.stdout + got.stderr
    assert "valid recipe (mode sanitizer" in got.stdout and "ticket SAN-T" in got.stdout
    assert (f"  memcheck: {tmp_path}/bin/compute-sanitizer --tool memcheck --error-exitcode 86 "
            "--print-limit 100 --target-processes all --log-file RUN_DIR/memcheck.log -- "
            "/bin/true --n 4\n") in got.stdout
    assert "consan: -" in got.stdout and "not available: RocJITsu's ConSan" in got.stdout
    assert not (tmp_path / "ran").exists()  # validating runs nothing
    js = json.loads(_cli("recipe", "validate", "--json", str(r)).stdout)
    assert js["ok"] and js["mode"] == "sanitizer" and [c["sanitizer"] for c in js["checks"]] == [
        "memcheck", "racecheck", "consan"]
    assert js["checks"][1]["runs"][-3:] == ["/bin/true", "--n", "4"]
    # without compute-sanitizer the plan says so per check (validation still passes: exit 0)
    env = {**os.environ, "PATH": os.path.dirname(sys.executable), "CUDA_HOME": str(tmp_path / "x")}
    got = _cli("recipe", "validate", str(r), env=env)
    assert got.returncode == 0 and "not available: compute-sanitizer is not on PATH" in got.stdout


def test_recipe_validate_of_a_bad_sanitizer_recipe_is_located_exit_2(tmp_path) -> None:
    r = _recipe(tmp_path, "memchek", ["/bin/true"])
    got = _cli("recipe", "validate", str(r))
    assert got.returncode == ExitCode.USAGE, got.stdout + got.stderr
    assert f"{r}:9:16:" in got.stderr and "did you mean 'memcheck'" in got.stderr
    assert "Traceback" not in got.stderr
    js = json.loads(_cli("recipe", "validate", "--json", str(r)).stdout)
    assert not js["ok"] and js["issues"][0]["line"] == 9


# -- parser and loader fuzzers ----------------------------------------------------------------

_noise = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=80)
_line = st.one_of(_noise, _noise.map(lambda s: "========= " + s),
                  st.sampled_from(MEMCHECK_OOB.splitlines() + RACECHECK_RACE.splitlines()))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=st.lists(_line, max_size=20), after=st.lists(_line, max_size=20))
def test_parser_never_raises_and_locates_a_planted_error(before, after) -> None:
    before = [b for b in before if "Invalid" not in b and "Race" not in b and "\n" not in b
              and "\r" not in b and not any(ch in b for ch in "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")]
    planted = "========= Invalid __shared__ read of size 8 bytes"
    text = "\n".join([*before, planted, "=========     at k+0x10 in a.cu:3", *after])
    got = parse_report(text)
    _FUZZ["parser"] += 1
    f = got.findings[0]
    assert (f.kind, f.log_line, f.source) == ("invalid_shared_read", len(before) + 1, "a.cu:3")


_VALID = {"schema_version": 1, "mode": "sanitizer", "ticket": "T",
          "sanitizer_plan": {"target": "cuda", "source": {"kind": "command", "argv": ["x"]},
                             "sanitizers": ["memcheck"], "policy": {"timeout_seconds": 5}}}
_FUZZ = {"parser": 0, "loader": 0, "loader_failures": 0}
_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                                 st.text(max_size=12)),
                       lambda kids: st.one_of(st.lists(kids, max_size=3),
                                              st.dictionaries(st.text(max_size=8), kids,
                                                              max_size=3)), max_leaves=6)
_paths = st.sampled_from([("mode",), ("schema_version",), ("sanitizer_plan",),
                          ("sanitizer_plan", "source"), ("sanitizer_plan", "source", "kind"),
                          ("sanitizer_plan", "source", "argv"), ("sanitizer_plan", "sanitizers"),
                          ("sanitizer_plan", "policy"), ("sanitizer_plan", "policy",
                                                         "timeout_seconds"),
                          ("sanitizer_plan", "scope"), ("sanitizer_plan", "output"),
                          ("sanitizer_plan", "bogus"), ("ticket",)])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(path=_paths, value=_values)
def test_loader_gives_a_recipe_or_a_located_exit_2(tmp_path, path, value) -> None:
    import copy

    data = copy.deepcopy(_VALID)
    node = data
    for k in path[:-1]:
        if not isinstance(node.get(k), dict):
            node[k] = {}
        node = node[k]
    node[path[-1]] = value
    p = tmp_path / "f.yaml"
    p.write_text(json.dumps(data))
    _FUZZ["loader"] += 1
    try:
        r = load_sanitizer_recipe(p)
    except RecipeValidationError as exc:
        if exc.exit_code != ExitCode.USAGE or not exc.issues or not exc.issues[0].line:
            _FUZZ["loader_failures"] += 1
        assert exc.exit_code == ExitCode.USAGE and exc.issues[0].line >= 1
        return
    assert isinstance(r, SanitizerRecipe) and r.sanitizers


def test_zz_fuzz_counts(attack_tally) -> None:
    """Record what the two fuzzers above ran (they run first: file order)."""
    attack_tally.record("sanitizer report parser", cases=_FUZZ["parser"], failures=0,
                        promise="never raises; a planted error is found at its log line")
    attack_tally.record("sanitizer recipe fuzzer", cases=_FUZZ["loader"],
                        failures=_FUZZ["loader_failures"],
                        promise="a recipe or a located exit 2, never a traceback")
    assert _FUZZ["loader_failures"] == 0
