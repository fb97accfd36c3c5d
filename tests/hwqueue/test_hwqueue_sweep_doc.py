"""The queue sweep's documents as typed values: the sweep (``QueueSweepDoc``, result_doc.py) and
its run directory's ``request.json`` (``QueueSweepRequest``, sweep_request.py).

Each has one serializer, which must write exactly the bytes the untyped writer wrote (that
writer is copied below, verbatim, and both run on generated inputs), and one reader, which
gives back the value that was written and refuses a damaged or oversize file with a located
error (file, field path; exit 2), never a traceback.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import ExitCode, RunDirError, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS
from aorta_tui.hwqueue.harness import QueueRunConfig
from aorta_tui.hwqueue.result_doc import (
    FailedPoint,
    QueueResult,
    QueueSweepDoc,
    SweepAnalysis,
    WorkloadFacts,
    as_result,
    load_result,
    read_run_document,
)
from aorta_tui.hwqueue.sweep import _request, build_sweep, sweep_document
from aorta_tui.hwqueue.sweep_request import REQUEST_FILE, QueueSweepRequest, read_request
from tests.hwqueue.fake_results import fake_result

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "hwqueue" / "sweep-cpu.json"

# -- the untyped writer, as it was (hwqueue/sweep.py before the typed documents) ---------------
# Its constants are spelled out: the files it wrote said these.
SCHEMA_VERSION = 1
SWEEP_KIND = "aorta-tui/queue-sweep"
RUN_KIND = "aorta-tui/queue-sweep-run"


def analyse(points: Sequence[tuple[int, float | None]], knee_gain: float = 0.10) -> dict[str, Any]:
    """Scaling efficiency per point, peak and knee from (streams, throughput) pairs."""
    valid = [(n, t) for n, t in sorted(points) if t is not None and t > 0]
    if not valid:
        return {"efficiency": {}, "peak_streams": None, "peak_throughput": None,
                "knee_streams": None, "reason": "no point has a throughput"}
    n0, t0 = valid[0]
    eff = {str(n): (t / t0) / (n / n0) for n, t in valid}
    peak_n, peak_t = max(valid, key=lambda p: p[1])
    knee = valid[-1][0]
    for (n_a, t_a), (_, t_b) in zip(valid, valid[1:], strict=False):
        if t_b / t_a - 1.0 < knee_gain:
            knee = n_a
            break
    return {"efficiency": eff, "peak_streams": peak_n, "peak_throughput": peak_t,
            "knee_streams": knee, "knee_gain": knee_gain}


def old_sweep_document(sweep_id: str, counts: Sequence[int],
                       points: Sequence[QueueResult | dict[str, Any]], failed: list[dict[str, Any]],
                       knee_gain: float, isolation: str) -> dict[str, Any]:
    """The sweep document (``-o``, ``sweep.json``) from its points' results, in count order
    (a point still in its JSON form is read by the one reader first)."""
    results = [as_result(p, f"points[{i}]") for i, p in enumerate(points)]
    analysis = analyse([(r.config.streams, r.summary.value("throughput")) for r in results],
                       knee_gain)
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": SWEEP_KIND,
        "run_id": sweep_id,
        "workload": results[0].workload.to_json(),
        "emulated": results[0].emulated,
        "platform": results[0].sections.get("platform"),
        "stream_counts": list(counts),
        "isolation": isolation,
        "failed_points": failed,
        "analysis": analysis,
        "points": [r.to_json() for r in results],
    }


def old_request(base: Any, counts: Sequence[int], knee_gain: float,
                output: str | os.PathLike[str] | None) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "kind": RUN_KIND, "run_id": base.run_id,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "config": dataclasses.asdict(base),
            "stream_counts": list(counts), "knee_gain": knee_gain,
            "output": None if output is None else os.path.abspath(output)}


# -- strategies ----------------------------------------------------------------------------------

_name = st.text("abcdefgh_", min_size=1, max_size=6)
_text = st.text(max_size=8)
_number = st.one_of(st.integers(-10**6, 10**6),
                    st.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False))
_json: st.SearchStrategy[Any] = st.recursive(
    st.one_of(st.none(), st.booleans(), _number, _text),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_name, inner, max_size=3)),
    max_leaves=8)
_extra = st.dictionaries(_name.map(lambda k: f"x_{k}"), _json, max_size=2)  # never a typed key
_counts = st.lists(st.integers(1, 64), min_size=1, max_size=6, unique=True).map(sorted)


def _point(n: int, throughput: float | None, platform: Any, unit: str) -> dict[str, Any]:
    """A run result at ``n`` streams with this throughput (fake_result's shape)."""
    doc: dict[str, Any] = fake_result([10.0, 11.0], [10.0, 11.0])
    doc["config"]["streams"] = n
    doc["summary"]["throughput"] = throughput
    doc["workload"]["throughput_unit"] = unit
    if platform is not ...:  # ...: a point without a platform section
        doc["platform"] = platform
    return doc


@st.composite
def _sweep_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """What a sweep's document is built from: counts, its points' results, its failures."""
    counts = draw(_counts)
    failed_at = draw(st.sets(st.sampled_from(counts), max_size=len(counts) - 1))
    # measured throughputs: a positive one within 12 orders of magnitude of the others (a
    # ratio past 1e300, from a subnormal one, is an efficiency the reader refuses as no number
    # a consumer can compute with, as it refuses such a summary figure)
    throughput = st.one_of(st.none(), st.just(0.0), st.floats(-5, 0), st.floats(1e-3, 1e9),
                           st.integers(1, 10**6))
    platform = st.one_of(st.just(...), _json)
    return {
        "sweep_id": draw(_name), "counts": counts,
        "points": [_point(n, draw(throughput), draw(platform), draw(_name))
                   for n in counts if n not in failed_at],
        "failed": [{"streams": n, "reason": draw(_text)} for n in sorted(failed_at)],
        "knee_gain": draw(st.one_of(st.floats(0.001, 10.0), st.just(0.1))),
        "isolation": draw(st.sampled_from(["a fresh process per point",
                                           "all points in one process"])),
    }


# -- the same bytes as the untyped writer --------------------------------------------------------


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=150, deadline=None)
@given(_sweep_inputs())
def test_the_sweep_document_is_written_as_the_untyped_writer_wrote_it(inputs: dict[str, Any]) -> None:
    old = old_sweep_document(inputs["sweep_id"], inputs["counts"], copy.deepcopy(inputs["points"]),
                             copy.deepcopy(inputs["failed"]), inputs["knee_gain"],
                             inputs["isolation"])
    failed = [FailedPoint(f["streams"], f["reason"]) for f in inputs["failed"]]
    typed = build_sweep(inputs["sweep_id"], inputs["counts"], inputs["points"], failed,
                        inputs["knee_gain"], inputs["isolation"])
    assert json_bytes(typed.to_json()) == json_bytes(old)
    assert json_bytes(sweep_document(inputs["sweep_id"], inputs["counts"], inputs["points"], failed,
                                     inputs["knee_gain"], inputs["isolation"])) == json_bytes(old)
    # and what was written reads back to the value that wrote it
    assert QueueSweepDoc.from_json(json.loads(json_bytes(old)), "old") == typed


