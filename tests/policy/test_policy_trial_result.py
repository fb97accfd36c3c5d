"""A policy trial's ``result.json`` is read by the queue result's own reader (hwqueue/result_doc.py).

A valid result gives the outcome fields the evaluator always recorded; one the reader refuses (a
``summary`` alone, a figure that is text, a sweep, another version) is a failed trial whose reason
is the reader's located message, never an ok trial and never a crash of the sweep.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.core.errors import UsageError
from aorta_tui.hwqueue.result_doc import QueueResult, load_run_result
from aorta_tui.policy.evaluator import PolicySweepRequest, _read_result, run_policy_sweep
from aorta_tui.policy.outcome_doc import NO_FIGURES
from aorta_tui.policy.presets import Policy
from tests.hwqueue.fake_results import fake_result

NOT_A_QUEUE_RESULT = "result.json is not a valid queue result: "


def _recorded(path: Path) -> dict[str, Any]:
    """What outcome.json records of the ending ``_read_result`` gives: status and reason, and
    for an ok trial its figures and the result's stamp (no figure of a failed one)."""
    end = _read_result(path)
    out: dict[str, Any] = {"status": end.status, "reason": end.reason}
    if end.status != "ok":
        assert end.figures == NO_FIGURES and end.stamp is None
        return out
    assert end.stamp is not None
    return {**out, **end.figures.to_json(), **end.stamp.to_json()}


def _valid() -> dict[str, Any]:
    """A queue result as `queue run -o` writes one (hand-made: exact figures)."""
    doc: dict[str, Any] = {"schema_version": 1, **fake_result([10.0, 11.0], [10.0, 11.0])}
    doc["summary"] = {"throughput": 200, "latency_p50_ms": 10.5, "launch_delay_mean_us": None}
    doc["summary_units"] = {
        "throughput": "X/s",
        "latency_p50_ms": "ms",
        "launch_delay_mean_us": "us",
    }
    doc["summary_better"] = {"throughput": "higher", "latency_p50_ms": "lower"}
    doc["unavailable"] = {"launch_delay_us": "streams were idle at submit"}
    doc["platform"] = {"backend": "cpu", "device_name": "fake"}
    doc["stream_priority"] = {"asked": "lc", "applied": False}
    return doc


def _write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc))
    return path


# -- a valid result ---------------------------------------------------------------------------


def test_a_valid_result_gives_the_fields_the_evaluator_always_recorded(tmp_path: Path) -> None:
    got = _recorded(_write(tmp_path / "result.json", _valid()))
    assert got == {
        "status": "ok",
        "reason": "",
        "summary": {"throughput": 200.0, "latency_p50_ms": 10.5, "launch_delay_mean_us": None},
        "summary_units": {
            "throughput": "X/s",
            "latency_p50_ms": "ms",
            "launch_delay_mean_us": "us",
        },
        "summary_better": {"throughput": "higher", "latency_p50_ms": "lower"},
        # the harness files the delay's reason under its sample's key: the figure gets it
        "unavailable": {"launch_delay_mean_us": "streams were idle at submit"},
        "platform": {"backend": "cpu", "device_name": "fake"},
        "emulated": False,
        "schema_version": 1,
        "stream_priority": {"asked": "lc", "applied": False},
    }
    assert isinstance(got["summary"]["throughput"], float)  # an int figure is recorded as a float


def test_a_result_from_before_reasons_and_priorities_reads_with_their_defaults(
    tmp_path: Path,
) -> None:
    doc = _valid()
    for key in ("unavailable", "platform", "stream_priority", "samples", "run_id"):
        del doc[key]
    got = _recorded(_write(tmp_path / "result.json", doc))
    assert got["status"] == "ok" and got["platform"] == {} and got["stream_priority"] is None
    assert got["unavailable"] == {
        "launch_delay_mean_us": "the harness reported no value and no reason"
    }


# -- a damaged or partial result: a failed trial, located -------------------------------------

