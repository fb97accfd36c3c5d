"""A fresh-process queue run's config file as a typed value (hwqueue/point_config.py): both of
repeat.py's writers write the bytes the untyped ones did (their code copied below, verbatim),
any config reads back to itself, a damaged file is a located UsageError (exit 2), an unknown
option is refused, and an oversize file is refused unread."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.hwqueue.harness import QueueRunConfig
from aorta_tui.hwqueue.point_config import PointConfig

_text = st.text(max_size=8)
_json = st.recursive(st.none() | st.booleans() | st.integers(-9, 9) | _text,
                     lambda inner: st.lists(inner, max_size=2)
                     | st.dictionaries(_text, inner, max_size=2), max_leaves=4)
_configs = st.builds(
    QueueRunConfig, workload=_text, streams=st.integers(0, 2**40), iterations=st.integers(-3, 9),
    warmup=st.integers(0, 9), device=_text, devices=st.none() | st.lists(_text, max_size=3),
    sync_mode=_text, dtype=_text, size=_text, params=st.dictionaries(_text, _json, max_size=3),
    run_id=_text, ebpf_trace=st.booleans(), keep_timeline=st.booleans(), timing=_text,
    detail_iterations=st.integers(0, 99), profiler_trace=st.none() | _text,
    stream_priority=_text, graph=st.booleans())


def _old_temp_file(cfg: QueueRunConfig) -> str:
    # verbatim: hwqueue/repeat.py run_isolated before the type (the text it wrote)
    return json.dumps(dataclasses.asdict(cfg))


def _old_point_file(cfg: QueueRunConfig) -> Any:
    # verbatim: hwqueue/repeat.py _run_point before the type (the object atomic_write_json wrote)
    return dataclasses.asdict(cfg)


@settings(max_examples=150, deadline=None)
@given(_configs)
def test_both_writers_write_the_untyped_writers_bytes(cfg: QueueRunConfig) -> None:
    doc = PointConfig.of(cfg).to_json()
    assert json.dumps(doc) == _old_temp_file(cfg)
    assert json_bytes(doc) == json_bytes(_old_point_file(cfg))


@settings(max_examples=150, deadline=None)
@given(_configs)
def test_any_config_reads_back_to_itself_and_to_its_run_config(cfg: QueueRunConfig) -> None:
    doc = PointConfig.of(cfg)
    back = PointConfig.from_json(json.loads(json_bytes(doc.to_json())), "c.json")
    assert back == doc
    assert back.config() == cfg


def test_the_document_keeps_step_with_the_run_config() -> None:
    """A field added to QueueRunConfig must be added here too (or `of` fails on it)."""
    assert [f.name for f in dataclasses.fields(PointConfig)] == [
        f.name for f in dataclasses.fields(QueueRunConfig)]
    cfg = QueueRunConfig(workload="w", streams=2)
    assert PointConfig.of(cfg).to_json() == dataclasses.asdict(cfg)  # defaults too


def test_a_missing_optional_field_reads_as_its_default() -> None:
    assert PointConfig.from_json({"workload": "w", "streams": 2}, "c.json").config() == \
        QueueRunConfig(workload="w", streams=2)


@pytest.mark.parametrize(("key", "value", "words"), [
    ("streams", True, "streams: expected an integer"),
    ("workload", 3, "workload: expected a string"),
    ("devices", "cuda:0", "devices: expected an array"),
    ("devices", ["cuda:0", 1], "devices[1]: expected a string"),
    ("params", [], "params: expected an object"),
    ("profiler_trace", 1, "profiler_trace: expected a string or null"),
    ("graph", "yes", "graph: expected true or false"),
    ("nope", 1, "'nope': not a queue run option"),
])
def test_damage_is_located(key: str, value: object, words: str) -> None:
    data = {**PointConfig.of(QueueRunConfig(workload="w", streams=2)).to_json(), key: value}
    with pytest.raises(UsageError) as got:
        PointConfig.from_json(data, "trials/s0002/point-config.json")
    assert str(got.value).startswith(f"trials/s0002/point-config.json: {words}")
    assert got.value.exit_code == ExitCode.USAGE


def test_the_file_the_sweep_writes_reads_back_to_its_bytes_and_an_oversize_one_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = QueueRunConfig(workload="hetero_kernels", streams=4, devices=["cuda:0", "cuda:1"],
                         params={"m": 64}, run_id="q-s4")
    with RunDirFS(tmp_path) as fs:  # as repeat._run_point writes it
        fs.atomic_write_json("point-config.json", PointConfig.of(cfg).to_json())
    path = tmp_path / "point-config.json"
    read = PointConfig.read(path)
    assert json_bytes(read.to_json()) == path.read_bytes()
    assert read.config() == cfg
    monkeypatch.setitem(INPUT_LIMITS, "queue run config", 64)
    with pytest.raises(UsageError, match="over the 64 B limit"):
        PointConfig.read(path)


@pytest.mark.parametrize(("config", "words"), [
    ({"workload": "w", "streams": "2"}, "config.streams: expected an integer"),
    ({"workload": "w", "streams": 2, "bogus": 1}, "config.'bogus': not a queue run option"),
    ([1], "config: expected an object"),
])
def test_a_sweep_requests_config_is_read_by_the_same_reader(config: object, words: str) -> None:
    with pytest.raises(UsageError) as got:
        PointConfig.from_json(config, "run/request.json", at="config",
                              what="queue sweep request", hint="start a new sweep")
    assert str(got.value).startswith(f"run/request.json: {words}")
    assert got.value.hint and got.value.exit_code == ExitCode.USAGE
