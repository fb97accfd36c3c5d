"""Malformed recipes of every kind: always a located RecipeError, never a traceback."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.recipe import (
    Recipe,
    RecipeValidationError,
    check_recipe_text,
    load_recipe_text,
)
from aorta_tui.registry.registry import Registry

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = REPO / "tests" / "fixtures" / "upstream-recipes"
SEEDS = [yaml.safe_load(p.read_text()) for p in sorted(UPSTREAM.glob("*.yaml"))] + [
    yaml.safe_load(p.read_text()) for p in sorted((REPO / "recipes" / "examples").glob("*.yaml"))
]
LOCATED = re.compile(r":\d+:\d+: ")

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 10**12), st.floats(allow_nan=True),
    st.text(max_size=12), st.sampled_from(["none", "..", "tf32_off", "probe", "1", "", "a/b"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=6,
)


def _paths(node, prefix=()):
    """Every (container, key) pair of a parsed recipe."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield node, k
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield node, i
            yield from _paths(v, (*prefix, i))


@st.composite
def mutated_recipes(draw):
    recipe = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 3))):
        spots = list(_paths(recipe))
        container, key = draw(st.sampled_from(spots))
        action = draw(st.sampled_from(["replace", "delete", "unknown", "rename"]))
        if action == "replace":
            container[key] = draw(values)
        elif action == "delete":
            del container[key]
        elif isinstance(container, dict):
            new_key = draw(st.text(min_size=1, max_size=10)) if action == "unknown" else \
                str(key)[:-1] + draw(st.sampled_from("xs_"))
            container[new_key] = container.pop(key) if action == "rename" else draw(values)
        else:
            container.append(draw(values))
    return yaml.safe_dump(recipe, sort_keys=draw(st.booleans()), allow_unicode=True)


REGISTRY = Registry()


def _assert_located_error_or_recipe(text: str, registry: Registry | None = None) -> None:
    try:
        recipe = load_recipe_text(text, source="fuzz.yaml", registry=registry)
    except RecipeValidationError as exc:
        assert exc.issues, "an error without issues"
        for issue in exc.issues:
            assert issue.line >= 1 and issue.column >= 1, issue
            assert issue.message
        assert LOCATED.search(exc.render()), exc.render()
        assert check_recipe_text(text, source="fuzz.yaml", registry=registry) == exc.issues
    else:
        assert isinstance(recipe, Recipe)
        assert check_recipe_text(text, registry=registry) == []


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_recipes(), st.booleans())
def test_mutated_upstream_and_example_recipes(text, with_registry):
    _assert_located_error_or_recipe(text, REGISTRY if with_registry else None)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_random_text(text):
    _assert_located_error_or_recipe(text)


@settings(max_examples=200, deadline=None)
@given(values)
def test_random_yaml_documents(data):
    _assert_located_error_or_recipe(yaml.safe_dump(data, allow_unicode=True))


yaml_chars = st.sampled_from(list("ab:-[]{},'\"#&*!|>%@` \n\t?.0123456789") + ["\n  ", ": ",
                                                                             "- ", "<<: "])


@settings(max_examples=200, deadline=None)
@given(st.lists(yaml_chars, max_size=60).map("".join))
def test_random_yaml_punctuation(text):
    _assert_located_error_or_recipe(text)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SEEDS), st.sampled_from(["trials", "steps", "cells", "confound",
                                                "workload_config", "mitigation_axis",
                                                "stop_after", "timeout_per_trial", "ticket"]),
       values)
def test_wrong_types_at_known_keys(seed, key, value):
    recipe = copy.deepcopy(seed)
    recipe[key] = value
    _assert_located_error_or_recipe(yaml.safe_dump(recipe, allow_unicode=True))


# -- the real CLI path ------------------------------------------------------------------------
CLI_CASES = [
    "schema_version: 1\nworkload: x\ntrials: [\n",
    "schema_version: 2\n",
    "- just\n- a list\n",
    "schema_version: 1\nworkload: gpu_smoke\ntrials: true\nsteps: 1\ncells: [{name: a, "
    "mitigations: [tf32of]}]\n",
    "schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\n"
    "diagnostic_axis: [none]\ncustom_patterns: [{id: x, match: {regex: y, condition: "
    "\"().__class__\"}}]\n",
    "a: &x [*x]\n",
    "a: !!python/object/apply:os.system ['echo owned']\n",
]


@st.composite
def cli_texts(draw):
    return draw(st.sampled_from(CLI_CASES)) if draw(st.booleans()) else draw(mutated_recipes())


def _run_cli(path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "aorta_tui", "recipe", "validate", str(path)],
                          capture_output=True, text=True, timeout=60, env=env, cwd=REPO)


@pytest.mark.parametrize("index", range(len(CLI_CASES)))
def test_cli_reports_malformed_recipes_with_a_location(tmp_path, index):
    f = tmp_path / "bad.yaml"
    f.write_text(CLI_CASES[index])
    proc = _run_cli(f)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert re.search(re.escape(str(f)) + r":\d+:\d+: ", proc.stderr), proc.stderr
    assert "internal error" not in proc.stderr


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(text=mutated_recipes())
def test_cli_on_mutated_recipes(tmp_path, text):
    f = tmp_path / "m.yaml"
    f.write_text(text)
    proc = _run_cli(f)
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.returncode in (0, 2), proc.stderr
    if proc.returncode == 2:
        assert re.search(re.escape(str(f)) + r":\d+:\d+: ", proc.stderr), proc.stderr
    else:
        assert "valid recipe" in proc.stdout
