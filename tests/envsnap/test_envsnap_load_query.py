"""Loading snapshots (bad input gives a UsageError, exit 2, never a traceback) and --field."""

from __future__ import annotations

import json
from pathlib import Path

import hypothesis.strategies as st
import pytest
from envsnap_helpers import FIXTURES, load_fixture, typed
from hypothesis import HealthCheck, given, settings

from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.envsnap import EnvSnapshot, UpstreamSnapshot, iter_leaves, load_snapshot
from aorta_tui.envsnap.query import get_field

H200_TEXT = (FIXTURES / "h200.json").read_text()


def write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "message"), [
    (H200_TEXT[: len(H200_TEXT) // 2], "truncated JSON"),
    ("hello, not json", "not valid JSON"),
    ("", "empty"),
    ("[1, 2, 3]", "expected a JSON object"),
    (json.dumps({"format": "aorta-tui-envsnap", "schema_version": 99}), "unknown schema_version 99"),
    (json.dumps({"schema_version": "2.0", "captured_at": "x"}), "unknown snapshot schema_version '2.0'"),
    (json.dumps({"schema_version": "1.x", "env_vars": {}}), "upstream AORTA env.json with unknown schema_version"),
    (json.dumps({"format": "aorta-tui-envsnap", "schema_version": 1, "host": {"kernel_release": "6.1"}}),
     "host.kernel_release: expected a field object"),
    (json.dumps({"format": "aorta-tui-envsnap", "schema_version": 1,
                 "host": {"k": {"value": 1, "state": "maybe", "source": ""}}}), "state 'maybe'"),
    (json.dumps({"format": "aorta-tui-envsnap", "schema_version": 1, "extra": {}}), "unknown top-level key 'extra'"),
], ids=["truncated", "not-json", "empty", "array", "schema-99", "upstream-2.0", "upstream-1.x",
        "bare-value", "bad-state", "extra-key"])
def test_bad_files_are_usage_errors_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "bad.json", text)
    with pytest.raises(UsageError) as info:
        load_snapshot(path)
    assert message in info.value.render() and str(path) in info.value.render()
    assert info.value.exit_code == ExitCode.USAGE


def test_a_directory_and_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is a directory"):
        load_snapshot(tmp_path)
    with pytest.raises(UsageError, match="no such file"):
        load_snapshot(tmp_path / "nope.json")


def test_truncation_error_names_line_and_column(tmp_path: Path) -> None:
    cut = H200_TEXT[:1000]
    with pytest.raises(UsageError) as info:
        load_snapshot(write(tmp_path, "cut.json", cut))
    line = cut.count("\n") + 1
    assert f"cut.json:{line}:" in info.value.render()


def test_real_files_load(tmp_path: Path) -> None:
    for name in ("h200.json", "cpu-box.json", "upstream-h200.json", "upstream-cpu-box.json"):
        snapshot = load_snapshot(FIXTURES / name)
        expected = UpstreamSnapshot if name.startswith("upstream-") else EnvSnapshot
        assert isinstance(snapshot, expected)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(min_value=0, max_value=len(H200_TEXT) - 2))
def test_any_truncation_is_a_usage_error(tmp_path_factory: pytest.TempPathFactory, cut: int) -> None:
    path = tmp_path_factory.mktemp("t") / "t.json"
    path.write_text(H200_TEXT[:cut])
    with pytest.raises(UsageError):
        load_snapshot(path)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_json)
def test_arbitrary_json_is_rejected_with_a_usage_error(tmp_path_factory: pytest.TempPathFactory, data) -> None:
    path = tmp_path_factory.mktemp("j") / "j.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError):  # anything else (a traceback) fails the test
        load_snapshot(path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_rejected_with_a_usage_error(tmp_path_factory: pytest.TempPathFactory, blob: bytes) -> None:
    path = tmp_path_factory.mktemp("b") / "b.json"
    path.write_bytes(blob)
    with pytest.raises(UsageError):  # anything else (a traceback) fails the test
        load_snapshot(path)


# --- --field -----------------------------------------------------------------------------

def test_fields_of_the_h200_snapshot(h200: dict) -> None:
    assert get_field(typed(h200), "gpus.0.architecture") == "sm_90"
    assert get_field(typed(h200), "gpus[0].compute_units") == 132
    assert get_field(typed(h200), "gpus.0.name") == "NVIDIA H200"
    assert get_field(typed(h200), "cuda.cublas.version") == "13.1.0"
    assert get_field(typed(h200), "cuda.cudnn.version") == "9.19.0"
    assert get_field(typed(h200), "driver.nvidia_version") == "580.159.04"
    assert get_field(typed(h200), "torch.tf32_matmul") is False
    assert get_field(typed(h200), "torch.tf32_matmul.source") == "api:torch.backends.cuda.matmul.allow_tf32"
    assert get_field(typed(h200), "rocm.gfx_targets.state") == "not_applicable"
    assert get_field(typed(h200), "gpus.0")["uuid_hash"] == h200["gpus"][0]["uuid_hash"]["value"]


@pytest.mark.parametrize(("path", "fragment"), [
    ("gpus.0.archtecture", "nearest keys: architecture"),
    ("torch.vers", "nearest keys: version"),
    ("gpus.5.name", "list of 1 items"),
    ("gpus.zero", "list of 1 items"),
    ("host.kernel_release.value.more", "is a field"),
    ("nosuch", "no key 'nosuch' under the top level"),
    ("", "needs a path"),
])
def test_wrong_paths_name_the_nearest_keys(h200: dict, path: str, fragment: str) -> None:
    with pytest.raises(UsageError) as info:
        get_field(typed(h200), path)
    assert fragment in info.value.render()


_H200 = load_fixture("h200.json")


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(p for p, _ in iter_leaves(_H200))))
def test_every_leaf_path_reads_back_its_value(path: str) -> None:
    assert get_field(typed(_H200), path) == dict(iter_leaves(_H200))[path]["value"]


def test_summary_shows_byte_limits_in_gib_and_keeps_unlimited(h200: dict) -> None:
    from aorta_tui.envsnap.summary import summarize

    def cgroup_row(snap: dict) -> str:
        return dict(dict(summarize(typed(snap)))["host"])["cgroup cpu / mem"]

    assert cgroup_row(h200).endswith(" / unlimited")
    h200["host"]["cgroup_memory_limit_bytes"] = {"state": "ok", "value": 8 * 2**30, "source": "x"}
    assert cgroup_row(h200).endswith(" / 8.0 GiB")
