"""A policy trial's outcome.json as a typed value (policy/outcome_doc.py): files the untyped
writer wrote read back to the same bytes; the evaluator writes, and its readers (the report,
the resume, the analysis frames) read, the type; a damaged outcome is a located UsageError
(exit 2), which the report counts a failed trial and the resume runs again."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.policy.evaluator import POLICY_LAYOUT, PolicySweepRequest, run_policy_sweep
from aorta_tui.policy.outcome_doc import (
    NO_FIGURES,
    Figures,
    ResultStamp,
    TrialEnd,
    TrialOutcome,
)
from aorta_tui.policy.presets import Policy
from aorta_tui.policy.report import build_report
from tests.engine_support import set_at_path

FIXTURES = Path(__file__).parent / "fixtures"
WRITTEN = sorted([*(FIXTURES / "old-writer-outcomes").glob("*.json"),
                  *(FIXTURES / "golden-run" / "trials").glob("*/outcome.json")])


@pytest.mark.parametrize("path", WRITTEN, ids=[f"{p.parent.name}/{p.name}" for p in WRITTEN])
def test_outcomes_the_untyped_writer_wrote_read_back_to_the_same_bytes(path: Path) -> None:
    outcome = TrialOutcome.from_json(path)
    assert json_bytes(outcome.to_json()) == path.read_bytes()


def test_the_typed_value_holds_what_the_trial_recorded() -> None:
    ok = TrialOutcome.from_json(FIXTURES / "old-writer-outcomes" / "ok-stream-priority-lc.json")
    assert ok.status == "ok" and ok.is_final and ok.figures.emulated is True
    assert ok.figures.better["throughput"] == "higher" and ok.figures.platform["backend"] == "cpu"
    assert ok.end.stamp is not None and isinstance(ok.end.stamp.stream_priority, dict)
    assert ok.end.stamp.stream_priority["requested"] == "lc"
    failed = TrialOutcome.from_json(FIXTURES / "old-writer-outcomes" / "failed-gpu-control.json")
    assert failed.status == "failed" and failed.figures == NO_FIGURES and failed.end.stamp is None
    assert failed.gpu_control.startswith("applied {'clock_level': 2")


# -- the evaluator writes it, its readers read it -------------------------------------------

CHILD = """
import json, os, sys
out = sys.argv[1]
if os.environ.get("FAIL"):
    sys.stderr.write("error: no device\\n")
    sys.exit(1)
sys.path.insert(0, os.environ["REPO"])
from tests.hwqueue.fake_results import fake_result
doc = {"schema_version": 1, **fake_result([10.0, 11.0], [10.0, 11.0])}
doc["summary"] = {"throughput": 200 + float(os.environ.get("SHIFT", "0")), "wall_s": None}
doc["summary_units"] = {"throughput": "X/s", "wall_s": None}
doc["summary_better"] = {"throughput": "higher", "wall_s": "neither"}
json.dump(doc, open(out, "w"))
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("outcomes")
    child = tmp / "child.py"
    child.write_text(CHILD)

    def command(req: PolicySweepRequest, policy: Policy, result: Path) -> list[str]:
        return [sys.executable, str(child), str(result)]

    policies = (Policy(name="faster", env={"SHIFT": "5"}), Policy(name="broken", env={"FAIL": "1"}))
    req = PolicySweepRequest(workload="fake", policies=policies, streams=2, output_dir=tmp / "run",
                             trials=2, seed=3, python=sys.executable)
    run_policy_sweep(req, trial_command=command,
                     base_env={**os.environ, "REPO": str(Path(__file__).parents[2])})
    return tmp / "run"


def test_every_outcome_a_sweep_writes_reads_back_to_its_bytes(run: Path) -> None:
    paths = sorted(run.glob("trials/*/outcome.json"))
    assert len(paths) == 6
    statuses = set()
    for path in paths:
        outcome = TrialOutcome.from_json(path)
        assert json_bytes(outcome.to_json()) == path.read_bytes()
        statuses.add(outcome.status)
        assert outcome.tool_env is not None and "AORTA_TRIAL_TOKEN" in outcome.tool_env
    assert statuses == {"ok", "failed"}
    broken = TrialOutcome.from_json(next(run.glob("trials/*broken*/outcome.json")))
    assert broken.exit_code == 1 and broken.reason == "exit code 1: no device"
    assert broken.figures == NO_FIGURES and broken.end.stamp is None


def test_a_unit_the_harness_left_null_is_kept(run: Path) -> None:
    ok = TrialOutcome.from_json(next(run.glob("trials/*faster*/outcome.json")))
    assert ok.figures.units == {"throughput": "X/s", "wall_s": None}
    assert ok.figures.summary == {"throughput": 205.0, "wall_s": None}


def _damage(run: Path, tmp: Path, trial: str, path: tuple[Any, ...], value: object) -> Path:
    copy = tmp / "copy"
    shutil.copytree(run, copy)
    target = next(copy.glob(f"trials/*{trial}*/outcome.json"))
    doc = json.loads(target.read_text())
    set_at_path(doc, path, value)
    target.write_text(json.dumps(doc))
    return target


def test_the_report_counts_a_damaged_outcome_a_failed_trial_with_the_located_reason(
        run: Path, tmp_path: Path) -> None:
    target = _damage(run, tmp_path, "faster-t1", ("summary", "throughput"), "fast")
    report = build_report(tmp_path / "copy")
    row = next(t for t in report.trials if t.dir == target.parent.name)
    assert row.status == "failed" and report.failed_trials == 3
    assert row.reason == (f"outcome.json is damaged: {target}: summary.throughput: expected a "
                          f"finite number or null, found a string 'fast'")
    assert row.exit_code is None and row.env_set == {}  # nothing of a refused file is copied
    faster = next(p for p in report.policies if p.name == "faster")
    assert faster.trials_ok == 1 and faster.summary("throughput").values == (205.0,)


