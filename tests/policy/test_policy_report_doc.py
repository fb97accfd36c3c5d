"""policy.json as a typed value (policy/report_doc.py): the format is what it was, byte for
byte, and the one reader takes back exactly what the one serializer writes and refuses a
damaged document with a located UsageError (exit 2), never a traceback.

The golden (tests/policy/fixtures/golden-run, see its README) is a real CPU `policy sweep`
whose policy.json and policy.md were written by the report code before it was typed.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.policy.comparison import Comparison
from aorta_tui.policy.presets import GpuControlSettings, Policy
from aorta_tui.policy.report import build_report, render_markdown, rerender
from aorta_tui.policy.report_doc import (
    Difference,
    MetricInfo,
    MetricSummary,
    PolicyEntry,
    PolicyReport,
    Statistic,
    TrialRow,
)
from tests.engine_support import json_paths, set_at_path

GOLDEN = Path(__file__).parent / "fixtures" / "golden-run"
GOLDEN_JSON = (GOLDEN / "policy.json").read_bytes()
GOLDEN_RENDERED = json.loads(GOLDEN_JSON)["rendered"]


def _as_written(report: PolicyReport) -> PolicyReport:
    # `rendered` is the time the report was computed: the one field that differs run to run
    return dataclasses.replace(report, rendered=GOLDEN_RENDERED)


def test_the_report_of_a_real_run_is_the_bytes_the_untyped_code_wrote() -> None:
    report = _as_written(build_report(GOLDEN))
    assert json_bytes(report.to_json()) == GOLDEN_JSON
    assert render_markdown(report) == (GOLDEN / "policy.md").read_text(encoding="utf-8")


def test_the_written_files_are_the_golden_and_read_back_to_the_same_value(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(GOLDEN, run)
    (run / "policy.json").unlink()
    (run / "policy.md").unlink()
    report, json_path, md_path = rerender(run)
    written = json_path.read_bytes()
    assert written.replace(report.rendered.encode(), GOLDEN_RENDERED.encode(), 1) == GOLDEN_JSON
    assert md_path.read_text(encoding="utf-8") == (GOLDEN / "policy.md").read_text(encoding="utf-8")
    assert PolicyReport.from_json(json_path) == report
    assert PolicyReport.from_json(GOLDEN / "policy.json") == _as_written(report)


def test_the_typed_value_holds_what_the_run_measured() -> None:
    report = PolicyReport.from_json(GOLDEN / "policy.json")
    assert [p.name for p in report.policies] == ["baseline", "cuda_max_connections_1",
                                                 "stream_priority_lc", "priority_lc"]
    skipped = report.policies[3]
    assert skipped.status == "skipped" and skipped.policy.gpu_control.clock_level == 7
    assert report.metric("throughput").better == "higher"
    base = report.policies[0].summary("throughput")
    assert base.n == 4 and base.ci_low is not None and base.median is not None
    assert base.ci_low <= base.median
    assert report.policies[0].vs_reference == {}  # the reference is not compared with itself
    assert report.policies[1].vs_reference["throughput"].verdict
    assert len(report.trials) == 12 and {t.status for t in report.trials} == {"ok"}


# -- damaged documents: a located error ---------------------------------------------------

def _golden_doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(GOLDEN_JSON)
    return doc


# (path into the document, the field the error must name)
TYPED_FIELDS = [
    (("seed",), "seed"),
    (("status",), "status"),
    (("reference_added",), "reference_added"),
    (("platform",), "platform"),
    (("statistic", "min_samples"), "statistic.min_samples"),
    (("metrics", 0, "name"), "metrics[0].name"),
    (("metrics", 1, "unit"), "metrics[1].unit"),
    (("policies", 0, "name"), "policies[0].name"),
    (("policies", 1, "env", "CUDA_DEVICE_MAX_CONNECTIONS"),
     "policies[1].env.CUDA_DEVICE_MAX_CONNECTIONS"),
    (("policies", 3, "gpu_control", "clock_level"), "policies[3].gpu_control.clock_level"),
    (("policies", 2, "harness_args", 0), "policies[2].harness_args[0]"),
    (("policies", 1, "notes", 0), "policies[1].notes[0]"),
    (("policies", 0, "trials_ok"), "policies[0].trials_ok"),
    (("policies", 0, "metrics", "throughput", "median"), "policies[0].metrics.throughput.median"),
    (("policies", 0, "metrics", "throughput", "values", 2),
     "policies[0].metrics.throughput.values[2]"),
    (("policies", 1, "vs_reference", "throughput", "change_pct"),
     "policies[1].vs_reference.throughput.change_pct"),
    (("policies", 1, "vs_reference", "throughput"), "policies[1].vs_reference.throughput"),
    (("trials", 5, "position"), "trials[5].position"),
    (("trials", 5, "dir"), "trials[5].dir"),
    (("failed_trials",), "failed_trials"),
]


@pytest.mark.parametrize(("path", "field"), TYPED_FIELDS, ids=[f for _p, f in TYPED_FIELDS])
def test_a_wrongly_typed_field_is_named_with_the_file(tmp_path: Path, path: tuple[Any, ...],
                                                      field: str) -> None:
    doc = _golden_doc()
    set_at_path(doc, path, [["not", "this"]])  # no typed field of the report is an array of arrays
    damaged = tmp_path / "policy.json"
    damaged.write_text(json.dumps(doc))
    with pytest.raises(UsageError) as caught:
        PolicyReport.from_json(damaged)
    assert caught.value.message.startswith(f"{damaged}: {field}: expected ")
    assert caught.value.exit_code == ExitCode.USAGE and caught.value.hint


def test_a_missing_name_and_another_kind_are_refused(tmp_path: Path) -> None:
    doc = _golden_doc()
    del doc["policies"][2]["name"]
    with pytest.raises(UsageError, match=r"policy\.json: policies\[2\]\.name: missing"):
        PolicyReport.from_dict(doc, where="policy.json")
    with pytest.raises(UsageError, match="is not a policy report"):
        PolicyReport.from_dict({**_golden_doc(), "kind": "aorta-tui/policy-sweep"})
    torn = tmp_path / "policy.json"
    torn.write_bytes(GOLDEN_JSON[: len(GOLDEN_JSON) // 2])
    with pytest.raises(UsageError, match=str(torn)):
        PolicyReport.from_json(torn)


# -- properties ----------------------------------------------------------------------------

_text = st.text(max_size=12)
_number = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False) | st.integers(-2**53, 2**53)
_opt_number = st.none() | _number
_json = st.recursive(st.none() | st.booleans() | _number | _text,
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(_text, inner, max_size=3), max_leaves=6)
_ints = st.integers(-2**31, 2**31)

_summaries = st.builds(MetricSummary, n=_ints, median=_opt_number, ci_low=_opt_number,
                       ci_high=_opt_number, values=st.lists(_opt_number, max_size=4).map(tuple),
                       reason=_text)
_comparisons = st.builds(Comparison, verdict=_text, change_pct=_opt_number, assessment=_text,
                         reason=_text)
_policies = st.builds(
    Policy, name=_text, description=_text, kind=_text, vendor=_text,
    env=st.dictionaries(_text, _text, max_size=3),
    harness_args=st.lists(_text, max_size=3).map(tuple),
    gpu_control=st.builds(GpuControlSettings, clock_level=st.none() | _ints,
                          power_limit_w=st.none() | _ints),
    source=_text)
_entry_keys = set(PolicyEntry(Policy(name="")).to_json())
_entries = st.builds(
    PolicyEntry, policy=_policies, status=_text, skipped_reason=_text,
    notes=st.lists(_text, max_size=3).map(tuple), trials_ok=_ints, trials_failed=_ints,
    metrics=st.dictionaries(_text, _summaries, max_size=3),
    vs_reference=st.dictionaries(_text, _comparisons, max_size=3),
    extra=st.dictionaries(_text.filter(lambda k: k not in _entry_keys), _json, max_size=2))
_trials = st.builds(TrialRow, position=_ints, policy=_text, trial=_ints, dir=_text,
                    status=_text, reason=_text, exit_code=_json, wall_s=_json, env_set=_json,
                    gpu_control=_json)
_reports = st.builds(
    PolicyReport, run_id=_json, created=_json, rendered=_text, status=_text, workload=_json,
    streams=_json, trials_per_policy=_json, iterations=_json, device=_json, seed=_ints,
    reference=_text, reference_added=st.booleans(),
    platform=st.dictionaries(_text, _json, max_size=3), emulated=st.none() | st.booleans(),
    statistic=st.builds(Statistic, center=_text, interval=_text, min_samples=_ints,
                        call_rule=_text),
    metrics=st.lists(st.builds(MetricInfo, name=_text, unit=_text, better=_text),
                     max_size=3).map(tuple),
    policies=st.lists(_entries, max_size=3).map(tuple),
    differences=st.lists(st.builds(Difference, policy=_text, metric=_text, verdict=_text,
                                   change_pct=_opt_number, assessment=_text),
                         max_size=2).map(tuple),
    trials=st.lists(_trials, max_size=3).map(tuple), failed_trials=_ints,
    schema_version=_ints)

PROPERTY = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@PROPERTY
@given(report=_reports)
def test_the_reader_takes_back_what_the_serializer_writes(report: PolicyReport) -> None:
    assert PolicyReport.from_dict(report.to_json()) == report
    # and through the file's own encoding (json_bytes: what atomic_write_json writes)
    assert PolicyReport.from_dict(json.loads(json_bytes(report.to_json()))) == report


GOLDEN_PATHS = json_paths(_golden_doc())


@PROPERTY
@given(path=st.sampled_from(GOLDEN_PATHS), value=_json)
def test_any_value_anywhere_is_read_or_refused_with_a_located_error(path: tuple[Any, ...],
                                                                   value: Any) -> None:
    doc = copy.deepcopy(_golden_doc())
    set_at_path(doc, path, value)
    try:
        report = PolicyReport.from_dict(doc, where="policy.json")
    except UsageError as exc:
        assert exc.message.startswith("policy.json")
        assert exc.exit_code == ExitCode.USAGE
    else:  # what it read is what it writes again
        assert PolicyReport.from_dict(report.to_json()) == report


@PROPERTY
@given(doc=_json)
def test_any_json_document_is_read_or_refused_never_a_traceback(doc: Any) -> None:
    for candidate in (doc, {"kind": "aorta-tui/policy-report", "policies": doc},
                      {"kind": "aorta-tui/policy-report", "trials": [doc]}):
        try:
            PolicyReport.from_dict(candidate, where="policy.json")
        except UsageError as exc:
            assert exc.message.startswith("policy.json")
