"""recipe.resolved.yaml reloads to an equal recipe with the same hash; the hash ignores
comments, key order and whitespace and changes with anything that changes the plan."""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.core.secrets import MASK, is_secret_name
from aorta_tui.recipe import (
    canonical,
    dump_resolved,
    load_recipe_text,
    recipe_hash,
    with_command,
)

names = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
cell_names = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,30}", fullmatch=True).filter(
    lambda n: n not in {"matrix.md", "matrix.json"})
# secret-looking names round-trip masked (test_secrets_round_trip_masked below)
env_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True).filter(
    lambda n: not is_secret_name(n))
images = st.from_regex(r"[a-z0-9]{1,8}(/[a-z0-9]{1,8})?(:[a-z0-9][a-z0-9.-]{0,8})?",
                       fullmatch=True)
probe_sets = st.sampled_from(["cuda", "hip", "amdgpu", "drm_sched", "memory", "errors"])
env_values = st.text(max_size=16).filter(lambda s: "\x00" not in s)
env_maps = st.dictionaries(env_names, env_values, max_size=3)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=6,
)
workload_configs = st.dictionaries(
    st.text(max_size=8).filter(lambda k: k != "steps" and not k.startswith("_aorta")),
    json_values, max_size=4)
positive = st.integers(1, 50)
seconds = st.integers(1, 10_000) | st.floats(0.5, 1e5)


@st.composite
def common(draw, cells: list[str]):
    out: dict = {"schema_version": 1, "trials": draw(positive)}
    if draw(st.booleans()):
        out["ticket"] = draw(cell_names)
    if draw(st.booleans()):
        conf: dict = {"threshold": draw(st.floats(0.01, 10))}
        if cells and draw(st.booleans()):
            conf["baseline_cell"] = draw(st.sampled_from(cells))
        out["confound"] = conf
    if draw(st.booleans()):
        out["timeout_per_trial"] = draw(seconds)
    if draw(st.booleans()):
        out["hang_window_sec"] = draw(seconds)
        out["hang_grace_period_at_start"] = draw(st.integers(0, 1000))
    if draw(st.booleans()):
        out["order"] = draw(st.sampled_from(["interleaved", "sequential", "random"]))
        out["seed"] = draw(st.integers(0, 2**63 - 1))
    if draw(st.booleans()):
        out["retain"] = {"on_pass": draw(st.sampled_from(["full", "summary", "log", "none"]))}
    if draw(st.booleans()):
        out["disable_detectors"] = draw(st.lists(st.sampled_from(
            ["tier1", "tier2:hang", "hang", "TIER3", "tier4:nan_loss"]), max_size=3))
    if draw(st.booleans()):
        out["custom_patterns"] = [
            {"id": f"p{i}", "match": {"regex": r"v=(?P<v>\d+)",
                                      **({"condition": "int(v) > 3"} if i % 2 else {})},
             "on_match": draw(st.sampled_from(["fail", "warn", "info"]))}
            for i in range(draw(st.integers(0, 3)))]
    if draw(st.booleans()):
        out["trace"] = {"probes": draw(st.lists(probe_sets, max_size=2, unique=True)),
                        "mode": draw(st.sampled_from(["events", "aggregate"]))}
    if draw(st.booleans()):
        out["policy_axis"] = draw(st.lists(names, max_size=3, unique=True))
    if draw(st.booleans()):
        out["step_time_regex"] = r"step ([0-9.]+) ms"
    if draw(st.booleans()):  # upstream's collectors: names, or names with options
        out["collect"] = draw(st.sampled_from([
            [], ["torch_profiler"], ["ncu", "layer_numerics"],
            {"layer_numerics": {"NANLOG_SAMPLE_EVERY": "1"}, "torch_profiler": None}]))
    if draw(st.booleans()):
        out["bytecode_cache"] = draw(st.sampled_from(["auto", "on", "off"]))
    return out


