"""inference: offline and continuous serving, KV cache, and the cross-trial logits fingerprint."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from wl_helpers import run_workload

from aorta_tui.core.errors import UsageError
from aorta_tui.registry.workload import validate_config
from aorta_tui.workloads.inference import Inference, _arrival_ticks, compare_fingerprints

UPSTREAM = "tests/fixtures/upstream-recipes/example-inference-continuous-smoke.yaml"
SMALL = {"hidden_size": 32, "ffn_size": 64, "vocab_size": 128, "num_heads": 4}


def _trials(tmp_path, raw, n=2, steps=2):
    return [run_workload(Inference, raw, steps, tmp_path / f"t{i}").to_dict() for i in range(n)]


def test_offline_trials_agree_and_report_latency(tmp_path):
    results = _trials(tmp_path, {"model": SMALL})
    assert all(r["passed"] for r in results)
    assert compare_fingerprints(results) == []
    m = results[0]["metrics"]
    assert len(m["logits_fingerprint"]) == 64
    assert m["tokens_generated"] == 2 * 4 * 8 and m["requests_completed"] == 8
    assert m["decode_tokens"] == 2 * 4 * 8  # offline: one decode call per generated token
    for key in ("prefill_ms_p50", "decode_ms_p50", "decode_ms_p99", "tokens_per_s"):
        assert m[key] is not None and m[key] > 0
    assert m["decode_ms_p99"] >= m["decode_ms_p50"]
    assert m["kv_cache_bytes"] > 0


def test_perturbed_logits_make_the_trials_disagree(tmp_path):
    results = _trials(tmp_path, {"model": SMALL, "perturb_logits": 1e-3})
    [f] = compare_fingerprints(results)
    assert f.code == "logits_fingerprint_mismatch"
    assert "perturb_logits=0.001" in f.message and f.details["injected"] is True
    assert Inference.cross_trial_checks(results)[0].code == "logits_fingerprint_mismatch"


def test_nan_perturbation_fails_the_trial_itself(tmp_path):
    r = run_workload(Inference, {"model": SMALL, "perturb_logits": math.nan}, 2, tmp_path)
    assert [f.code for f in r.failures] == ["nan_logits"]
    assert r.failures[0].details["step"] == 1 and "perturb_logits=nan" in r.failures[0].message


def test_kv_cache_decode_matches_full_recompute():
    from aorta_tui.workloads._models import KVCache, ModelShape, build_model

    shape = ModelShape("decoder_transformer", 64, 32, 2, 4, 64, max_seq_len=12)
    model = build_model(shape, torch.device("cpu"), torch.float32, 0).eval()
    tokens = torch.randint(0, 64, (3, 12), generator=torch.Generator().manual_seed(1))
    cache = KVCache(shape, slots=3, max_len=12, device=torch.device("cpu"), dtype=torch.float32)
    with torch.no_grad():
        full = model(tokens)
        # prefill 8 tokens into slots 2,0,1, then decode the rest one position at a time
        slots, start = torch.tensor([2, 0, 1]), torch.zeros(3, dtype=torch.long)
        out = [model(tokens[:, :8], cache=cache, slots=slots, start=start)]
        for p in range(8, 12):
            out.append(model(tokens[:, p : p + 1], cache=cache, slots=slots,
                             start=torch.full((3,), p)))
    torch.testing.assert_close(torch.cat(out, dim=1), full, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kv", [True, False])
def test_continuous_batching_serves_every_request_within_the_cap(tmp_path, kv):
    cb = {"enabled": True, "max_active_requests": 2, "arrival_pattern": "burst"}
    raw = {"model": SMALL, "request": {"batch_size": 5, "prompt_len": 4, "generate_tokens": 3},
           "serving": {"kv_cache": kv, "continuous_batch": cb}}
    r = run_workload(Inference, raw, 40, tmp_path)
    m = r.metrics
    assert r.passed and m["mode"] == "continuous_batch"
    assert m["requests_completed"] == 5 and m["requests_unfinished"] == 0
    assert m["max_active_observed"] == 2 and m["tokens_generated"] == 5 * 3
    # each request's first token comes from its prefill call: the decode rate counts the rest
    assert m["decode_tokens"] == 5 * (3 - 1)
    # 5 requests, 2 at a time, 3 tokens each: ceil(5/2) waves of 3 ticks
    assert len(r.step_times_s) == 9
    assert any("all 5 requests done after 9 ticks" in n for n in r.notes)


def test_cache_and_recompute_serve_the_same_tokens(tmp_path):
    raw = {"model": SMALL, "dtype": "float32", "request": {"batch_size": 2, "generate_tokens": 4}}
    a = run_workload(Inference, raw, 1, tmp_path / "a")
    b = run_workload(Inference, {**raw, "serving": {"kv_cache": False}}, 1, tmp_path / "b")
    assert a.metrics["kv_cache_bytes"] > 0 and b.metrics["kv_cache_bytes"] is None
    assert b.metrics["kv_cache_bytes_reason"] == "serving.kv_cache is off"
    assert a.metrics["tokens_generated"] == b.metrics["tokens_generated"] == 8


def test_encoder_serves_prefill_only(tmp_path):
    r = run_workload(Inference, {"model": {**SMALL, "kind": "encoder_transformer"}}, 1, tmp_path)
    assert r.passed and r.metrics["tokens_generated"] == 0 and r.metrics["decode_ms_p50"] is None
    assert "decode_ms_reason" in r.metrics
    assert r.metrics["decode_tokens_per_s"] is None
    assert r.metrics["decode_tokens_per_s_reason"].startswith("no decode calls")


def test_encoder_cannot_be_served_continuously(tmp_path):
    raw = {"mode": "continuous_batch", "model": {"kind": "encoder_transformer"}}
    with pytest.raises(UsageError, match="no decode phase"):
        run_workload(Inference, raw, 1, tmp_path)


def test_upstream_recipe_config_validates_and_runs(tmp_path):
    raw = yaml.safe_load(Path(UPSTREAM).read_text())["workload_config"]
    cfg = validate_config(Inference.config_schema, raw)
    assert cfg["serving"]["continuous_batch"]["max_active_requests"] == 4
    raw["model"].update(vocab_size=128, hidden_size=32, ffn_size=64)
    r = run_workload(Inference, raw, 3, tmp_path)
    assert r.passed and r.metrics["max_active_observed"] == 3  # one arrival per tick


@pytest.mark.parametrize("pattern", ["fixed", "burst", "poisson"])
def test_arrivals_are_ordered_and_seeded(pattern):
    ticks = _arrival_ticks(20, pattern, 0.7, seed=3)
    assert len(ticks) == 20 and ticks == sorted(ticks) and ticks[0] >= 1
    assert ticks == _arrival_ticks(20, pattern, 0.7, seed=3)


fp = st.sampled_from(["a" * 64, "b" * 64, "c" * 64])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), fp), max_size=8))
def test_compare_fingerprints_fails_exactly_when_trials_disagree(fps):
    results = [{"metrics": {"logits_fingerprint": f, "logits_fingerprint_scope": "s",
                            "logits_fingerprint_compare": True, "perturb_logits": 0.0}}
               for f in fps]
    distinct = {f for f in fps if f}
    failures = compare_fingerprints(results)
    assert (len(failures) == 1) == (len(distinct) > 1)
    if failures:
        held = failures[0].details["fingerprints"]
        assert set(held) == distinct
        assert sorted(i for v in held.values() for i in v) == [i for i, f in enumerate(fps) if f]


def test_fingerprints_of_different_configs_are_not_compared():
    a = {"metrics": {"logits_fingerprint": "a" * 64, "logits_fingerprint_scope": "x"}}
    b = {"metrics": {"logits_fingerprint": "b" * 64, "logits_fingerprint_scope": "y"}}
    assert compare_fingerprints([a, b]) == []
