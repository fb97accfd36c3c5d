"""One validator for workload settings: a queue ``--param KEY=VALUE`` and a recipe's
``workload_config`` key holding the same text are accepted or refused alike.

The queue side is the real path (the CLI's ``_parse_params``, then a ``QueueWorkload``'s
constructor); the recipe side is the real recipe loader reading ``workload_config: {k: TEXT}``
then ``validate_config``. Both must give the same value, or the same refusal worded the same
way (only the location differs: ``workload_config.k`` against ``--param k``).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from aorta_tui.cli.queue_cmd import _parse_params
from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.hwqueue.workloads import workload_class
from aorta_tui.hwqueue.workloads.base import Launch, QueueWorkload, QueueWorkloadContext
from aorta_tui.recipe.loader import LoadProblem, parse_yaml_text
from aorta_tui.registry.workload import ConfigField, validate_config


def _probe_class(field: ConfigField) -> type[QueueWorkload]:
    """A queue workload whose one parameter is ``field`` (nothing runs: only its params)."""

    class Probe(QueueWorkload):
        name = "probe"
        category = "latency_sensitive"
        description = "schema probe"
        min_streams, max_streams, recommended_streams = 1, 1, 1
        work_unit, throughput_unit = "op", "op/s"
        config_schema = (field,)
        tiny: dict[str, Any] = {}

        def setup(self, ctx: QueueWorkloadContext) -> None:
            pass

        def iteration(self, index: int) -> list[Launch]:
            return []

        def work_per_iteration(self) -> float:
            return 1.0

    return Probe


_WORDS = st.sampled_from(["round_robin", "per_stream", "eager", "inductor", "yes", "no", "on",
                          "off", "true", "False", "null", "~", "", "0x10", "010", "1_000",
                          "1e3", "1.0e+3", ".inf", "-.inf", ".nan", "3.5", "-2", "+7", "'3'",
                          '"x"', "[1, 2]", "{a: 1}", "a: b", "#c", "x #c", "[1", "!!str 3",
                          "2024-01-01", "1:30"])


@st.composite
def _fields(draw: Any) -> ConfigField:
    kind = draw(st.sampled_from(["int", "float", "str", "bool"]))
    if kind == "int":
        lo = draw(st.none() | st.integers(-5, 5))
        hi = draw(st.none() | st.integers(5, 2000))
        return ConfigField("k", "int", 5, min=lo, max=hi)
    if kind == "float":
        return ConfigField("k", "float", 1.5, min=draw(st.none() | st.floats(-2, 2)))
    if kind == "str":
        choices = draw(st.none() | st.just(("round_robin", "per_stream")))
        return ConfigField("k", "str", "round_robin", choices=choices)
    return ConfigField("k", "bool", False)


_TEXTS = (_WORDS | st.integers(-10**6, 10**6).map(str)
          | st.floats(allow_nan=False, allow_infinity=False).map(repr)
          | st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12))


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        value = call()
    except UsageError as exc:
        assert exc.exit_code == ExitCode.USAGE
        return "refused", exc
    return "accepted", value


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def _recipe_config(text: str) -> dict[str, Any] | None:
    """``workload_config`` of a recipe holding ``k: TEXT``; None when it cannot hold it."""
    try:
        doc, _ = parse_yaml_text(f"workload_config:\n  k: {text}\n")
    except LoadProblem:
        return None
    ok = isinstance(doc, dict) and isinstance(doc.get("workload_config"), dict) \
        and list(doc["workload_config"]) == ["k"]
    return doc["workload_config"] if ok else None


def _check(field: ConfigField, text: str, config: dict[str, Any]) -> None:
    doc = {"workload_config": config}
    recipe = _outcome(lambda: validate_config((field,), doc["workload_config"])["k"])
    probe = _probe_class(field)
    queue = _outcome(lambda: probe(_parse_params([f"k={text}"])).params["k"])
    assert recipe[0] == queue[0], (text, recipe, queue)
    if recipe[0] == "accepted":
        assert _same(recipe[1], queue[1]), (text, recipe, queue)
    else:
        r, q = recipe[1], queue[1]
        assert r.message.startswith("workload_config.k: ")
        assert q.message.startswith("--param k: ")
        assert r.message.removeprefix("workload_config.k") == q.message.removeprefix("--param k")
        assert q.location == "queue workload 'probe'"
        assert q.hint and r.hint  # a fix on both sides


@settings(max_examples=400, deadline=None)
@given(field=_fields(), text=_TEXTS)
def test_queue_param_and_recipe_config_accept_and_refuse_alike(attack_tally: Any,
                                                               field: ConfigField,
                                                               text: str) -> None:
    assume("\n" not in text and "\r" not in text and text == text.strip())
    config = _recipe_config(text)
    assume(config is not None)  # the recipe cannot even hold this text: nothing to compare
    assert config is not None
    failed = 1
    try:
        _check(field, text, config)
        failed = 0
    finally:
        attack_tally.record("queue --param vs recipe workload_config property", cases=1,
                            failures=failed, promise="same values accepted, same refusals "
                            "(located, exit 2)")


@pytest.mark.parametrize(("params", "message", "hint"), [
    ({"ops_per_strem": "3"}, "--param ops_per_strem: unknown key 'ops_per_strem'",
     "did you mean 'ops_per_stream'? allowed here: ops_per_stream, order, tensor_size"),
    ({"ops_per_stream": "many"}, "--param ops_per_stream: expected an integer, got a string "
     "('many')", "write a whole number without quotes; e.g. --param ops_per_stream=100"),
    ({"ops_per_stream": "-1"}, "--param ops_per_stream: must be at least 0, got -1",
     "use a value >= 0; e.g. --param ops_per_stream=100"),
    ({"order": "per_strem"}, "--param order: expected one of round_robin, per_stream, got "
     "'per_strem'", "did you mean 'per_stream'? e.g. --param order=round_robin"),
])
def test_a_bad_param_names_the_workload_the_flag_the_key_and_a_fix(
        params: dict[str, str], message: str, hint: str) -> None:
    with pytest.raises(UsageError) as exc:
        workload_class("tiny_kernel_stress")(params)
    assert exc.value.location == "queue workload 'tiny_kernel_stress'"
    assert exc.value.message == message
    assert exc.value.hint == hint


def test_every_queue_workload_declares_its_params_as_a_schema() -> None:
    from aorta_tui.hwqueue.workloads import WORKLOADS

    for name in WORKLOADS:
        cls = workload_class(name)
        assert cls.config_schema and all(isinstance(f, ConfigField) for f in cls.config_schema)
        assert cls.defaults == {f.name: f.default for f in cls.config_schema}
        assert set(cls.tiny) <= set(cls.defaults), name
        cls(size="tiny")  # the tiny overrides pass the schema too


def test_a_huge_value_is_not_echoed_whole() -> None:
    with pytest.raises(UsageError) as exc:
        workload_class("tiny_kernel_stress")(_parse_params(["ops_per_stream=" + "9x" * 2_000_000]))
    assert len(exc.value.render()) < 400 and "--param ops_per_stream" in exc.value.message
