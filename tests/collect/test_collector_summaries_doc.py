"""The collectors' summaries as typed values (collect/summaries.py): the typed writers write the
bytes the untyped ones wrote (hypothesis-drawn values); any summary reads back to itself and
its bytes, a key a newer writer added kept; a damaged summary is a located error naming the
file and the field, which the trial's collector record carries (status error) instead of
reading it as numbers or as no summary; an oversize one is refused before it is read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.collect.collectors import _finish_layer_numerics, _finish_torch_profiler
from aorta_tui.collect.summaries import (
    FirstBad,
    LayerNumericsSummary,
    TorchProfilerSummary,
    load_summary,
)
from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS
from aorta_tui.core.rundir_fs import RunDirFS

# -- the untyped writers, verbatim (their dict literals before the type) ----------------------


def _old_layer_numerics(s: dict[str, Any]) -> bytes:
    """LayerNumerics.finish's summary, its body verbatim with ``self.X`` drawn."""
    summary = {
        "schema_version": 1, "rank": s["rank"], "pid": s["pid"],
        "steps_seen": s["step"], "records_written": s["written"],
        "first_bad": s["first_bad"], "huge_threshold": s["huge"],
        "sample_every": s["sample_every"], "pre_context": s["pre_context"],
        "pre_context_flushed": s["_flushed"], "channels": sorted(s["channels"]),
        "watch_types": sorted(s["types"]), "watch_names": s["names"],
        "watched_count": len(s["_watched_names"]), "watched_names": sorted(s["_watched_names"]),
        "ignored_options": s["ignored"], "error": s["error"],
    }
    return json_bytes(summary)


def _old_torch_profiler(s: dict[str, Any]) -> bytes:
    """TorchProfiler.finish's summary, its body verbatim with ``self.X`` drawn."""
    summary = {"schema_version": 1, "rank": s["rank"], "pid": s["pid"],
               "steps": s["steps"], "activities": s["activities"], "options": s["options"],
               "trace": s["trace"],
               "metrics": s["metrics"], "error": s["error"]}
    return json_bytes(summary)


_text = st.text(max_size=8)  # lone surrogates included: a layer's name is any string
_count = st.integers(0, 2**40)
_first_bad = st.fixed_dictionaries({
    "step": _count, "layer": _text, "direction": st.sampled_from(["fwd", "bwd", "param"]),
    "role": st.sampled_from(["act", "input", "igrad", "weight", "bias", "wgrad", "bgrad"]),
    "kind": st.sampled_from(["nan", "inf", "huge"])}).map(
        # in the order LayerNumerics._drain builds it
        lambda d: {k: d[k] for k in ("step", "layer", "direction", "role", "kind")})
_layer_state = st.fixed_dictionaries({
    "rank": _count, "pid": _count, "step": _count, "written": _count,
    "first_bad": st.none() | _first_bad,
    "huge": st.floats(1e-300, 1e300), "sample_every": st.integers(1, 10**6),
    "pre_context": _count, "_flushed": st.booleans(), "channels": st.sets(_text, max_size=4),
    "types": st.sets(_text, max_size=3), "names": st.lists(_text, max_size=3),
    "_watched_names": st.sets(_text, max_size=4),
    "ignored": st.lists(_text, max_size=3).map(sorted), "error": st.none() | _text})


def _typed_layer_numerics(s: dict[str, Any]) -> LayerNumericsSummary:
    """The same summary as LayerNumerics.finish builds it now."""
    fb = s["first_bad"]
    return LayerNumericsSummary(
        rank=s["rank"], pid=s["pid"], steps_seen=s["step"], records_written=s["written"],
        first_bad=None if fb is None else FirstBad(**fb), huge_threshold=s["huge"],
        sample_every=s["sample_every"], pre_context=s["pre_context"],
        pre_context_flushed=s["_flushed"], channels=tuple(sorted(s["channels"])),
        watch_types=tuple(sorted(s["types"])), watch_names=tuple(s["names"]),
        watched_count=len(s["_watched_names"]),
        watched_names=tuple(sorted(s["_watched_names"])), ignored_options=tuple(s["ignored"]),
        error=s["error"])


@given(_layer_state)
def test_layer_numerics_writes_the_untyped_writers_bytes(s: dict[str, Any]) -> None:
    old = _old_layer_numerics(s)
    assert json_bytes(_typed_layer_numerics(s).to_json()) == old
    again = LayerNumericsSummary.from_dict(json.loads(old), where="s.json")
    assert again == _typed_layer_numerics(s) and json_bytes(again.to_json()) == old


