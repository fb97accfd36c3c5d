"""env.json as a typed value (``envsnap/doc.py``): the one serializer writes the bytes the
untyped writer wrote, files the old code wrote read back to their bytes, a newer file's fields
are kept, and a damaged file is a located UsageError (exit 2 through the CLI), never a
traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from envsnap_helpers import FIXTURES, REPO, load_fixture
from hypothesis import HealthCheck, given, settings

from aorta_tui.core.atomic import atomic_write_json, json_bytes
from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.envsnap import EnvSnapshot, Field, UpstreamSnapshot, load_snapshot, snapshot_hash
from aorta_tui.envsnap import fields as F

# -- the untyped writer, copied verbatim from envsnap/capture/__init__.py and __main__.py -----
# (before the typed value: capture_snapshot returned ``sort_snapshot(snapshot)``, a dict, and
# ``python -m aorta_tui.envsnap`` / ``env probe`` wrote it with ``atomic_write_json``)

FORMAT = "aorta-tui-envsnap"
SCHEMA_VERSION = 1


def sort_snapshot(node: Any) -> Any:
    """Sort keys at every level (lists keep their order) so two snapshots diff line by line."""
    if isinstance(node, dict):
        return {k: sort_snapshot(node[k]) for k in sorted(node)}
    if isinstance(node, list):
        return [sort_snapshot(x) for x in node]
    return node


def _minimal_failure(reason: str) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "probe": {"captured_at": F.ok(datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "api:datetime"),
                  "internal_error": F.error(reason, "aorta_tui.envsnap.capture")},
    }


def old_write(path: Path, captured: dict[str, Any]) -> bytes:
    atomic_write_json(path, sort_snapshot(captured))
    return path.read_bytes()


def new_write(path: Path, captured: dict[str, Any]) -> bytes:
    """What capture_snapshot + the writers do now: the one reader, the one serializer."""
    atomic_write_json(path, EnvSnapshot.from_dict(captured).to_json())
    return path.read_bytes()


# -- snapshots as the capture builds them: keys in any order, at any depth ---------------------

_text = st.text(max_size=12)
_scalar = (st.none() | st.booleans() | st.integers(min_value=-2**63, max_value=2**63)
           | st.floats(allow_nan=False, allow_infinity=False) | _text)
_value = st.recursive(_scalar, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(_text, inner, max_size=3), max_leaves=8)


@st.composite
def _leaf(draw: st.DrawFn) -> dict[str, Any]:
    state = draw(st.sampled_from(F.STATES))
    leaf: dict[str, Any] = {"value": draw(_value) if state == "ok" else None, "state": state,
                            "source": draw(_text)}
    if state != "ok":
        leaf["reason"] = draw(st.text(min_size=1, max_size=12))
    for key, strategy in (("needs_root", st.just(True)), ("set", st.booleans()),
                          ("category", _text)):
        if draw(st.booleans()):
            leaf[key] = draw(strategy)
    keys = draw(st.permutations(list(leaf)))  # the capture's order, not the file's
    return {k: leaf[k] for k in keys}


_name = st.text(alphabet="abcdefghij_ÄΩ", min_size=1, max_size=6).filter(lambda k: k not in F.LEAF_KEYS)
_fields = st.recursive(st.dictionaries(_name, _leaf(), max_size=4),
                       lambda inner: st.dictionaries(_name, _leaf() | inner, max_size=3), max_leaves=6)


@st.composite
def captured(draw: st.DrawFn) -> dict[str, Any]:
    snap: dict[str, Any] = {"format": FORMAT, "schema_version": SCHEMA_VERSION}
    for section in ("probe", "host", "driver", "cuda", "rocm", "torch", "python", "env_vars"):
        if draw(st.booleans()):
            snap[section] = draw(_fields)
    if draw(st.booleans()):
        snap["gpus"] = draw(st.lists(_fields, max_size=2))
    keys = draw(st.permutations(list(snap)))
    return {k: snap[k] for k in keys}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(captured())
@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_the_serializer_writes_the_untyped_writers_bytes(tmp_path: Path, snap: dict[str, Any]) -> None:
    old = old_write(tmp_path / "old.json", snap)
    assert new_write(tmp_path / "new.json", snap) == old
    # and the file reads back to its own bytes, through the located reader
    assert json_bytes(load_snapshot(tmp_path / "old.json").to_json()) == old


def test_the_capture_failure_has_the_same_keys_and_values_now_sorted(tmp_path: Path) -> None:
    """The one change of bytes: the capture's whole-failure snapshot, which the untyped writer
    wrote unsorted; the same document, in the order every other snapshot has."""
    old = _minimal_failure("ValueError: boom")
    new = EnvSnapshot.from_dict(old).to_json()
    assert new == old and json_bytes(new) == json_bytes(sort_snapshot(old))


_OURS = sorted([*FIXTURES.glob("*.json"), *(REPO / "tests" / "tui" / "fixtures").rglob("env*/*.json")])


@pytest.mark.parametrize("path", [p for p in _OURS if not p.name.startswith("upstream-")],
                         ids=lambda p: p.name)
def test_files_the_old_code_wrote_read_back_to_their_bytes(path: Path) -> None:
    """The committed captures (the H200, the CPU box, the TUI's run) and two taken on this
    box with the untyped writer (old-writer-*.json, before this change)."""
    snap = load_snapshot(path)
    assert isinstance(snap, EnvSnapshot)
    assert json_bytes(snap.to_json()) == path.read_bytes()
    # the typed hash is the one the sweep takes of the file's JSON as it is
    assert snapshot_hash(snap) == snapshot_hash(json.loads(path.read_bytes()))


def test_old_writer_fixtures_were_captured_here() -> None:
    # the parametrized test above must reach them: a rename would silently drop them
    names = {p.name for p in _OURS}
    assert {"old-writer-cpu-box.json", "old-writer-cpu-box-no-torch.json"} <= names


def test_an_upstream_file_is_read_as_it_is() -> None:
    snap = load_snapshot(FIXTURES / "upstream-h200.json")
    assert isinstance(snap, UpstreamSnapshot)
    assert snap.to_json() == load_fixture("upstream-h200.json")


def test_fields_a_newer_writer_added_are_kept(tmp_path: Path) -> None:
    data = load_fixture("cpu-box.json")
    data["host"]["numa_distance"] = {"source": "file:/sys/...", "state": "ok", "value": [10, 21]}
    data["cuda"]["cufft"] = {"path": {"source": "x", "state": "ok", "value": "/lib/libcufft.so"}}
    path = tmp_path / "newer.json"
    path.write_bytes(json_bytes(sort_snapshot(data)))
    snap = load_snapshot(path)
    assert isinstance(snap, EnvSnapshot)
    assert snap.host["numa_distance"] == Field(value=[10, 21], state="ok", source="file:/sys/...")
    assert json_bytes(snap.to_json()) == path.read_bytes()


def test_attributes_name_what_the_file_holds(h200: dict) -> None:
    snap = EnvSnapshot.from_dict(h200)
    gpu = snap.gpus[0]
    assert gpu["architecture"].value == "sm_90" and gpu["architecture"].ok
    assert snap.cuda["cublas"]["version"].value == "13.1.0"
    variable = next(iter(snap.env_vars.values()))
    assert variable.is_set is False and variable.category
    assert dict(snap.leaves()) == {p: Field(**{("is_set" if k == "set" else k): v
                                               for k, v in leaf.items()})
                                   for p, leaf in F_iter(h200)}


def F_iter(data: dict) -> list[tuple[str, dict]]:
    from aorta_tui.envsnap.schema import iter_leaves

    return list(iter_leaves(data))


# -- damage: located, exit 2 ------------------------------------------------------------------

def _damaged(edit: str) -> dict[str, Any]:
    data = load_fixture("cpu-box.json")
    leaf = data["host"]["kernel_release"]
    if edit == "source":
        leaf["source"] = 5
    elif edit == "reason-null":
        data["host"]["kernel_release"] = {**leaf, "state": "error", "value": None, "reason": None}
    elif edit == "set":
        next(iter(data["env_vars"].values()))["set"] = "yes"
    elif edit == "array":
        data["host"]["kernel_release"] = [leaf]
    elif edit == "version-true":
        data["schema_version"] = True
    return data


@pytest.mark.parametrize(("edit", "message"), [
    ("source", "host.kernel_release.source: expected a string, found a number 5"),
    ("reason-null", "host.kernel_release: state 'error' without a reason"),
    ("set", ".set: expected true or false, found a string 'yes'"),
    ("array", "host.kernel_release: expected a field object {value, state, source} or an object "
              "of fields, found an array"),
    ("version-true", "unknown schema_version True"),
])
def test_a_damaged_snapshot_is_located(tmp_path: Path, edit: str, message: str) -> None:
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(_damaged(edit)))
    with pytest.raises(UsageError) as info:
        load_snapshot(path)
    assert message in info.value.render() and str(path) in info.value.render()
    assert info.value.exit_code == ExitCode.USAGE


@pytest.mark.slow  # >= 1.5 s measured (the real CLI in subprocesses)
def test_the_cli_says_where_a_snapshot_is_damaged_and_exits_2(tmp_path: Path) -> None:
    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps(_damaged("source")))
    good = FIXTURES / "cpu-box.json"
    for args in (["summary", str(damaged)], ["summary", str(damaged), "--field", "host"],
                 ["diff", str(good), str(damaged)]):
        proc = subprocess.run([sys.executable, "-m", "aorta_tui", "env", *args], capture_output=True,
                              text=True, timeout=120, cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        assert proc.returncode == 2, (args, proc.stderr)
        assert f"{damaged}: host.kernel_release.source: expected a string" in proc.stderr, args
        assert "Traceback" not in proc.stderr and proc.stdout == "", args