@st.composite
def triage_recipes(draw):
    cells_n = draw(st.lists(cell_names, min_size=1, max_size=4, unique=True))
    data = draw(common(cells_n))
    data.update(workload=draw(names), steps=draw(positive))
    if draw(st.booleans()):
        data["workload_config"] = draw(workload_configs)
    if draw(st.booleans()):
        data["extra_env"] = draw(env_maps)
    if draw(st.booleans()):
        data["trial_isolation"] = draw(st.sampled_from(["process", "in_process", "auto"]))
    if draw(st.booleans()):
        data["save_logs"] = True  # the one value aorta-tui honours
    per_cell_trials = draw(st.booleans())
    if not per_cell_trials and draw(st.booleans()):
        events = draw(positive)
        data["stop_after"] = {"events": events, "max_trials": events + draw(st.integers(0, 9))}
    cells = []
    for name in cells_n:
        cell: dict = {"name": name, "mitigations": draw(st.lists(names, min_size=1, max_size=3))}
        if draw(st.booleans()):
            cell["environment"] = draw(st.sampled_from(["local", "default"]) | st.builds(
                lambda img, env: {"docker": img, "env": env}, images, env_maps))
        if draw(st.booleans()):
            cell["extra_env"] = draw(env_maps)
        if per_cell_trials and draw(st.booleans()):
            cell["trials"] = draw(positive)
        if draw(st.booleans()):
            cell["steps"] = draw(positive)
        if draw(st.booleans()):
            cell["workload_config"] = draw(workload_configs)
        if draw(st.booleans()):  # the cell's own collectors replace the recipe's ([]: none)
            cell["collect"] = draw(st.sampled_from([[], ["ncu"], None]))
        cells.append(cell)
    data["cells"] = cells
    return data


@st.composite
def probe_recipes(draw):
    m = draw(st.lists(names, min_size=1, max_size=3, unique=True))
    d = draw(st.lists(names, min_size=1, max_size=3, unique=True))
    cells = [f"{a}-{b}" for a in m for b in d]
    data = draw(common(cells))
    data.update(mode="probe", mitigation_axis=m, diagnostic_axis=d)
    if draw(st.booleans()):
        data["collect_paths"] = draw(st.lists(st.text(min_size=1, max_size=10).filter(
            lambda s: s.strip() and "\x00" not in s), max_size=2))
    if draw(st.booleans()):
        data["env_passthrough_mode"] = draw(st.sampled_from(["inherit", "file"]))
    if draw(st.booleans()):
        data["redaction"] = {"scrub_env_keys": ["*_TOKEN"], "scrub_paths": draw(st.booleans())}
    if draw(st.booleans()):
        data["command"] = draw(st.lists(st.text(min_size=1, max_size=10).filter(
            lambda s: s.strip() and "\x00" not in s), min_size=1, max_size=3))
    return data


recipes = triage_recipes() | probe_recipes()
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@SETTINGS
@given(recipes)
def test_resolved_round_trip_equal_and_same_hash(data):
    r = load_recipe_text(yaml.safe_dump(data, allow_unicode=True))
    text = dump_resolved(r)
    again = load_recipe_text(text)
    assert again == r
    assert recipe_hash(again) == recipe_hash(r)
    assert dump_resolved(again).split("\n", 4)[4] == text.split("\n", 4)[4]  # a fixed point
    assert canonical(again) == canonical(r)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@SETTINGS
@given(recipes, st.booleans())
def test_hash_ignores_comments_key_order_and_whitespace(data, flow):
    plain = yaml.safe_dump(data, allow_unicode=True)
    other = yaml.safe_dump(dict(reversed(list(data.items()))), allow_unicode=True, indent=4,
                           default_flow_style=flow)
    # comments and blank lines between the top-level keys (never inside a value)
    top = re.compile("^(" + "|".join(sorted(data)) + "):", re.M)
    decorated = "# a comment\n\n" + top.sub(lambda m: "\n# about " + m.group(1) + "\n"
                                            + m.group(0), other) + "\n# trailing\n"
    assert recipe_hash(load_recipe_text(plain)) == recipe_hash(load_recipe_text(decorated))


@SETTINGS
@given(recipes)
def test_hash_changes_with_the_plan(data):
    r = load_recipe_text(yaml.safe_dump(data, allow_unicode=True))
    h = recipe_hash(r)
    assert recipe_hash(dataclasses.replace(r, trials=r.trials + 1)) != h
    assert recipe_hash(dataclasses.replace(r, seed=r.seed + 1 if r.seed < 2**62 else 0)) != h
    assert recipe_hash(dataclasses.replace(r, order="sequential" if r.order != "sequential"
                                           else "random")) != h
    if r.mode == "probe":
        assert recipe_hash(with_command(r, ["cmd", "a"])) != recipe_hash(
            with_command(r, ["cmd", "b"]))
    else:
        first = r.cells[0]
        changed = dataclasses.replace(first, extra_env={**first.extra_env, "ZZ_NEW": "1"})
        assert recipe_hash(dataclasses.replace(r, cells=(changed, *r.cells[1:]))) != h


