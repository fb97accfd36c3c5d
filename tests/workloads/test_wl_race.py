"""race: every mode verifies clean; every dropped wait corrupts a named buffer (CPU emulation)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from wl_helpers import run_workload

from aorta_tui.registry.workload import validate_config
from aorta_tui.workloads._streams import EmulatedStreams
from aorta_tui.workloads.race import Race

UPSTREAM = "tests/fixtures/upstream-recipes/example-fsdp-smoke.yaml"
SMALL = {"alltoall_tensor_size": 256, "allreduce_tensor_size": 256, "fsdp_shard_size": 256,
         "warmup_iterations": 1}


@pytest.mark.parametrize("mode", ["default", "ddp", "fsdp"])
def test_clean_modes_verify_every_buffer(tmp_path, mode):
    r = run_workload(Race, {**SMALL, "mode": mode, "simulate_compute": True}, 3, tmp_path)
    assert r.passed, r.failures
    m = r.metrics
    assert m["iterations_verified"] == 4 and m["corrupted_iterations"] == 0
    assert len(r.step_times_s) == 3 and r.emulated and m["streams"] == "emulated"
    assert len(m["buffers_verified_per_iteration"]) >= 4
    assert m["iteration_ms_p50"] > 0 and "iteration_ms_reason" not in m


# which buffer a missing wait corrupts first, by mode and dropped wait (one rank: an
# all-reduce over one rank is the identity, so the late copy itself lands correct in ddp)
EXPECTED = {
    ("default", "h2d"): "a2a_output", ("default", "comm"): "compute_output",
    ("default", "compute"): "compute_output",
    ("ddp", "h2d"): "bucket0_update", ("ddp", "comm"): "bucket0_update",
    ("ddp", "compute"): "bucket0_update",
    ("fsdp", "h2d"): "gathered_params", ("fsdp", "comm"): "grads",
    ("fsdp", "compute"): "grad_shard",
}


@pytest.mark.parametrize(("mode", "drop"), sorted(EXPECTED))
def test_dropped_wait_corrupts_and_is_named(tmp_path, mode, drop):
    r = run_workload(Race, {**SMALL, "mode": mode, "drop_wait": drop}, 3, tmp_path)
    assert not r.passed
    assert {f.code for f in r.failures} == {"corruption"}
    first = r.failures[0]
    assert first.details["buffer"] == EXPECTED[(mode, drop)]
    assert first.details["iteration"] == 1 and first.details["first_wrong_index"] >= 0
    assert first.details["got"] != first.details["expected"]
    assert f"drop_wait={drop}" in first.message and "iteration 1" in first.message
    assert r.metrics["iterations_verified"] == 1  # stop_on_first_corruption
    # the one verified iteration was the warmup: no latency, and the metrics say why
    assert r.metrics["iteration_ms_p50"] is None and "warmup" in r.metrics["iteration_ms_reason"]


def test_without_stopping_every_iteration_is_corrupt(tmp_path):
    raw = {**SMALL, "drop_wait": "comm", "stop_on_first_corruption": False}
    r = run_workload(Race, raw, 3, tmp_path)
    assert r.metrics["corrupted_iterations"] == r.metrics["iterations_verified"] == 4
    # after the first iteration the stale data is the previous iteration's known values
    later = [f for f in r.failures if f.details["iteration"] == 2][0]
    assert later.details["got"] > 0


def test_emulated_streams_honour_waits_and_run_unprotected_work_late():
    s, log = EmulatedStreams(), []
    s.submit("h2d", lambda: log.append("copy"))
    ev = s.record("h2d")
    s.wait("comm", ev)
    s.submit("comm", lambda: log.append("collective"))
    s.submit("compute", lambda: log.append("unprotected"))
    s.finish()
    assert log == ["unprotected", "copy", "collective"]


def test_emulated_streams_detect_a_deadlock():
    s = EmulatedStreams()
    a, b = s.record("h2d"), s.record("comm")
    a.done = b.done = False
    s.queues["h2d"].clear()
    s.queues["comm"].clear()
    s.wait("comm", a)
    s.submit("comm", lambda: None)
    with pytest.raises(RuntimeError, match="deadlocked"):
        s.finish()


def test_upstream_fsdp_recipe_config_validates(tmp_path):
    raw = yaml.safe_load(Path(UPSTREAM).read_text())["workload_config"]
    cfg = validate_config(Race.config_schema, raw)
    assert cfg["mode"] == "fsdp" and cfg["verify_iterations"] == 5
    raw["fsdp_shard_size"] = 512
    r = run_workload(Race, raw, 100, tmp_path)
    assert r.passed and r.metrics["iterations_verified"] == 7  # 2 warmup + 5 verified


STREAM_NAMES = ("h2d", "comm", "compute", "verify")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(STREAM_NAMES), st.lists(st.integers(0, 30), max_size=3)),
                min_size=1, max_size=12), st.data())
def test_emulation_respects_every_wait_and_a_dropped_one_bites(ops, data):
    """Random programs: op i on a stream, waiting on earlier ops' events (indices mod i)."""
    def build(drop: tuple[int, int] | None):
        s, log, events = EmulatedStreams(), [], []
        deps: dict[int, set[int]] = {}
        for i, (stream, waits) in enumerate(ops):
            deps[i] = set()
            for w in waits:
                if i and (i, w % i) != drop:
                    j = w % i
                    s.wait(stream, events[j])
                    deps[i].add(j)
            s.submit(stream, lambda i=i: log.append(i))
            events.append(s.record(stream))
        s.finish()
        return log, deps

    log, deps = build(None)
    assert sorted(log) == list(range(len(ops)))
    at = {op: k for k, op in enumerate(log)}
    for i, js in deps.items():
        for j in js:
            assert at[j] < at[i]  # every waited-on producer ran first
    # drop a consumer's only wait, where the consumer opens its stream and its stream is
    # downstream of the producer's (holds work submitted later): then it runs first
    last = {name: max(k for k, (n, _) in enumerate(ops) if n == name) for name, _ in ops}
    firsts = {min(k for k, (n, _) in enumerate(ops) if n == name) for name, _ in ops}
    edges = [(i, j) for i, js in deps.items() for j in js
             if len(js) == 1 and i in firsts and last[ops[i][0]] > last[ops[j][0]]]
    if not edges:
        return
    i, j = data.draw(st.sampled_from(edges))
    log2, _ = build((i, j))
    assert log2.index(i) < log2.index(j)  # the consumer now runs before its producer