_configs = st.builds(
    QueueRunConfig, workload=_name, streams=st.integers(1, 64), iterations=st.integers(1, 99),
    warmup=st.integers(0, 9), device=st.sampled_from(["cpu", "cuda", "cuda:1"]),
    devices=st.one_of(st.none(), st.lists(_name, max_size=2)), sync_mode=_name, dtype=_name,
    size=_name, params=st.dictionaries(_name, _text, max_size=2), run_id=_name,
    ebpf_trace=st.booleans(), keep_timeline=st.booleans(), timing=_name,
    detail_iterations=st.integers(1, 50), profiler_trace=st.one_of(st.none(), _text),
    stream_priority=_name, graph=st.booleans())


@settings(max_examples=100, deadline=None)
@given(_configs, _counts, st.floats(0.001, 10.0), st.one_of(st.none(), _name, _name.map(Path)),
       _text)
def test_the_request_is_written_as_the_untyped_writer_wrote_it(
        base: QueueRunConfig, counts: list[int], gain: float, output: Any, created: str) -> None:
    with mock.patch("time.strftime", return_value=created):  # the one input that is the clock's
        old = old_request(base, counts, gain, output)
        typed = QueueSweepRequest.new(base, counts, gain, output)
        assert json_bytes(_request(base, counts, gain, output)) == json_bytes(old)
    assert json_bytes(typed.to_json()) == json_bytes(old)
    assert QueueSweepRequest.from_json(json.loads(json_bytes(old)), "r") == typed


def test_the_fixture_sweep_reads_back_to_the_same_bytes_and_values() -> None:
    sweep = load_result(FIXTURE)
    assert isinstance(sweep, QueueSweepDoc)
    assert json_bytes(sweep.to_json()) == FIXTURE.read_bytes()
    assert sweep.stream_counts == (1, 2) and [p.config.streams for p in sweep.points] == [1, 2]
    assert sweep.isolation == "a fresh process per point" and sweep.failed_points == ()
    assert sweep.analysis.peak_streams == 1 and sweep.analysis.knee_gain == 0.1
    assert sweep.analysis.reason is None and sweep.workload.throughput_unit == "GFLOP/s"
    assert sweep.name == "q-20261201-095714-7b3c" and sweep.absent == frozenset()