DAMAGED: list[tuple[str, Any, str]] = [
    ("summary alone", {"summary": {"throughput": 1.0}}, "not an aorta-tui queue result"),
    (
        "a summary without its units",
        {k: v for k, v in _valid().items() if k != "summary_units"},
        "summary_units: missing",
    ),
    (
        "figure as text",
        {**_valid(), "summary": {"throughput": "fast"}},
        "summary.throughput: expected a finite number or null, found a string",
    ),
    (
        "no summary_better",
        {k: v for k, v in _valid().items() if k != "summary_better"},
        "summary_better: missing",
    ),
    (
        "emulated missing",
        {k: v for k, v in _valid().items() if k != "emulated"},
        "emulated: expected true or false, found null",
    ),
    (  # was float() of it: an OverflowError that ended the whole sweep
        "a figure too large for a float",
        {**_valid(), "summary": {"throughput": 10**400}},
        "summary.throughput: expected a finite number or null",
    ),
    ("streams as text", {**_valid(), "config": {"streams": "2"}}, "config.streams: expected"),
    ("a newer version", {**_valid(), "schema_version": 2}, "schema_version 2 is not supported"),
    (
        "a sweep",
        {"schema_version": 1, "kind": "aorta-tui/queue-sweep", "points": [_valid()]},
        "holds a queue sweep, not one run's result",
    ),
    ("not an object", [1, 2], "not an aorta-tui queue result"),
]


@pytest.mark.parametrize(
    ("doc", "message"), [(d, m) for _, d, m in DAMAGED], ids=[name for name, _, _ in DAMAGED]
)
def test_a_result_the_reader_refuses_is_a_failed_trial_with_its_located_reason(
    tmp_path: Path, doc: object, message: str
) -> None:
    path = _write(tmp_path / "result.json", doc)
    got = _recorded(path)
    assert got["status"] == "failed"
    assert got["reason"].startswith(NOT_A_QUEUE_RESULT + str(path)), got["reason"]
    assert message in got["reason"]
    assert "summary" not in got  # no figure of it reaches the comparison


def test_a_file_that_is_not_json_is_unreadable_at_its_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text('{"summary": {"throughput": 1.0}')
    got = _recorded(path)
    assert got["status"] == "failed"
    assert got["reason"].startswith(f"result.json unreadable: {path}:1:")
    assert "truncated JSON" in got["reason"]


def test_a_missing_result_and_a_link_stay_the_failures_they_were(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    assert _recorded(path) == {
        "status": "failed",
        "reason": "exit code 0 but no result.json was written",
    }
    _write(tmp_path / "elsewhere.json", _valid())
    path.symlink_to(tmp_path / "elsewhere.json")
    got = _recorded(path)  # a link the child left is refused, never followed
    assert got["status"] == "failed" and got["reason"].startswith("result.json unreadable: ")


# -- whatever the file holds: ok exactly when the reader takes it, never an exception ----------

_number = st.one_of(
    st.integers(-(10**6), 10**6), st.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False)
)
_name = st.text("abcdefgh_", min_size=1, max_size=6)
_json: st.SearchStrategy[Any] = st.recursive(
    st.one_of(st.none(), st.booleans(), _number, st.text(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_name, inner, max_size=3)),
    max_leaves=8,
)


@st.composite
def _results(draw: st.DrawFn) -> dict[str, Any]:
    """A queue result the reader takes, with any figures, reasons and copied sections."""
    doc = _valid()
    keys = draw(st.lists(_name, unique=True, max_size=5))
    doc["summary"] = {k: draw(st.one_of(st.none(), _number)) for k in keys}
    doc["summary_units"] = {k: draw(st.one_of(st.none(), _name)) for k in keys}
    doc["summary_better"] = {k: draw(st.sampled_from(["higher", "lower", "neither"])) for k in keys}
    doc["unavailable"] = draw(st.dictionaries(_name, st.text(max_size=8), max_size=4))
    doc["platform"] = draw(st.one_of(st.dictionaries(_name, _json, max_size=3), _json))
    doc["stream_priority"] = draw(_json)
    doc["emulated"] = draw(st.booleans())
    return doc