_json = st.recursive(st.none() | st.booleans() | st.integers(-9, 9) | st.floats(0, 1e9) | _text,
                     lambda inner: st.lists(inner, max_size=2)
                     | st.dictionaries(_text, inner, max_size=2), max_leaves=5)
_profiler_state = st.fixed_dictionaries({
    "rank": _count, "pid": _count, "steps": _count,
    "activities": st.sampled_from([["cpu"], ["cpu", "cuda"], []]),
    "options": st.dictionaries(_text, _text, max_size=3), "trace": st.none() | _text,
    "metrics": st.dictionaries(_text, _json, max_size=4), "error": st.none() | _text})


@given(_profiler_state)
def test_torch_profiler_writes_the_untyped_writers_bytes(s: dict[str, Any]) -> None:
    old = _old_torch_profiler(s)
    typed = TorchProfilerSummary(
        rank=s["rank"], pid=s["pid"], steps=s["steps"], activities=tuple(s["activities"]),
        options=s["options"], trace=s["trace"], metrics=s["metrics"], error=s["error"])
    assert json_bytes(typed.to_json()) == old
    again = TorchProfilerSummary.from_dict(json.loads(old), where="s.json")
    assert again == typed and json_bytes(again.to_json()) == old


def test_layer_numerics_finish_writes_a_summary_that_reads_back_to_its_bytes(
        tmp_path: Path) -> None:
    from aorta_tui.collect.layer_numerics import LayerNumerics

    ln = LayerNumerics(tmp_path, {"NANLOG_WATCH_NAMES": "enc", "TORCHREC_X": "1"}, rank=2)
    summary = ln.finish()  # no torch needed: nothing was installed, nothing ran
    path = tmp_path / "summary_rank2.json"
    with RunDirFS(tmp_path) as fs:
        again = load_summary(fs, path, LayerNumericsSummary)
    assert again == summary and json_bytes(again.to_json()) == path.read_bytes()
    assert again.rank == 2 and again.ignored_options == ("TORCHREC_X",)
    assert again.watch_names == ("enc",) and again.watch_types == ()


def test_a_key_a_newer_writer_added_is_kept_after_the_known_ones() -> None:
    doc = json.loads(_old_layer_numerics({
        "rank": 0, "pid": 1, "step": 2, "written": 3,
        "first_bad": {"step": 1, "layer": "l", "direction": "fwd", "role": "act", "kind": "nan"},
        "huge": 1e10, "sample_every": 1, "pre_context": 0, "_flushed": False,
        "channels": {"act"}, "types": set(), "names": [], "_watched_names": {"l"},
        "ignored": [], "error": None}))
    doc["first_bad"]["value"] = 3.5
    doc["host"] = "n1"
    s = LayerNumericsSummary.from_dict(doc, where="s.json")
    assert s.extra == {"host": "n1"} and s.first_bad is not None
    assert s.first_bad.extra == {"value": 3.5}
    assert s.to_json() == doc and list(s.to_json())[-1] == "host"


# -- damage, and the trial's collector record that carries it -----------------------------------

def _trial(tmp_path: Path, sub: str, doc: object) -> Path:
    trial = tmp_path / "trials" / "base" / "trial-000"
    (trial / sub).mkdir(parents=True)
    text = doc if isinstance(doc, str) else json.dumps(doc)
    (trial / sub / "summary_rank0.json").write_text(text)
    return trial


def _layer_doc() -> dict[str, Any]:
    return json.loads(_old_layer_numerics({
        "rank": 0, "pid": 1, "step": 3, "written": 9, "first_bad": None, "huge": 1e10,
        "sample_every": 1, "pre_context": 0, "_flushed": False, "channels": {"act"},
        "types": {"Linear"}, "names": [], "_watched_names": {"0", "2"}, "ignored": [],
        "error": None}))


def test_a_layer_numerics_summary_is_the_collectors_metrics(tmp_path: Path) -> None:
    trial = _trial(tmp_path, "layer_numerics", _layer_doc())
    with RunDirFS(tmp_path) as fs:
        rec = _finish_layer_numerics(fs, trial)
    assert rec == {"status": "ran", "path": "layer_numerics", "metrics": {
        "layer_numerics_records": 9, "layer_numerics_watched": 2,
        "layer_numerics_first_bad": None}}


