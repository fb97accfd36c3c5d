"""sweep/child.py: the engine entry point the agent runs each iteration through (it ran the
command line, `sweep run --json`, as a child before), and the request file it reads
(sweep/way_in.write_request / read_request)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.core.errors import UsageError
from aorta_tui.sweep.way_in import SweepRequest, read_request, write_request

REPO = Path(__file__).resolve().parents[2]
RECIPE = """\
schema_version: 1
mode: probe
ticket: T-CHILD
trials: 2
timeout_per_trial: 30
mitigation_axis: [none]
diagnostic_axis: [none]
"""


def _child(request: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aorta_tui.sweep.child", str(request)], cwd=cwd,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


# An older agent's file held the command line's view keys too (dry_run, json_mode, verbose);
# the child never read them, so such a file runs the same sweep: the run, not a plan, JSON lines
@pytest.mark.parametrize("older_keys", [{}, {"dry_run": True, "json_mode": False, "verbose": 2}],
                         ids=["this version's file", "an older agent's file"])
def test_a_request_runs_its_sweep_with_the_events_on_stdout(tmp_path: Path,
                                                            older_keys: dict[str, object]) -> None:
    (tmp_path / "probe.yaml").write_text(RECIPE)
    req = SweepRequest(recipe=tmp_path / "probe.yaml", command=["sh", "-c", "echo step 1"],
                       output=tmp_path / "runs", snapshots=False)
    write_request(req, tmp_path / "req.json")
    if older_keys:
        data = json.loads((tmp_path / "req.json").read_text())
        (tmp_path / "req.json").write_text(json.dumps({**data, **older_keys}))
    proc = _child(tmp_path / "req.json", tmp_path)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events[0]["event"] == "run_started" and events[-1]["event"] == "run_finished"
    assert sum(e["event"] == "trial_finished" for e in events) == 2
    run_dir = Path(events[0]["run_dir"])
    assert run_dir.parent == tmp_path / "runs" / "T-CHILD" and (run_dir / "matrix.json").is_file()


def test_a_damaged_request_is_exit_2_naming_the_field(tmp_path: Path) -> None:
    write_request(SweepRequest(recipe=tmp_path / "r.yaml"), tmp_path / "req.json")
    data = json.loads((tmp_path / "req.json").read_text())
    data["seed"] = "not a number"
    (tmp_path / "req.json").write_text(json.dumps(data))
    proc = _child(tmp_path / "req.json", tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f"{tmp_path / 'req.json'}: seed: expected an integer or null" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "aorta-out").exists()


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
_path = st.builds(Path, st.text(st.characters(whitelist_categories=("L", "N")), min_size=1, max_size=12))


@settings(max_examples=60, deadline=None)
@given(recipe=st.none() | _path, command=st.lists(_text, max_size=3), seed=st.none() | st.integers(0, 2**40),
       trials=st.none() | st.integers(1, 99), files=st.lists(_path, max_size=2),
       threshold=st.none() | st.floats(0.5, 9.0), snapshots=st.booleans(), fd=st.none() | st.integers(0, 999))
def test_a_request_file_reads_back_as_the_request(tmp_path_factory, recipe, command, seed, trials, files,
                                                  threshold, snapshots, fd) -> None:
    req = SweepRequest(recipe=recipe, command=command, seed=seed, trials=trials, mitigation_files=files,
                       confound_threshold=threshold, snapshots=snapshots, secret_values_fd=fd)
    path = tmp_path_factory.mktemp("req") / "req.json"
    write_request(req, path)
    assert read_request(path) == req


@settings(max_examples=80, deadline=None)
@given(field=st.sampled_from(["recipe", "command", "seed", "snapshots", "mitigation_files",
                              "confound_threshold", "trials", "no_such_field"]),
       value=st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True),
                       _text, st.lists(st.integers(), max_size=2), st.dictionaries(_text, _text, max_size=1)))
def test_a_damaged_field_is_a_located_error_never_a_traceback(tmp_path_factory, field, value) -> None:
    path = tmp_path_factory.mktemp("req") / "req.json"
    write_request(SweepRequest(recipe=Path("r.yaml")), path)
    data = json.loads(path.read_text())
    data[field] = value
    path.write_text(json.dumps(data))
    try:
        got = read_request(path)
    except UsageError as exc:
        assert str(path) in str(exc) and exc.exit_code == 2
        return
    # accepted: only a value of the annotated type (a float field takes an int)
    assert field != "no_such_field"
    assert getattr(got, field) == (value if not isinstance(getattr(got, field), Path) else Path(value))


@pytest.mark.parametrize(("field", "value", "wanted"), [
    ("confound_threshold", 10**400, "expected a finite number or null"),  # was an OverflowError
    ("seed", True, "expected an integer or null"),  # true is no seed
    ("mitigation_files", ["a.yaml", ""], "[1]: expected a path (a non-empty string)"),
    ("snapshots", None, "expected true or false"),
])
def test_a_wrong_value_is_located_and_says_what_the_field_takes(tmp_path: Path, field: str,
                                                                 value: object, wanted: str) -> None:
    path = tmp_path / "req.json"
    write_request(SweepRequest(recipe=Path("r.yaml")), path)
    path.write_text(json.dumps({**json.loads(path.read_text()), field: value}))
    with pytest.raises(UsageError) as info:
        read_request(path)
    assert str(info.value).startswith(f"{path}: {field}") and info.value.hint
    assert wanted in str(info.value)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_sigterm_while_it_starts_is_an_interruption_not_a_death_by_the_signal(tmp_path: Path) -> None:
    # the agent reads exit 130 as "interrupted" (the iteration resumable); death by SIGTERM
    # (-15) would be "the sweep exited -15"
    import signal
    import time

    (tmp_path / "probe.yaml").write_text(RECIPE)
    write_request(SweepRequest(recipe=tmp_path / "probe.yaml", command=["sleep", "30"],
                               output=tmp_path / "runs", snapshots=False), tmp_path / "req.json")
    codes = set()
    for delay in (0.05, 0.3, 1.0, 3.0, 6.0):
        proc = subprocess.Popen([sys.executable, "-m", "aorta_tui.sweep.child", str(tmp_path / "req.json")],
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        codes.add(proc.returncode)
        assert "Traceback" not in err, err
    # 130 from the first line on; -15 only inside Python's own start-up, before main runs
    assert codes <= {130, -signal.SIGTERM} and 130 in codes, codes
