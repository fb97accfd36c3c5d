"""The recipe's ``executor:`` block: validated with located errors; not part of the hash."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.core.errors import AortaError, UsageError
from aorta_tui.executor import with_executor_kind
from aorta_tui.recipe import (
    RecipeValidationError,
    dump_resolved,
    load_recipe_text,
    recipe_hash,
)

BASE = """\
schema_version: 1
mode: probe
ticket: t
trials: 1
mitigation_axis: [none]
diagnostic_axis: [none]
"""


def load(executor_yaml: str):
    return load_recipe_text(BASE + executor_yaml, source="r.yaml")


def test_the_three_spellings():
    assert load("").executor.kind == "local"
    assert load("executor: slurm\n").executor.kind == "slurm"
    r = load("executor:\n  kind: slurm\n  partition: gpu\n  account: proj-1\n  gres: 'gpu:a100:2'\n"
             "  time: '1-02:30:00'\n  constraint: 'a100&ib'\n  extra_sbatch: ['--qos=high']\n")
    assert dataclasses.asdict(r.executor) == {
        "kind": "slurm", "partition": "gpu", "account": "proj-1", "gres": "gpu:a100:2",
        "time": "1-02:30:00", "constraint": "a100&ib", "extra_sbatch": ("--qos=high",),
        "nodes": None, "gpus_per_node": None}


@pytest.mark.parametrize(("text", "where", "words"), [
    ("executor: pbs\n", "r.yaml:7:11", "expected one of local, slurm"),
    ("executor: {kind: slurm, partition: 'a b'}\n", "r.yaml:7:36", "is not a Slurm partition"),
    ("executor: {kind: slurm, time: '90 minutes'}\n", "r.yaml:7:31", "is not a Slurm time"),
    ("executor: {kind: slurm, extra_sbatch: ['--array=1-3']}\n", "r.yaml:7:40", "set by aorta-tui"),
    ("executor: {kind: slurm, extra_sbatch: ['-p gpu']}\n", "r.yaml:7:40", "not a long sbatch option"),
    ("executor: {partition: gpu}\n", "r.yaml:7:23", "kind is local"),
    ("executor: {kind: slurm, partiton: gpu}\n", "r.yaml:7:25", "did you mean 'partition'"),
])
def test_bad_values_are_located(text, where, words):
    with pytest.raises(RecipeValidationError) as err:
        load(text)
    issues = [f"r.yaml:{i.line}:{i.column} {i.path}: {i.message} ({i.hint})" for i in err.value.issues]
    assert len(issues) == 1 and issues[0].startswith(where + " executor") and words in issues[0], issues


def test_the_executor_is_resolved_but_not_hashed():
    local, slurm = load(""), load("executor: {kind: slurm, partition: gpu}\n")
    assert recipe_hash(local) == recipe_hash(slurm)
    again = load_recipe_text(dump_resolved(slurm), source="resolved.yaml")
    assert again.executor == slurm.executor and again == slurm
    assert "executor" not in dump_resolved(local)  # older resolved files stay byte-identical
    assert with_executor_kind(slurm, "local").executor.partition is None
    assert with_executor_kind(local, "slurm").executor.kind == "slurm"
    with pytest.raises(UsageError):
        with_executor_kind(local, "kubernetes")


_leaf = st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=True) | st.text(max_size=40)
_value = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(["kind", "partition", "account", "gres", "time",
                                                         "constraint", "extra_sbatch", "x"]), inner,
                                        max_size=4), max_leaves=8)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["kind", "partition", "account", "gres", "time", "constraint",
                                        "extra_sbatch", "nodes"]), _value, max_size=5) | _value)
def test_any_executor_block_loads_or_is_a_located_error(attack_tally, block):
    text = BASE + yaml.safe_dump({"executor": block}, allow_unicode=True)
    failed = 0
    try:
        r = load_recipe_text(text, source="r.yaml")
        assert r.executor.kind in ("local", "slurm")
    except RecipeValidationError as exc:
        failed = 0 if all(i.line >= 1 and i.path.startswith("executor") and i.hint
                          for i in exc.issues) else 1
    except AortaError as exc:  # any other typed refusal must still say where
        failed = 0 if exc.exit_code == 2 else 1
    attack_tally.record("recipe executor fuzzer", cases=1, failures=failed,
                        promise="a recipe or a located exit 2, never 70")
    assert not failed
