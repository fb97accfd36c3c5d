"""The queue result as a typed value: one serializer, one reader, and the bytes of today's files.

``QueueResult.to_json`` must write exactly what ``build_result`` wrote (key order included), and
``QueueResult.from_json`` must refuse what the checks refused, with the same located messages.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.hwqueue.harness import QueueRunConfig, execute
from aorta_tui.hwqueue.repeat import combine
from aorta_tui.hwqueue.result import SUMMARY_FIELDS, build_result
from aorta_tui.hwqueue.result_doc import (
    SAMPLE_KEYS,
    ConfigFacts,
    QueueResult,
    QueueSweep,
    Repeats,
    Summary,
    WorkloadFacts,
    load_result,
)
from aorta_tui.hwqueue.run import run_queue
from aorta_tui.hwqueue.sweep import run_sweep
from tests.hwqueue.fake_results import fake_result


def _cfg(**kw: Any) -> QueueRunConfig:
    base: dict[str, Any] = dict(workload="tiny_kernel_stress", streams=2, iterations=3, warmup=0,
                                device="cpu", size="tiny")
    return QueueRunConfig(**{**base, **kw})


# -- real documents ---------------------------------------------------------------------------

REAL_RUNS = [
    {},
    {"keep_timeline": True, "detail_iterations": 2},
    {"timing": "events", "stream_priority": "lc", "streams": 3},
    {"workload": "hetero_kernels"},
    {"params": {"ops_per_stream": "3"}, "sync_mode": "none"},
]


@pytest.mark.parametrize("kw", REAL_RUNS)
def test_a_built_document_is_written_back_byte_for_byte(kw: dict[str, Any]) -> None:
    cfg = _cfg(run_id="q-doc", **kw)
    doc = build_result(cfg, execute(cfg))
    typed = QueueResult.from_json(copy.deepcopy(doc), "built")
    assert json_bytes(typed.to_json()) == json_bytes(doc)
    assert typed.config.streams == doc["config"]["streams"]
    assert typed.summary.values == doc["summary"] and typed.unavailable == doc["unavailable"]


def test_the_file_queue_run_writes_reads_back_to_the_same_bytes(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = run_queue(_cfg(keep_timeline=True), output=out)
    read = load_result(out)
    assert read == result  # the reader gives back the value that was written
    assert isinstance(read, QueueResult) and json_bytes(read.to_json()) == out.read_bytes()


def test_a_combined_repeat_keeps_the_representatives_key_order_and_round_trips() -> None:
    docs = [run_queue(_cfg(run_id=f"q-r{k}")) for k in range(3)]
    out = combine(docs, "q-combined")
    written = out.to_json()
    rep = next(d for d in docs if d.run_id == out.repeats.extra["detail_from"])  # type: ignore[union-attr]
    assert list(written) == [*rep.to_json(), "repeats"]
    assert list(written["repeats"]) == ["count", "isolation", "run_ids", "summaries",  # type: ignore[arg-type]
                                        "detail_from", "meaning", "missing_in"]
    assert QueueResult.from_json(json.loads(json_bytes(written)), "combined") == out


def test_a_sweep_file_reads_back_as_typed_points(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    run_sweep(_cfg(), [1, 2], isolate=False, output=out)
    sweep = load_result(out)
    assert isinstance(sweep, QueueSweep)
    assert [p.config.streams for p in sweep.points] == [1, 2]
    assert json_bytes(sweep.to_json()) == out.read_bytes()


# -- older and hand-made documents --------------------------------------------------------------


def test_a_document_from_before_priorities_graphs_and_reasons_reads_with_their_defaults() -> None:
    doc = fake_result([10.0, 11.0], [10.0, 11.0])  # no schema_version, unavailable, modes
    typed = QueueResult.from_json(copy.deepcopy(doc), "old")
    assert typed.config.stream_priority == "default" and typed.config.graph is False
    assert typed.unavailable == {} and typed.repeats is None
    assert typed.to_json() == doc and "graph" not in typed.to_json()["config"]  # type: ignore[operator]


def test_a_null_repeats_and_null_summaries_are_written_back_as_they_came() -> None:
    doc = fake_result([10.0, 11.0], [10.0, 11.0])
    for repeats in (None, {"count": 2, "summaries": None}, {"summaries": [{"throughput": 1}]}):
        d = {**copy.deepcopy(doc), "repeats": repeats}
        typed = QueueResult.from_json(copy.deepcopy(d), "old")
        assert typed.to_json() == d
    assert QueueResult.from_json(d, "old").repeats == Repeats(  # the last: no count, so one run
        summaries=({"throughput": 1},), absent=frozenset({"count"}))


# -- damaged documents: the reader refuses them, located, exit 2 -------------------------------

DAMAGE = [
    (("summary", "throughput"), "fast", "summary.throughput: expected a finite number or null"),
    (("config", "streams"), 2.5, "config.streams: expected an integer"),
    (("config", "graph"), "yes", "config.graph: expected true or false"),
    (("workload", "name"), None, "workload.name: expected a string"),
    (("summary_better", "wall_s"), "up", "summary_better.wall_s: expected higher, lower or neither"),
    (("samples", "iteration_latency_ms"), [1, "x"], "samples.iteration_latency_ms[1]: expected"),
    (("repeats",), {"count": True}, "repeats.count: expected an integer"),
]


@pytest.mark.parametrize(("path", "value", "message"), DAMAGE)
def test_a_damaged_field_is_a_located_usage_error(path: tuple[str, ...], value: Any,
                                                  message: str) -> None:
    doc: dict[str, Any] = fake_result([10.0, 11.0], [10.0, 11.0])
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(UsageError) as info:
        QueueResult.from_json(doc, "r.json", "points[3].")
    assert f"r.json: points[3].{message}" in info.value.render()
    assert info.value.exit_code == ExitCode.USAGE


def test_a_sweep_given_where_one_run_is_read_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    run_sweep(_cfg(), [1], isolate=False, output=out)
    from aorta_tui.hwqueue.result_doc import load_run_result

    with pytest.raises(UsageError, match="holds a queue sweep"):
        load_run_result(out)


# -- the round trip over generated values -------------------------------------------------------

_number = st.one_of(st.integers(-10**6, 10**6),
                    st.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False))
_name = st.text("abcdefgh_", min_size=1, max_size=6)
_json: st.SearchStrategy[Any] = st.recursive(
    st.one_of(st.none(), st.booleans(), _number, st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_name, inner, max_size=3)),
    max_leaves=8)
_figures = st.dictionaries(st.sampled_from(sorted(SUMMARY_FIELDS)), st.one_of(st.none(), _number),
                           max_size=5)


def _without(keys: set[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(_name.filter(lambda k: k not in keys), _json, max_size=3)


@st.composite
def _repeats(draw: st.DrawFn) -> Repeats:
    absent = draw(st.frozensets(st.sampled_from(["count", "summaries"])))
    summaries = None if "summaries" in absent else draw(st.one_of(
        st.none(), st.lists(_figures, max_size=3).map(tuple)))
    extra = draw(_without({"count", "summaries"}))
    if summaries is None and "summaries" not in absent:
        extra["summaries"] = None  # a null list is kept as written
    return Repeats(count=1 if "count" in absent else draw(st.integers(0, 9)),
                   summaries=summaries, extra=extra, absent=absent)


@st.composite
def _results(draw: st.DrawFn) -> QueueResult:
    absent = draw(st.frozensets(st.sampled_from(["schema_version", "run_id", "unavailable", "samples"])))
    config_absent = draw(st.frozensets(st.sampled_from(["stream_priority", "graph"])))
    samples = {} if "samples" in absent else draw(st.fixed_dictionaries(
        {}, optional={k: st.one_of(st.none(), st.lists(_number, max_size=4)) for k in SAMPLE_KEYS}))
    keys = list(draw(_figures))
    typed = {"schema_version", "kind", "run_id", "emulated", "workload", "config", "summary",
             "summary_units", "summary_better", "unavailable", "samples", "repeats"}
    return QueueResult(
        run_id=None if "run_id" in absent else draw(st.one_of(st.none(), _name)),
        emulated=draw(st.booleans()),
        workload=WorkloadFacts(draw(_name), draw(_without({"name"}))),
        config=ConfigFacts(
            streams=draw(st.integers(1, 64)),
            stream_priority="default" if "stream_priority" in config_absent else draw(_name),
            graph=False if "graph" in config_absent else draw(st.booleans()),
            extra=draw(_without({"streams", "stream_priority", "graph"})), absent=config_absent),
        summary=Summary({k: draw(st.one_of(st.none(), _number)) for k in keys},
                        {k: draw(st.one_of(st.none(), _name)) for k in keys},
                        {k: draw(st.sampled_from(["higher", "lower", "neither"])) for k in keys}),
        unavailable={} if "unavailable" in absent else draw(st.dictionaries(_name, st.text(max_size=8))),
        samples=samples, repeats=draw(st.one_of(st.none(), _repeats())),
        sections=draw(_without(typed)),
        schema_version=1 if "schema_version" in absent else draw(st.integers(0, 3)), absent=absent)


@settings(max_examples=150)
@given(_results())
def test_reading_what_was_written_gives_the_same_value(value: QueueResult) -> None:
    doc = json.loads(json_bytes(value.to_json()))  # through the bytes a file holds
    assert QueueResult.from_json(doc, "generated") == value
    assert QueueResult.from_json(copy.deepcopy(doc), "generated").to_json() == doc
