"""A policy file's `env:` obeys the one rule of every trial environment (issue 17, one validator):
``registry/registry.env_entry_problem``, as recipe ``extra_env`` and sidecar ``env`` do."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.policy.file import parse_policy_text
from aorta_tui.recipe.checks import MAX_ENV_STRING, env_entry_problem

# Its last test records what the others ran in the attack harness table, so the whole file
# runs in one tier (slow: --fast leaves it all out) and on one xdist worker (its group: CI
# runs this tier with --dist loadgroup), in file order; a worker's counts reach no other.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("tally-layers_policy_env")]

COUNT = {"cases": 0, "failures": 0}


def _doc(env: dict, name: str = "mine") -> str:
    return json.dumps({"schema_version": 1, "policies": {name: {"env": env}}}, indent=1)


@pytest.mark.parametrize(("name", "env", "needle"), [
    ("mine", {"FOO\n": "1"}, "is not a valid environment variable name"),  # `$` matched before \n
    ("mine\n", {"A": "1"}, "a policy name is a letter"),
    ("mine", {"BIG": "x" * (MAX_ENV_STRING + 1)}, "bytes a process environment string may have"),
])
def test_what_the_recipe_refuses_a_policy_file_refuses_too(name: str, env: dict, needle: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_policy_text(_doc(env, name), "pol.json")
    assert needle in info.value.render() and info.value.exit_code == ExitCode.USAGE
    assert info.value.location and info.value.location.startswith("pol.json:")


env_names = st.one_of(st.text(max_size=6), st.sampled_from(["A", "_B1", "1A", "A\n", "A B", "A=B"]))
env_values = st.one_of(st.text(max_size=6), st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=False),
                       st.sampled_from(["a\x00b", ""]))


@settings(max_examples=300, deadline=None)
@given(env_names, env_values)
def test_a_policy_env_entry_is_accepted_exactly_when_the_shared_rule_accepts_it(name: str, value) -> None:
    COUNT["cases"] += 1
    want_ok = env_entry_problem(name, value if isinstance(value, str) else str(value)) is None
    try:
        got = parse_policy_text(_doc({name: value}), "pol.json")[0].env
        ok = want_ok and got == {name: value if isinstance(value, str) else str(value)}
    except UsageError as exc:
        ok = not want_ok and exc.location is not None
    COUNT["failures"] += not ok
    assert ok, (name, value)


def test_zz_record_counts(attack_tally) -> None:
    attack_tally.record("policy env vs the shared env rule", cases=COUNT["cases"],
                        failures=COUNT["failures"], promise="same verdict as recipe/sidecar, located exit 2")
    assert COUNT["failures"] == 0