def test_an_older_sweep_without_isolation_or_failures_reads_and_writes_back_as_it_came() -> None:
    doc = json.loads(FIXTURE.read_bytes())
    del doc["isolation"], doc["failed_points"], doc["schema_version"]
    doc["sweep_id"] = "named-by-hand"  # compare names a sweep by it when it has one
    sweep = QueueSweepDoc.from_json(copy.deepcopy(doc), "old")
    assert sweep.failed_points == () and sweep.name == "named-by-hand"
    assert sweep.to_json() == doc and "isolation" not in sweep.to_json()


def test_an_analysis_without_throughput_keeps_its_reason_and_no_gain() -> None:
    sweep = build_sweep("s", [1], [_point(1, None, ..., "X/s")], [], 0.1, "x")
    assert sweep.analysis == SweepAnalysis({}, None, None, None, reason="no point has a throughput")
    assert list(sweep.to_json()["analysis"]) == ["efficiency", "peak_streams",  # type: ignore[arg-type]
                                                 "peak_throughput", "knee_streams", "reason"]


# -- round trips over generated values ------------------------------------------------------------


@st.composite
def _analyses(draw: st.DrawFn) -> SweepAnalysis:
    opt_int, opt_num = st.one_of(st.none(), st.integers(1, 64)), st.one_of(st.none(), _number)
    return SweepAnalysis(
        efficiency=draw(st.dictionaries(st.integers(1, 64).map(str), _number, max_size=3)),
        peak_streams=draw(opt_int), peak_throughput=draw(opt_num), knee_streams=draw(opt_int),
        knee_gain=draw(opt_num), reason=draw(st.one_of(st.none(), _text)), extra=draw(_extra))


@st.composite
def _sweeps(draw: st.DrawFn) -> QueueSweepDoc:
    absent = draw(st.frozensets(st.sampled_from(["schema_version", "run_id", "isolation",
                                                 "failed_points"])))
    points = tuple(QueueResult.from_json(_point(n, draw(st.one_of(st.none(), _number)), ...,
                                                draw(_name)), "p") for n in draw(_counts))
    return QueueSweepDoc(
        run_id=None if "run_id" in absent else draw(st.one_of(st.none(), _name)),
        workload=WorkloadFacts(draw(_name), draw(_extra)), emulated=draw(st.booleans()),
        platform=draw(_json), stream_counts=tuple(draw(st.lists(st.integers(-9, 99), max_size=4))),
        isolation="" if "isolation" in absent else draw(_text),
        failed_points=() if "failed_points" in absent else tuple(draw(st.lists(st.builds(
            FailedPoint, st.integers(1, 64), _text, _extra), max_size=2))),
        analysis=draw(_analyses()), points=points,
        extra=draw(st.one_of(_extra, st.fixed_dictionaries({"sweep_id": st.none() | _name}))),
        schema_version=1 if "schema_version" in absent else draw(st.integers(0, 3)), absent=absent)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=150, deadline=None)
@given(_sweeps())
def test_reading_a_written_sweep_gives_the_same_value(value: QueueSweepDoc) -> None:
    written = json_bytes(value.to_json())
    again = QueueSweepDoc.from_json(json.loads(written), "generated")
    assert again == value
    assert json_bytes(again.to_json()) == written


_requests = st.builds(
    QueueSweepRequest, run_id=_name, created=_json,
    config=st.dictionaries(_name, _json, max_size=3),
    stream_counts=st.lists(st.integers(1, 64), min_size=1, max_size=4).map(tuple),
    knee_gain=st.one_of(st.floats(-1e12, 1e12, allow_nan=False), st.integers(0, 9)),
    output=st.one_of(st.none(), _text), extra=_extra)


@given(_requests)
def test_reading_a_written_request_gives_the_same_value(value: QueueSweepRequest) -> None:
    written = json_bytes(value.to_json())
    again = QueueSweepRequest.from_json(json.loads(written), "request.json")
    assert again == value
    assert json_bytes(again.to_json()) == written


# -- damaged and oversize files: located, exit 2 ---------------------------------------------------