def _damaged(draw: st.DrawFn, doc: dict[str, Any]) -> object:
    """``doc`` with one top-level key removed or replaced by any JSON value."""
    key = draw(st.sampled_from(sorted(doc)))
    if draw(st.booleans()):
        return {k: v for k, v in doc.items() if k != key}
    return {**doc, key: draw(_json)}


@st.composite
def _anything(draw: st.DrawFn) -> object:
    """A valid result, one with a key damaged, or any JSON value at all."""
    doc = draw(_results())
    how = draw(st.sampled_from(["valid", "damaged", "any"]))
    if how == "valid":
        return doc
    return _damaged(draw, doc) if how == "damaged" else draw(_json)


def _read(doc: object) -> tuple[dict[str, Any], QueueResult | None]:
    """``doc`` in a fresh result.json (hypothesis gets no pytest tmp_path per example): what
    the evaluator records of it, and what the queue result's reader makes of it (None: refused)."""
    with tempfile.TemporaryDirectory(prefix="trial-result-") as tmp:
        path = _write(Path(tmp) / "result.json", doc)
        try:
            typed: QueueResult | None = load_run_result(path)
        except UsageError:
            typed = None
        return _recorded(path), typed


@settings(max_examples=200)
@given(_anything())
def test_any_document_is_ok_exactly_when_the_reader_takes_it(doc: object) -> None:
    got, typed = _read(doc)
    if typed is None:
        assert got["status"] == "failed" and got["reason"].startswith(NOT_A_QUEUE_RESULT)
        return
    assert got["status"] == "ok" and got["reason"] == ""
    assert got["summary"] == {
        k: None if v is None else float(v) for k, v in typed.summary.values.items()
    }
    assert set(got["unavailable"]) == {k for k, v in got["summary"].items() if v is None}


@settings(max_examples=100)
@given(_results())
def test_a_valid_documents_fields_reach_the_record_as_written(doc: dict[str, Any]) -> None:
    got, _ = _read(doc)
    assert got["status"] == "ok"
    assert all(
        isinstance(v, float) and math.isfinite(v) for v in got["summary"].values() if v is not None
    )
    assert got["summary_units"] == doc["summary_units"]
    assert got["summary_better"] == doc["summary_better"]
    assert got["platform"] == (doc["platform"] if isinstance(doc["platform"], dict) else {})
    assert got["stream_priority"] == doc["stream_priority"] and got["emulated"] is doc["emulated"]
    for key, why in got["unavailable"].items():  # the harness's own reason, when it gave one
        assert why == (doc["unavailable"].get(key) or "the harness reported no value and no reason")


# -- end to end: the sweep goes on, the trial is failed with its reason ------------------------

CHILD = textwrap.dedent("""
    import json, sys
    out = sys.argv[sys.argv.index("-o") + 1]
    json.dump({"summary": {"throughput": 100.0}}, open(out, "w"))  # a summary and nothing else
""")


def test_a_sweep_whose_trials_write_a_summary_alone_reports_them_failed(tmp_path: Path) -> None:
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    req = PolicySweepRequest(
        workload="fake",
        policies=(Policy(name="other", env={"X": "1"}),),
        streams=2,
        output_dir=tmp_path / "run",
        trials=1,
        seed=1,
        python=sys.executable,
    )
    events: list[Any] = []
    outcome = run_policy_sweep(
        req,
        on_event=events.append,
        trial_command=lambda r, p, res: [sys.executable, str(child), "-o", str(res)],
    )
    rows = outcome.report.trials
    assert outcome.status == "completed" and outcome.report.failed_trials == 2
    assert {r.status for r in rows} == {"failed"}
    assert all(
        r.reason.startswith(NOT_A_QUEUE_RESULT) and "not an aorta-tui queue result" in r.reason
        for r in rows
    ), [r.reason for r in rows]
    assert not [e for e in events if e.kind == "measurement"]
    warned = [e for e in events if e.kind == "warning" and e.code == "trial_failed"]
    assert len(warned) == 2 and NOT_A_QUEUE_RESULT in warned[0].message
