"""The typed trial contract (core/trial_contract.py): trial_spec.json, result.json, the events.

Round trips are property tests over the shapes the engine writes; damaged files must give a
located UsageError (file and field), never a traceback; the old result.json files of the TUI's
fixture run directories still load, and journal lines stay what they were.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.core.aggregate import CellStats
from aorta_tui.core.errors import UsageError
from aorta_tui.core.events import CellAggregated, RunWarning, TrialFinished, event_from_dict
from aorta_tui.core.process_record import ProcessRecord
from aorta_tui.core.trial_contract import TrialResult, WorkerSpec, workload_result_filename
from aorta_tui.store.journal_reader import parse_journal_line
from aorta_tui.sweep.orchestrator import load_trial_records

FIXTURE_RUNS = Path(__file__).parent.parent / "tui" / "fixtures" / "aorta-out" / "TUI-DEMO"

# JSON values as the engine writes them: finite numbers, strings, nested objects and arrays.
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                    st.floats(allow_nan=False, allow_infinity=False, width=32), st.text(max_size=8))
_json = st.recursive(_scalar, lambda kids: st.one_of(st.lists(kids, max_size=3),
                                                     st.dictionaries(st.text(max_size=6), kids, max_size=3)),
                     max_leaves=8)
_obj = st.dictionaries(st.text(max_size=6), _json, max_size=4)
_name = st.text(st.characters(categories=["L", "N"]), min_size=1, max_size=10)
_num = st.floats(0, 1e6, allow_nan=False)

worker_specs = st.builds(
    WorkerSpec, workload=_name, trial_dir=st.text(min_size=1, max_size=20),
    steps=st.integers(1, 10**6), config=_obj, seed=st.integers(0, 10**9),
    workload_ref=st.one_of(st.none(), _name), switches=st.lists(_name, max_size=3).map(tuple),
    collect=st.dictionaries(st.sampled_from(["layer_numerics", "torch_profiler"]), _obj, max_size=2),
)
trial_results = st.builds(
    TrialResult, trial_id=_name.map(lambda c: f"{c}/trial-000"), cell=_name, trial=st.integers(0, 999),
    verdict=st.sampled_from(["pass", "fail", "error"]), order=st.one_of(st.none(), st.integers(0, 99)),
    session=st.one_of(st.none(), st.integers(1, 9)), reason=st.text(max_size=10),
    detections=st.lists(st.fixed_dictionaries({"id": _name, "severity": st.sampled_from(["fail", "error", "info"])}),
                        max_size=3),
    process=st.builds(ProcessRecord, wall_s=_num, exit_code=st.one_of(st.none(), st.integers(-9, 255))),
    argv=st.lists(st.text(max_size=8), max_size=3), env_overlay=st.dictionaries(_name, st.text(max_size=5), max_size=2),
    mitigations=st.lists(_name, max_size=2), environment=st.text(max_size=6),
    step_times_s=st.one_of(st.none(), st.lists(_num, max_size=4)),
    step_time_source=st.sampled_from(["workload", "step_time_regex", "trial_wall", "none"]),
    workload_result=st.one_of(st.none(), _obj), trace=st.one_of(st.none(), _obj),
    timeline=st.one_of(st.none(), _obj),
    extra=st.dictionaries(st.sampled_from(["collectors", "collected", "retention"]), _json, max_size=2),
)
_rate = st.one_of(st.none(), st.floats(0, 1))
cell_stats = st.builds(
    CellStats, cell=_name, trials=st.integers(0, 99), passed=st.integers(0, 99), failed=st.integers(0, 99),
    errored=st.integers(0, 99), failure_rate=_rate, error_rate=_rate,
    step_time=st.dictionaries(st.sampled_from(["mean", "p50", "p99"]), st.one_of(st.none(), _num)),
    step_count=st.integers(0, 999), step_time_source=st.sampled_from(["workload", "none"]),
    top_detectors=st.lists(st.tuples(_name, st.integers(1, 9)), max_size=3),
    noise=_obj, confound=_obj, cross_trial_failures=st.lists(_obj, max_size=2),
)


def _through_json(d: dict) -> dict:
    return json.loads(json.dumps(d))


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=60, deadline=None)
@given(spec=worker_specs, result=trial_results, stats=cell_stats)
def test_each_contract_type_round_trips_through_its_json(spec, result, stats, attack_tally) -> None:
    failures = 0
    failures += WorkerSpec.from_dict(_through_json(spec.to_dict())) != spec
    failures += TrialResult.from_dict(_through_json(result.to_dict())) != result
    failures += TrialResult.from_dict(_through_json(result.to_dict()), strict=False) != result
    failures += CellStats.from_dict(_through_json(stats.to_dict())) != stats
    # the event line carries the same dicts, and reads back to the same typed event
    agg = CellAggregated("r", cell=stats.cell, stats=stats, ts=1.0)
    failures += event_from_dict(_through_json(agg.to_dict())) != agg
    attack_tally.record("trial contract round trip", cases=5, failures=failures,
                        promise="to_dict -> JSON -> from_dict is the identity")
    assert failures == 0


def test_the_trial_finished_line_is_what_it_was_and_carries_no_result() -> None:
    result = TrialResult("a/trial-000", "a", 0, "fail", detections=[{"id": "exit_code", "severity": "fail"},
                                                                   {"id": "note", "severity": "info"}],
                         process=ProcessRecord(wall_s=2.5), step_times_s=[0.1, 0.3])
    ev = TrialFinished.of("r", result, trial_dir="/t", exit_code=1, signal=None, wall_s=2.5)
    assert ev.result is result and ev.detectors == ["exit_code"] and ev.mean_step_s == pytest.approx(0.2)
    line = ev.to_dict()
    assert list(line) == ["event", "run_id", "ts", "trial_id", "cell", "trial", "verdict", "exit_code",
                          "signal", "wall_s", "detectors", "reason", "trial_dir", "mean_step_s"]
    back = event_from_dict(_through_json(line))
    assert back == ev and back.result is None  # equal: the result is not part of the line
    # a foreign line's "result" key never becomes an untyped result
    parsed, why = parse_journal_line(json.dumps({**line, "result": {"x": 1}}).encode())
    assert why is None and parsed.result is None


def test_the_warning_event_keeps_its_wire_name() -> None:
    ev = RunWarning("r", message="m", code="c", ts=1.0)
    assert ev.to_dict()["event"] == "warning"
    old_line = b'{"event": "warning", "run_id": "r", "ts": 1.0, "message": "m", "code": "c"}'
    assert parse_journal_line(old_line) == (ev, None)


def test_a_cell_aggregated_line_with_damaged_stats_is_a_damaged_line_not_a_crash() -> None:
    ok = b'{"event": "cell_aggregated", "run_id": "r", "ts": 1, "cell": "a", "stats": {"trials": 2}}'
    ev, why = parse_journal_line(ok)
    assert why is None and isinstance(ev.stats, CellStats) and ev.stats.trials == 2
    bad = b'{"event": "cell_aggregated", "run_id": "r", "ts": 1, "cell": "a", "stats": {"trials": "two"}}'
    ev, why = parse_journal_line(bad)
    assert ev is None and "trials" in why and "integer" in why


# -- damaged files ----------------------------------------------------------------------------

_SPEC = {"workload": "gpu_smoke", "workload_ref": None, "steps": 2, "config": {}, "seed": 0,
         "trial_dir": "/tmp/x", "switches": []}
_DAMAGE = [
    ("truncated", lambda text: text[: len(text) // 2], "not valid JSON"),
    ("empty", lambda text: "", "empty"),
    ("an array", lambda text: "[1, 2]", "expected an object"),
]


def _field_damage(base: dict) -> list[tuple[str, dict]]:
    """Each typed field set to a value of the wrong JSON type."""
    out = []
    for key, value in base.items():
        wrong = "text" if not isinstance(value, str) else 7
        out.append((key, {**base, key: wrong}))
    return out


def test_a_damaged_trial_spec_gives_a_located_error(tmp_path: Path, attack_tally) -> None:
    path = tmp_path / "trial_spec.json"
    text = json.dumps(_SPEC)
    cases = failures = 0
    for _what, damage, expect in _DAMAGE:
        path.write_text(damage(text))
        cases += 1
        with pytest.raises(UsageError) as exc:
            WorkerSpec.from_json(path)
        failures += not (str(path) in exc.value.message and expect in exc.value.message)
    for key, data in _field_damage(_SPEC):
        if key == "workload_ref":  # nullable string: 7 is still wrong, "text" is a name
            data = {**_SPEC, key: 7}
        path.write_text(json.dumps(data))
        cases += 1
        try:
            WorkerSpec.from_json(path)
            failures += 1
        except UsageError as exc:
            failures += not exc.message.startswith(f"{path}: {key}: expected")
    attack_tally.record("trial spec damage", cases=cases, failures=failures,
                        promise="a located UsageError (file, field), never a traceback")
    assert failures == 0


def test_the_trial_worker_refuses_a_damaged_spec_with_exit_2_and_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "trial_spec.json"
    path.write_text(json.dumps({**_SPEC, "steps": "many", "trial_dir": str(tmp_path)}))
    proc = subprocess.run([sys.executable, "-m", "aorta_tui.trial.worker", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"{path}: steps: expected an integer" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "workload_result.json").exists()  # nothing ran, nothing claims it did


def test_a_damaged_result_gives_a_located_error_and_reads_leniently(tmp_path: Path, attack_tally) -> None:
    src = next(FIXTURE_RUNS.glob("*/trials/*/trial-000/result.json"))
    base = json.loads(src.read_text())
    path = tmp_path / "result.json"
    cases = failures = 0
    for _what, damage, expect in _DAMAGE:
        path.write_text(damage(json.dumps(base)))
        cases += 1
        with pytest.raises(UsageError) as exc:
            TrialResult.from_json(path)
        failures += not (str(path) in exc.value.message and expect in exc.value.message)
    for key, data in _field_damage(base):
        path.write_text(json.dumps(data))
        cases += 1
        try:
            TrialResult.from_json(path)
            failures += key != "workload_result"  # null -> "text" is wrong; fixture's is null
        except UsageError as exc:
            failures += not exc.message.startswith(f"{path}: {key}: expected")
        if key in ("trial_id", "cell", "trial", "verdict", "schema_version"):
            continue
        lenient = TrialResult.from_dict(data, strict=False)  # the run directory's reading
        failures += lenient.verdict != base["verdict"]
    attack_tally.record("trial result damage", cases=cases, failures=failures,
                        promise="strict: a located UsageError; lenient: the verdict still counts")
    assert failures == 0


# -- old files --------------------------------------------------------------------------------


def test_old_result_files_of_a_fixture_run_still_load(tmp_path: Path) -> None:
    paths = sorted(FIXTURE_RUNS.glob("*/trials/*/trial-*/result.json"))
    assert len(paths) >= 12
    for path in paths:
        old = json.loads(path.read_text())
        assert "timeline" not in old and "trace" not in old  # written before those keys existed
        typed = TrialResult.from_json(path)
        again = typed.to_dict()
        assert {k: again[k] for k in old} == old  # every key as it was, in the same order
        assert list(again)[: len(old)] == list(old)
        assert again["timeline"] is None and again["trace"] is None
    run = next(p for p in FIXTURE_RUNS.iterdir() if (p / "plan.json").is_file())
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    records = load_trial_records(copy)
    assert records and all(isinstance(r, TrialResult) for r in records)
    assert [r.trial_id for r in records] == sorted(r.trial_id for r in records)


def test_the_workload_result_file_is_named_in_one_place() -> None:
    from aorta_tui.trial import worker as trial_worker

    assert trial_worker.result_filename(0) == workload_result_filename(0) == "workload_result.json"
    assert trial_worker.result_filename(3) == "workload_result.rank3.json"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_json)
def test_any_json_as_a_trial_spec_or_result_is_typed_or_a_usage_error(data, attack_tally) -> None:
    failures = 0
    for parse in (WorkerSpec.from_dict, TrialResult.from_dict,
                  lambda d: TrialResult.from_dict(d, strict=False), CellStats.from_dict):
        try:
            parse(data)
        except UsageError:
            pass
        except Exception:  # anything else would be a traceback for the user
            failures += 1
    attack_tally.record("trial contract fuzzer", cases=4, failures=failures,
                        promise="any JSON value: typed, or a UsageError (exit 2)")
    assert failures == 0


def test_a_sweep_record_is_typed_as_its_file_will_read_and_never_stops_the_sweep(tmp_path: Path) -> None:
    from aorta_tui.core.atomic import atomic_write_json

    record = {"schema_version": 1, "trial_id": "a/trial-000", "cell": "a", "trial": 0, "order": 0,
              "session": 1, "verdict": "pass", "reason": "", "detections": [], "process": {"wall_s": 1.0},
              "argv": ["x"], "env_overlay": {}, "mitigations": [], "environment": "local",
              "step_times_s": [float("nan"), 0.5], "step_time_source": "workload",
              "workload_result": {"paths": {tmp_path}}, "trace": None, "timeline": {"marks": {}},
              "tool_env": {"AORTA_TRIAL_ID": "a/trial-000", "PYTHONDONTWRITEBYTECODE": None},
              "collectors": {"rocprof": "not available: x"}, "collected": [tmp_path / "f"]}
    typed = TrialResult.from_record(record)
    path = atomic_write_json(tmp_path / "result.json", typed.to_dict())
    written = atomic_write_json(tmp_path / "old.json", record)  # what the sweep wrote before
    assert path.read_text() == written.read_text()  # the same bytes, key for key
    assert typed.extra == {"collectors": {"rocprof": "not available: x"}, "collected": [str(tmp_path / "f")]}
