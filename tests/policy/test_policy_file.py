"""User policy files: valid files load, every mistake is one located UsageError."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.policy.file import load_policy_file, parse_policy_text

GOOD_YAML = """\
schema_version: 1
policies:
  four_connections:
    description: four hardware work queues
    vendor: cuda
    kind: scheduling
    env:
      CUDA_DEVICE_MAX_CONNECTIONS: 4
  pinned_clocks:
    gpu_control: {clock_level: 5, power_limit_w: 300}
  lc_priority:
    harness_args: ["--stream-priority", "lc"]
"""


def test_valid_yaml_loads(tmp_path: Path) -> None:
    path = tmp_path / "pol.yaml"
    path.write_text(GOOD_YAML)
    pols = {p.name: p for p in load_policy_file(path)}
    assert set(pols) == {"four_connections", "pinned_clocks", "lc_priority"}
    four = pols["four_connections"]
    assert four.env == {"CUDA_DEVICE_MAX_CONNECTIONS": "4"}  # numbers become strings
    assert four.vendor == "cuda" and four.kind == "scheduling"
    assert four.source == f"{path}:3"
    assert pols["pinned_clocks"].gpu_control.clock_level == 5
    assert pols["pinned_clocks"].gpu_control.power_limit_w == 300
    assert not pols["pinned_clocks"].has_process_effect()
    assert pols["lc_priority"].harness_args == ("--stream-priority", "lc")


def test_valid_json_loads(tmp_path: Path) -> None:
    path = tmp_path / "pol.json"
    path.write_text(json.dumps(yaml.safe_load(GOOD_YAML), indent="\t"))
    assert len(load_policy_file(path)) == 3


@pytest.mark.parametrize(
    ("text", "line", "needle"),
    [
        ("policies:\n  mine:\n    envv: {A: '1'}\n", 3, "policies.mine.envv: unknown key"),
        ("policies:\n  mine:\n    env:\n      A: true\n", 4, "policies.mine.env.A"),
        ("policies:\n  mine:\n    vendor: nvidia\n", 3, "policies.mine.vendor"),
        ("policies:\n  baseline: {env: {A: '1'}}\n", 2, "built-in"),
        ("policies:\n  mine:\n    gpu_control: {clock_level: 9}\n", 3, "clock_level"),
        ("policies:\n  mine: {env: {A: '1'}}\n  mine: {env: {B: '1'}}\n", 3, "twice"),
        ("policies:\n  mine:\n    env: {A: '1'\n", 4, "not valid YAML"),
        ("polices:\n  mine: {}\n", 1, "did you mean 'policies'"),
        ("schema_version: 2\npolicies: {mine: {}}\n", 1, "schema_version"),
        ("policies:\n  mine:\n    harness_args: ['--streams', '4']\n", 3, "set by the sweep"),
        ("policies:\n  mine:\n    env: {'1BAD': x}\n", 3, "environment variable name"),
        ("- a\n- b\n", 1, "expected a mapping"),
        ("", 1, "empty"),
    ],
)
def test_errors_name_file_line_and_key(tmp_path: Path, text: str, line: int, needle: str) -> None:
    path = tmp_path / "pol.yaml"
    path.write_text(text)
    with pytest.raises(UsageError) as info:
        load_policy_file(path)
    err = info.value
    assert err.exit_code == ExitCode.USAGE
    assert err.location == f"{path}:{line}", err.render()
    assert needle in err.render()


def test_json_errors_are_located(tmp_path: Path) -> None:
    path = tmp_path / "pol.json"
    path.write_text('{\n  "policies": {\n    "mine": {"env": {"A": "1"},}\n  }\n}\n')
    with pytest.raises(UsageError) as info:
        load_policy_file(path)
    assert info.value.location == f"{path}:3"
    path.write_text('{\n  "policies": {\n    "mine": {\n      "evn": {}\n    }\n  }\n}\n')
    with pytest.raises(UsageError) as info:
        load_policy_file(path)
    assert info.value.location == f"{path}:4" and "did you mean 'env'" in info.value.render()


def test_missing_file_and_binary_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        load_policy_file(tmp_path / "nope.yaml")
    bad = tmp_path / "bin.yaml"
    bad.write_bytes(b"policies:\n  a: \xff\xfe\n")
    with pytest.raises(UsageError) as info:
        load_policy_file(bad)
    assert info.value.location == f"{bad}:2"


def test_alias_bomb_is_refused() -> None:
    text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 9):
        prev = chr(ord("a") + i - 1)
        cur = chr(ord("a") + i)
        text += f"{cur}: &{cur} [{', '.join(['*' + prev] * 10)}]\n"
    with pytest.raises(UsageError, match="too large"):
        parse_policy_text(text, "bomb.yaml")


# -- property: malformed input never escapes as anything but a located UsageError ----------

LOCATION = re.compile(r"^pol\.(yaml|json)(:\d+)?$")

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10, 10_000), st.floats(allow_nan=False),
                    st.text(max_size=12))
keys = st.one_of(st.sampled_from(["policies", "env", "vendor", "kind", "gpu_control",
                                  "clock_level", "power_limit_w", "harness_args",
                                  "description", "schema_version", "baseline", "mine", "A_1"]),
                 st.text(max_size=8))
trees = st.recursive(scalars, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                     st.dictionaries(keys, kids, max_size=4)),
                     max_leaves=20)


def _check(text: str, name: str) -> None:
    try:
        parse_policy_text(text, name)
    except UsageError as exc:
        assert exc.location is not None and LOCATION.match(exc.location), exc.location
        assert exc.render()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees)
def test_random_documents_never_raise_anything_else(doc: object) -> None:
    _check(yaml.safe_dump({"policies": doc} if isinstance(doc, dict) else doc), "pol.yaml")
    _check(json.dumps(doc), "pol.json")


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_mangled_good_file_never_raises_anything_else(data: st.DataObject) -> None:
    text = GOOD_YAML
    pos = data.draw(st.integers(0, len(text)))
    cut = data.draw(st.integers(0, 6))
    insert = data.draw(st.text(alphabet=" \t:-{}[]\"'\n#&*!|>%@`,abc01", max_size=6))
    _check(text[:pos] + insert + text[pos + cut:], "pol.yaml")
