"""The trace result as a typed value (trace/result_doc.py): documents the H200 wrote (CUPTI
device records, collector launches, eBPF records) read back to the same bytes; any result
round-trips; a damaged one is a located exit 2, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.trace.result_doc import (
    CollectorLaunches,
    DeviceRecords,
    Histogram,
    KernelRecords,
    KeyFigures,
    KeySpread,
    LaunchSource,
    MetricResult,
    MetricSummary,
    ProbeSetResult,
    TraceResult,
    TraceTarget,
    read_trace_result,
)

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "trace" / "gpu-h200"


@pytest.mark.parametrize("name", ["default-mode-smoke-2026-12-03.json", "dispatch/rec.json"])
def test_results_the_h200_wrote_read_back_to_the_same_bytes(name: str) -> None:
    """The smoke run is today's format (activity launches, all three record sources); the
    dispatch recording is older (no launch_source, no device timestamp_source) and still reads."""
    path = H200 / name
    result = read_trace_result(path)
    assert json.dumps(result.to_json()) == json.dumps(json.loads(path.read_text()))


def test_each_metric_says_which_source_its_records_came_from() -> None:
    result = read_trace_result(H200 / "default-mode-smoke-2026-12-03.json")
    cuda = result.probe_sets["cuda"].metrics
    assert isinstance(cuda["launch_to_start"].records, DeviceRecords)
    assert isinstance(cuda["launch"].records, CollectorLaunches)
    assert result.launch_source is not None and result.launch_source.mode == "activity"
    start = cuda["launch_to_start"]
    assert start.summary.count == start.summary.histogram.count > 0
    assert start.records.lost_events == 0
    kernel = [m for s in result.probe_sets.values() for m in s.metrics.values()
              if isinstance(m.records, KernelRecords)]
    assert kernel, "the smoke run's eBPF metrics read as kernel records"


def test_a_snapshot_takes_the_events_defaults_where_the_caller_gives_no_field() -> None:
    """``snapshot`` names the fields it passes on (it took ``**more`` once): what the caller
    leaves out reads as HistogramSnapshot's own defaults, what it gives goes through."""
    from aorta_tui.core.events import HistogramSnapshot

    summary = read_trace_result(H200 / "default-mode-smoke-2026-12-03.json").probe_sets["cuda"].metrics[
        "launch_to_start"].summary
    bare = summary.snapshot("r", "cuda.launch_to_start", events_per_s=2.0)
    default = HistogramSnapshot(run_id="r", probe_set="p", measures="m", unit="us", count=0)
    assert (bare.lost_events, bare.malformed_lines, bare.observer_cost, bare.clock) == (
        default.lost_events, default.malformed_lines, default.observer_cost, default.clock)
    full = summary.snapshot("r", "cuda.launch_to_start", events_per_s=2.0, lost_events=None,
                            malformed_lines=3, observer_cost={"probe_hits": 1}, clock={"offset_ns": 5})
    assert (full.lost_events, full.malformed_lines, full.observer_cost, full.clock) == (
        None, 3, {"probe_hits": 1}, {"offset_ns": 5})
    assert full.count == summary.count and full.events_per_s == 2.0

def _doc() -> dict:
    return json.loads((H200 / "default-mode-smoke-2026-12-03.json").read_text())


@pytest.mark.parametrize(("damage", "field"), [
    (lambda d: d.update(wall_s="long"), "wall_s"),
    (lambda d: d.update(wall_s=None), "wall_s"),
    (lambda d: d["probe_sets"]["cuda"]["metrics"]["launch"].update(count=1.5),
     "probe_sets.cuda.metrics.launch.count"),
    (lambda d: d["probe_sets"]["cuda"]["metrics"]["launch_to_start"]["histogram"]["buckets"].append([1, 2]),
     "probe_sets.cuda.metrics.launch_to_start.histogram.buckets["),
    (lambda d: d["target"].update(command="python train.py"), "target.command"),
    (lambda d: d.pop("probe_sets"), "probe_sets: missing"),
])
def test_a_damaged_result_is_a_located_exit_2(tmp_path: Path, damage, field: str) -> None:
    doc = _doc()
    damage(doc)
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(UsageError) as err:
        read_trace_result(path)
    assert err.value.exit_code == ExitCode.USAGE
    assert str(path) in err.value.message and field in err.value.message


def test_a_result_from_a_newer_aorta_tui_says_so(tmp_path: Path) -> None:
    doc = _doc()
    doc["schema"] = 2
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match="newer than this aorta-tui reads"):
        read_trace_result(path)


def test_a_folder_or_a_fifo_named_as_the_result_is_refused(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    for path in (tmp_path, fifo):
        with pytest.raises(UsageError):  # never opened for reading (a FIFO would block)
            read_trace_result(path)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                    max_leaves=12))
def test_any_json_value_reads_as_a_result_or_a_located_error(value: object) -> None:
    try:
        TraceResult.from_json(value, "x.json")
    except UsageError as err:
        assert err.message.startswith("x.json")