def test_probe_command_round_trips_through_the_resolved_file():
    r = load_recipe_text("schema_version: 1\nmode: probe\ntrials: 2\n"
                         "mitigation_axis: [none, tf32_off]\ndiagnostic_axis: [none]\n")
    with_cmd = with_command(r, ["bash", "-c", "echo 'hi: there' # not a comment"])
    text = dump_resolved(with_cmd)
    again = load_recipe_text(text)
    assert again.command == ("bash", "-c", "echo 'hi: there' # not a comment")
    assert recipe_hash(again) == recipe_hash(with_cmd) != recipe_hash(r)
    assert "#   tf32_off-none: mitigations [tf32_off]" in text


def test_resolved_fills_defaults():
    r = load_recipe_text("schema_version: 1\nworkload: w\ntrials: 1\nsteps: 1\n"
                         "cells: [{name: c, mitigations: [none]}]\n")
    data = yaml.safe_load(dump_resolved(r))
    assert data["mode"] == "triage" and data["order"] == "interleaved" and data["seed"] == 0
    assert data["confound"] == {"threshold": 1.15, "baseline_cell": "c"}
    assert data["hang_window_sec"] == 30.0 and data["hang_grace_period_at_start"] == 60.0
    assert data["trial_isolation"] == "process"
    assert data["cells"] == [{"name": "c", "mitigations": ["none"], "environment": "local",
                              "extra_env": {}}]


def test_secrets_round_trip_masked():
    """A token is never in the resolved text; its masked form hashes the same, and running
    from it is refused (the value was never written) until the original recipe is given."""
    import pytest

    from aorta_tui.core.errors import UsageError
    from aorta_tui.registry.registry import Registry
    from aorta_tui.sweep.plan import build_plan

    r = load_recipe_text("schema_version: 1\nworkload: w\ntrials: 1\nsteps: 1\n"
                         "extra_env: {HF_TOKEN: hf_abc123, N: '1'}\n"
                         "cells: [{name: c, mitigations: [none], extra_env: {DB_PASSWORD: pw9}}]\n")
    text = dump_resolved(r)
    assert "hf_abc123" not in text and "pw9" not in text and MASK in text
    again = load_recipe_text(text)
    assert again.extra_env == {"HF_TOKEN": MASK, "N": "1"}
    assert recipe_hash(again) == recipe_hash(r)
    assert build_plan(r, Registry()).cells[0].env["HF_TOKEN"] == "hf_abc123"
    with pytest.raises(UsageError, match="DB_PASSWORD, HF_TOKEN"):
        build_plan(again, Registry())


def test_collectors_are_part_of_the_plan_and_the_bytecode_cache_is_not():
    """Collectors change what each trial records: the resolved file keeps them (recipe and cell)
    and the hash follows them. The bytecode cache changes how fast imports are, no trial: kept
    in the file, left out of the hash (a resume may give another `--bytecode-cache`)."""
    base = yaml.safe_dump({"schema_version": 1, "workload": "training", "steps": 3, "trials": 1,
                           "cells": [{"name": "a", "mitigations": ["baseline"]}]})
    plain = load_recipe_text(base)
    collecting = load_recipe_text(base + "collect: [torch_profiler]\n")
    assert recipe_hash(collecting) != recipe_hash(plain)
    assert load_recipe_text(dump_resolved(collecting)).collect == ("torch_profiler",)
    cell = dataclasses.replace(plain.cells[0], collect=())
    assert recipe_hash(dataclasses.replace(plain, cells=(cell,))) != recipe_hash(plain)
    # a bare `off` is YAML 1.1's false: read as the word written
    no_cache = load_recipe_text(base + "bytecode_cache: off\n")
    assert no_cache.bytecode_cache == "off" and recipe_hash(no_cache) == recipe_hash(plain)
    assert load_recipe_text(dump_resolved(no_cache)).bytecode_cache == "off"
    assert load_recipe_text(base + "bytecode_cache: on\n").bytecode_cache == "on"