LAYER_DAMAGE: list[tuple[str, object, str]] = [
    ("watched_count", "2", "watched_count: expected an integer"),
    ("records_written", None, "records_written: expected an integer"),
    ("first_bad", {"step": 1}, "first_bad.layer: missing"),
    ("first_bad", "layer 0", "first_bad: expected an object"),
    ("error", 5, "error: expected a string"),
    ("schema_version", 2, "schema_version: 2 is not 1"),
    ("channels", "act", "channels: expected an array"),
]


@pytest.mark.parametrize(("key", "value", "message"), LAYER_DAMAGE,
                         ids=[f"{k}={v!r}" for k, v, _m in LAYER_DAMAGE])
def test_a_damaged_layer_numerics_summary_is_a_located_collector_error(
        tmp_path: Path, key: str, value: object, message: str) -> None:
    # the untyped reader published a string as the watched count ("2") and a damaged
    # first_bad as the first bad layer: the record said "ran"
    doc = _layer_doc()
    doc[key] = value
    trial = _trial(tmp_path, "layer_numerics", doc)
    with RunDirFS(tmp_path) as fs:
        rec = _finish_layer_numerics(fs, trial)
        with pytest.raises(UsageError, match=message) as caught:
            load_summary(fs, trial / "layer_numerics/summary_rank0.json", LayerNumericsSummary)
    assert caught.value.exit_code == ExitCode.USAGE and caught.value.hint
    assert rec["status"] == "error" and "metrics" not in rec
    where = "trials/base/trial-000/layer_numerics/summary_rank0.json"
    assert isinstance(rec["reason"], str) and where in rec["reason"] and message in rec["reason"]


@pytest.mark.parametrize("text", ["{", "[]", ""])
def test_a_summary_that_is_no_json_object_is_a_located_collector_error(
        tmp_path: Path, text: str) -> None:
    trial = _trial(tmp_path, "torch_profiler", text)
    with RunDirFS(tmp_path) as fs:
        rec = _finish_torch_profiler(fs, trial)
    assert rec["status"] == "error"
    assert "torch_profiler/summary_rank0.json" in str(rec["reason"])
    assert str(rec["reason"]).startswith("the torch_profiler summary cannot be read: ")


def test_a_missing_summary_says_the_worker_wrote_none(tmp_path: Path) -> None:
    trial = tmp_path / "trials" / "base" / "trial-000"
    trial.mkdir(parents=True)
    with RunDirFS(tmp_path) as fs:
        for finish, name in ((_finish_layer_numerics, "layer_numerics"),
                             (_finish_torch_profiler, "torch_profiler")):
            rec = finish(fs, trial)
            assert rec == {"status": "error", "path": name, "reason": (
                f"the trial worker wrote no {name} summary (it did not start, or was killed "
                "before the end of the workload)")}


def test_a_torch_profiler_summary_with_damaged_metrics_is_a_located_error(
        tmp_path: Path) -> None:
    doc = json.loads(_old_torch_profiler({
        "rank": 0, "pid": 1, "steps": 2, "activities": ["cpu"], "options": {"top": 3},
        "trace": None, "metrics": {"torch_profiler_steps": 2}, "error": None}))
    trial = _trial(tmp_path, "torch_profiler", doc)
    with RunDirFS(tmp_path) as fs:
        rec = _finish_torch_profiler(fs, trial)
    assert rec["status"] == "error" and "options.top: expected a string" in str(rec["reason"])


def test_an_oversize_summary_is_refused_before_it_is_read(tmp_path: Path) -> None:
    trial = _trial(tmp_path, "layer_numerics", "")
    with (trial / "layer_numerics/summary_rank0.json").open("wb") as fh:
        fh.truncate(INPUT_LIMITS["layer numerics summary"] + 1)  # sparse: nothing to read
    with RunDirFS(tmp_path) as fs:
        rec = _finish_layer_numerics(fs, trial)
    assert rec["status"] == "error" and "limit" in str(rec["reason"])


@pytest.mark.parametrize("value", ["inf", "1e999", "Infinity"])
def test_an_infinite_huge_threshold_is_refused_where_it_is_written(value: str) -> None:
    # accepted before: the summary then held the non-JSON token Infinity, which its typed
    # reader (strict JSON, finite numbers) takes for damage, so the recipe says it first
    from aorta_tui.collect.layer_numerics import option_problems

    assert option_problems({"NANLOG_HUGE_THRESHOLD": value}) == [
        ("NANLOG_HUGE_THRESHOLD", f"expected a positive number, got {value!r}", '"1e10"')]
    assert option_problems({"NANLOG_HUGE_THRESHOLD": "1e10"}) == []
