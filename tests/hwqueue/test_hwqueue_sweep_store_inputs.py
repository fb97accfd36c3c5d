"""What a queue sweep's resume reads back from its run directory, attacked: a hand-edited or
damaged request.json is a located exit-2 error (or, when still valid, the sweep goes on), never
a traceback; a damaged point result.json is no result (the point runs again), never a crash."""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.core.errors import AortaError
from aorta_tui.hwqueue.harness import QueueRunConfig
from aorta_tui.hwqueue.sweep import (
    QUEUE_SWEEP_LAYOUT,
    REQUEST_FILE,
    _request,
    point_id,
    resume_sweep,
)
from aorta_tui.store.naming import JOURNAL
from aorta_tui.store.run_store import RunStore

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _valid_request() -> dict[str, Any]:
    cfg = QueueRunConfig(workload="tiny_kernel_stress", streams=1, iterations=2, warmup=0,
                         device="cpu", size="tiny", run_id="q-fuzz")
    return _request(cfg, [1, 2], 0.1, None)


class _Ran(Exception):
    """The runner was reached: the request was good enough to run a point."""


def _runner(_cfg: Any, _what: str, _point: Any = None) -> dict[str, Any]:
    raise _Ran


def _mutate(doc: dict[str, Any], path: list[str], value: Any, delete: bool) -> None:
    """Replace (or delete) the value at ``path`` (keys into nested objects)."""
    node = doc
    for key in path[:-1]:
        node = node[key]
    if delete:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value


_REQ = _valid_request()
_PATHS = [[k] for k in _REQ] + [["config", k] for k in _REQ["config"]] + [["config", "bogus"]]


def _resume_outcome(raw: bytes) -> str:
    run_dir = Path(tempfile.mkdtemp(prefix="aorta-fuzz-qs-"))
    try:
        (run_dir / REQUEST_FILE).write_bytes(raw)
        (run_dir / JOURNAL).touch()
        try:
            resume_sweep(run_dir, runner=_runner)
        except _Ran:
            return "ran"
        except AortaError as exc:
            assert int(exc.exit_code) in (2, 3), exc.render()
            assert "Traceback" not in exc.render()
            return "refused"
        raise AssertionError("a resume that ran nothing and refused nothing")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_damaged_request_is_a_located_error_never_a_crash(attack_tally: Any) -> None:
    outcomes: list[str] = []
    failures = 0

    @settings(max_examples=200, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.sampled_from(_PATHS), JSON, st.booleans())
    def check(path: list[str], value: Any, delete: bool) -> None:
        nonlocal failures
        doc = copy.deepcopy(_REQ)
        _mutate(doc, path, value, delete)
        try:
            outcomes.append(_resume_outcome(json.dumps(doc).encode()))
        except BaseException:
            failures += 1
            raise

    try:
        check()
        # bytes that are not a request at all
        for raw in (b"", b"{", b"[]", b"\xff\xfe", b'{"kind": 1}', b"null", b"1" * 100):
            outcomes.append(_resume_outcome(raw))
    finally:
        attack_tally.record("queue sweep request.json", cases=len(outcomes), failures=failures,
                            promise="exit 2/3 located, or the sweep runs; never a traceback")
    assert "refused" in outcomes and "ran" in outcomes  # both sides were reached


@pytest.fixture(scope="module")
def point_result() -> dict[str, Any]:
    """A real 2-stream queue result (CPU emulation, tiny)."""
    pytest.importorskip("torch")
    from aorta_tui.hwqueue.run import run_queue

    cfg = QueueRunConfig(workload="tiny_kernel_stress", streams=2, iterations=2, warmup=0,
                         device="cpu", size="tiny", run_id="q-fuzz-s2")
    return run_queue(cfg).to_json()


def _result_paths(doc: Any, prefix: tuple[Any, ...] = (), depth: int = 0) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(doc, dict) and depth < 3:
        for k, v in doc.items():
            out += _result_paths(v, (*prefix, k), depth + 1)
    return out


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_damaged_point_result_is_no_result(point_result: dict[str, Any], tmp_path: Path,
                                             attack_tally: Any) -> None:
    store = RunStore(tmp_path, QUEUE_SWEEP_LAYOUT)
    tid = point_id(2)
    store.fresh_trial_dir(tid)
    store.write_result(tid, point_result)
    assert store.read_result(tid) == point_result  # the real one is whole
    assert store.read_result(point_id(4)) is None  # no file
    (tmp_path / "trials" / point_id(4)).mkdir()
    shutil.copy(store.result_path(tid), store.result_path(point_id(4)))
    assert store.read_result(point_id(4)) is None  # another point's result
    paths = _result_paths(point_result)
    cases = failures = 0

    @settings(max_examples=300, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(st.sampled_from(paths), JSON, st.booleans(), st.binary(max_size=40))
    def check(path: tuple[Any, ...], value: Any, as_bytes: bool, raw: bytes) -> None:
        nonlocal cases, failures
        cases += 1
        doc = copy.deepcopy(point_result)
        _mutate(doc, list(path), value, delete=False)
        data = raw if as_bytes else json.dumps(doc).encode()
        store.result_path(tid).write_bytes(data)
        try:
            got = store.read_result(tid)
            assert got is None or got["config"]["streams"] == 2
        except BaseException:
            failures += 1
            raise

    try:
        check()
    finally:
        attack_tally.record("queue sweep point result", cases=cases, failures=failures,
                            promise="a damaged result.json is no result (re-run), never a crash")


@pytest.mark.parametrize("gain", ["NaN", "Infinity", "-Infinity"])
def test_a_knee_gain_that_is_no_number_is_refused_not_run(gain: str) -> None:
    # Python's json reads these bare words; a NaN gain would find no knee and say nothing
    raw = json.dumps(_REQ).replace('"knee_gain": 0.1', f'"knee_gain": {gain}')
    assert gain in raw
    assert _resume_outcome(raw.encode()) == "refused"