def test_the_resume_runs_a_damaged_outcome_again(run: Path, tmp_path: Path) -> None:
    target = _damage(run, tmp_path, "faster-t1", ("emulated",), "yes")
    data = json.loads(target.read_text())
    assert POLICY_LAYOUT.accept is not None
    assert POLICY_LAYOUT.accept(data, target.parent.name) is None
    good = json.loads(next(run.glob("trials/*faster-t2*/outcome.json")).read_text())
    assert POLICY_LAYOUT.accept(good, "x") == good
    assert POLICY_LAYOUT.accept({**good, "status": "cancelled"}, "x") is None


# -- damaged documents: a located error ----------------------------------------------------

_OK = FIXTURES / "old-writer-outcomes" / "ok-stream-priority-lc.json"

DAMAGED: list[tuple[tuple[Any, ...], object, str]] = [
    (("trial",), "1", "trial: expected"),
    (("argv", 2), 3, "argv[2]: expected"),
    (("env_removed",), "X", "env_removed: expected"),
    (("exit_code",), 0.5, "exit_code: expected"),
    (("timed_out",), None, "timed_out: expected"),
    (("wall_s",), "2s", "wall_s: expected"),
    (("summary", "throughput"), [1], "summary.throughput: expected"),
    (("summary_units", "throughput"), 1, "summary_units.throughput: expected"),
    (("summary_better", "throughput"), None, "summary_better.throughput: expected"),
    (("platform",), [], "platform: expected"),
    (("emulated",), "yes", "emulated: expected"),
    (("schema_version",), 1.5, "schema_version: expected"),
    (("tool_env", "AORTA_TRIAL_TOKEN"), 1, "tool_env.AORTA_TRIAL_TOKEN: expected"),
]


@pytest.mark.parametrize(("path", "value", "field"), DAMAGED, ids=[m for _p, _v, m in DAMAGED])
def test_a_wrongly_typed_field_is_named_with_the_file(tmp_path: Path, path: tuple[Any, ...],
                                                      value: object, field: str) -> None:
    doc = json.loads(_OK.read_text())
    set_at_path(doc, path, value)
    damaged = tmp_path / "outcome.json"
    damaged.write_text(json.dumps(doc))
    with pytest.raises(UsageError) as caught:
        TrialOutcome.from_json(damaged)
    assert caught.value.message.startswith(f"{damaged}: {field}")
    assert caught.value.exit_code == ExitCode.USAGE and caught.value.hint


@pytest.mark.parametrize("key", ["policy", "trial", "position", "status", "wall_s", "summary"])
def test_a_missing_key_the_writer_always_writes_is_refused(key: str) -> None:
    doc = json.loads(_OK.read_text())
    del doc[key]
    with pytest.raises(UsageError, match=rf"outcome\.json: {key}: "):
        TrialOutcome.from_dict(doc)


def test_a_torn_file_and_a_list_are_refused(tmp_path: Path) -> None:
    torn = tmp_path / "outcome.json"
    torn.write_bytes(_OK.read_bytes()[:100])
    with pytest.raises(UsageError, match=str(torn)):
        TrialOutcome.from_json(torn)
    with pytest.raises(UsageError, match=r"\(top level\): expected"):
        TrialOutcome.from_dict([1, 2])


# -- properties ----------------------------------------------------------------------------

_text = st.text(max_size=8)
_number = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False) | st.integers(-2**53, 2**53)
_json = st.recursive(st.none() | st.booleans() | _number | _text,
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(_text, inner, max_size=3), max_leaves=6)
_opt_int = st.none() | st.integers(-2**31, 2**31)
_figures = st.builds(
    Figures, summary=st.dictionaries(_text, st.none() | _number, max_size=3),
    units=st.dictionaries(_text, st.none() | _text, max_size=3),
    better=st.dictionaries(_text, st.sampled_from(["higher", "lower", "neither"]), max_size=3),
    unavailable=st.dictionaries(_text, _text, max_size=3),
    platform=st.dictionaries(_text, _json, max_size=3), emulated=st.none() | st.booleans())
_end = st.builds(TrialEnd, status=st.sampled_from(["ok", "failed", "timed_out", "cancelled"]),
                 reason=_text, figures=_figures,
                 stamp=st.none() | st.builds(ResultStamp, st.integers(0, 9), _json))
_outcomes = st.builds(
    TrialOutcome, policy=_text, trial=st.integers(1, 99), position=st.integers(0, 999),
    argv=st.lists(_text, max_size=3).map(tuple), env_set=st.dictionaries(_text, _text, max_size=2),
    env_removed=st.lists(_text, max_size=2).map(tuple), exit_code=_opt_int, signal=_opt_int,
    timed_out=st.booleans(), exec_error=st.none() | _text, wall_s=_number, peak_rss_kb=_opt_int,
    peak_rss_reason=st.none() | _text, gpu_control=_text, end=_end,
    tool_env=st.none() | st.dictionaries(_text, st.none() | _text, max_size=2))


@given(_outcomes)
def test_any_outcome_reads_back_to_itself_and_its_bytes(outcome: TrialOutcome) -> None:
    written = json_bytes(outcome.to_json())
    again = TrialOutcome.from_dict(json.loads(written))
    assert again == outcome
    assert json_bytes(again.to_json()) == written