# -- any result round-trips ------------------------------------------------------------------
_text = st.text(max_size=8)
_num = st.floats(allow_nan=False, allow_infinity=False, width=32)
_count = st.integers(min_value=0, max_value=2**40)
_json_leaf = st.none() | st.booleans() | st.integers() | _text | _num
_json = st.recursive(_json_leaf, lambda c: st.lists(c, max_size=2) | st.dictionaries(_text, c, max_size=2),
                     max_leaves=5)

_histogram = st.builds(
    Histogram, count=_count, buckets=st.lists(st.tuples(_num, _num, _count), max_size=3).map(tuple),
    percentiles=st.dictionaries(st.sampled_from(["p50", "p99", "max"]), st.none() | _num),
    percentile_method=_text)
_keys = st.builds(KeyFigures, count=_count, spread=st.none() | st.builds(
    KeySpread, mean=st.none() | _num, max=st.none() | _num, p50=st.none() | _num))
_summary = st.builds(
    MetricSummary, measures=_text, histogram_measures=_text, kind=st.sampled_from(["interval", "point", "size"]),
    unit=_text, count=_count, events_per_s=st.none() | _num, histogram=_histogram,
    total_bytes=st.none() | _count, breakdown_by=_text, breakdown=st.dictionaries(_text, _keys, max_size=3),
    breakdown_truncated=_count, breakdown_reason=st.none() | _text,
    per_pid=st.dictionaries(st.integers(1, 2**22).map(str), _count, max_size=3))
_present = _json.filter(lambda v: v is not None)  # None means "not written" for these
_records = (
    st.builds(DeviceRecords, source=_text, timestamp_source=st.none() | _present,
              lost_events=st.none() | _count, lost_events_reason=_text,
              clock=st.dictionaries(_text, _json, max_size=2), includes=st.none() | _present)
    | st.builds(CollectorLaunches, source=_text, timestamp_source=_present,
                records_sent_by_collector=st.none() | _count, records_received=_count,
                lost_events=st.none() | _count, lost_events_reason=st.none() | _text)
    | st.builds(KernelRecords, records_sent_by_kernel=st.none() | _count, records_received=_count,
                lost_events=st.none() | _count, lost_events_reason=st.none() | _text,
                timestamp_source=st.none() | _present)
)
_metric = st.builds(MetricResult, summary=_summary, attached=st.booleans(), records=_records,
                    not_attached_reason=st.none() | _text)
_set = st.builds(ProbeSetResult, metrics=st.dictionaries(_text, _metric, max_size=2), description=_text,
                 detection=_json, observer_cost=_json, device_timestamps=st.none() | _present)
_result = st.builds(
    TraceResult, mode=st.sampled_from(["events", "aggregate"]),
    launch_source=st.none() | st.builds(LaunchSource, mode=_text, why=st.none() | _text,
                                        launch_timestamp=_text, device_timestamp=st.none() | _text),
    target=st.builds(TraceTarget, pid=st.none() | _count, command=st.none() | st.lists(_text).map(tuple),
                     command_pid=st.none() | _count, command_exit_code=st.none() | st.integers(-64, 255)),
    wall_s=_num, probe_sets=st.dictionaries(_text, _set, max_size=2),
    lost_events_reported_by_bpftrace=_count, malformed_lines=_count,
    malformed_examples=st.lists(_text, max_size=2).map(tuple), drained_before_stop=st.none() | st.booleans(),
    uprobes=_count, tracepoints=_count, raw_events=st.none() | _text, raw_event_count=st.none() | _count,
    warnings=st.lists(_text, max_size=2).map(tuple), calibration=_json,
    probes=st.none() | st.lists(_text, max_size=2).map(tuple), perfetto=st.none() | _present)


@given(_result)
def test_any_result_round_trips_through_its_file_form(result: TraceResult) -> None:
    text = json.dumps(result.to_json())
    back = TraceResult.from_json(json.loads(text))
    assert json.dumps(back.to_json()) == text


def test_the_summary_says_a_rate_it_does_not_know_is_not_known(capsys: pytest.CaptureFixture[str]) -> None:
    """A metric without a rate (no wall time) prints "rate n/a", never "0/s"."""
    import dataclasses

    from aorta_tui.cli.trace_cmd import _print_summary

    result = read_trace_result(H200 / "default-mode-smoke-2026-12-03.json")
    cuda = result.probe_sets["cuda"]
    start = cuda.metrics["launch_to_start"]
    unknown = dataclasses.replace(start, summary=dataclasses.replace(start.summary, events_per_s=None))
    sets = {**result.probe_sets, "cuda": dataclasses.replace(
        cuda, metrics={**cuda.metrics, "launch_to_start": unknown})}
    _print_summary(dataclasses.replace(result, probe_sets=sets))
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  launch_to_start:"))
    assert "rate n/a" in line and "/s)" not in line