DAMAGE: list[tuple[tuple[Any, ...], Any, str]] = [
    (("analysis", "peak_streams"), "many", "analysis.peak_streams: expected an integer or null"),
    (("analysis", "efficiency", "2"), "x", "analysis.efficiency.2: expected a finite number"),
    (("analysis", "knee_gain"), None, "analysis.knee_gain: expected a finite number"),
    (("analysis", "knee_streams"), ..., "analysis.knee_streams: missing"),
    (("analysis",), [], "analysis: expected an object"),
    (("stream_counts",), [1, "2"], "stream_counts[1]: expected an integer"),
    (("failed_points",), [{"streams": 2}], "failed_points[0].reason: missing"),
    (("failed_points",), [{"streams": True, "reason": ""}], "failed_points[0].streams: expected"),
    (("workload", "name"), 3, "workload.name: expected a string"),
    (("workload",), ..., "workload: missing"),
    (("emulated",), "yes", "emulated: expected true or false"),
    (("run_id",), 7, "run_id: expected a string or null"),
    (("sweep_id",), 7, "sweep_id: expected a string or null"),
    (("points",), {}, "points: expected an array"),
    (("points", 1, "config", "streams"), "2", "points[1].config.streams: expected an integer"),
]


def _damaged(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(FIXTURE.read_bytes())
    node = doc
    for key in path[:-1]:
        node = node[key]
    if value is ...:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


@pytest.mark.parametrize(("path", "value", "message"), DAMAGE, ids=[m for _, _, m in DAMAGE])
def test_a_damaged_sweep_file_is_a_located_usage_error(tmp_path: Path, path: tuple[Any, ...],
                                                       value: Any, message: str) -> None:
    file = tmp_path / "sweep.json"
    file.write_text(json.dumps(_damaged(path, value)))
    with pytest.raises(UsageError) as info:
        load_result(file)
    assert f"{file}: {message}" in info.value.render()
    assert info.value.exit_code == ExitCode.USAGE


def test_queue_compare_of_a_damaged_sweep_exits_2_naming_the_field(tmp_path: Path) -> None:
    file = tmp_path / "sweep.json"
    file.write_text(json.dumps(_damaged(("analysis", "knee_streams"), "x")))
    proc = subprocess.run([sys.executable, "-m", "aorta_tui", "queue", "compare", str(FIXTURE),
                           str(file)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "analysis.knee_streams: expected an integer or null" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_sweep_where_one_run_must_be_is_refused_by_its_kind_whatever_its_fields() -> None:
    with pytest.raises(UsageError, match="holds a queue sweep, not one run's result"):
        read_run_document(_damaged(("workload",), ...), "r.json")


def test_an_oversize_sweep_file_is_refused_before_it_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(INPUT_LIMITS, "queue result", 1024)
    with pytest.raises(UsageError, match="over the 1.0 KiB limit") as info:
        load_result(FIXTURE)
    assert str(FIXTURE) in info.value.render() and info.value.exit_code == ExitCode.USAGE


def _request_dir(tmp_path: Path, data: Any) -> Path:
    (tmp_path / REQUEST_FILE).write_text(json.dumps(data))
    return tmp_path


def _valid_request() -> dict[str, Any]:
    cfg = QueueRunConfig(workload="tiny_kernel_stress", streams=1, iterations=2, warmup=0,
                         device="cpu", size="tiny", run_id="q-doc")
    return _request(cfg, [1, 2], 0.1, None)


REQUEST_DAMAGE = [("stream_counts", [1, 0]), ("stream_counts", []), ("knee_gain", "0.1"),
                  ("run_id", ""), ("config", [1]), ("output", 3), ("kind", "x"),
                  ("schema_version", True), ("run_id", ...)]


@pytest.mark.parametrize(("key", "value"), REQUEST_DAMAGE)
def test_a_damaged_request_is_a_located_run_dir_error(tmp_path: Path, key: str, value: Any) -> None:
    data = _valid_request()
    if value is ...:
        del data[key]
    else:
        data[key] = value
    with pytest.raises(RunDirError) as info:
        read_request(_request_dir(tmp_path, data))
    assert f"{tmp_path / REQUEST_FILE}: {key}: missing or not what" in info.value.render()
    assert info.value.exit_code == ExitCode.USAGE


def test_a_request_reads_back_as_the_value_written(tmp_path: Path) -> None:
    data = _valid_request()
    request = read_request(_request_dir(tmp_path, data))
    assert request.to_json() == data and request.stream_counts == (1, 2)
    assert request.config["workload"] == "tiny_kernel_stress" and request.output is None


def test_an_oversize_request_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(INPUT_LIMITS, "queue sweep request", 64)
    with pytest.raises(UsageError, match="over the 64 B limit") as info:
        read_request(_request_dir(tmp_path, _valid_request()))
    assert info.value.exit_code == ExitCode.USAGE


def test_a_request_that_is_no_object_is_located(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="request.json: expected an object"):
        read_request(_request_dir(tmp_path, [1]))

