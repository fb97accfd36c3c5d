"""A docker environment's minimal snapshot as a typed value (sweep/snapshots.MinimalSnapshot):
the typed writer writes the bytes the untyped one wrote; what it wrote reads back to its bytes
and hashes as it hashed; a damaged one is a located error, and its hash "cannot be read"."""

from __future__ import annotations

import hashlib
import json
import platform
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import UsageError
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.sweep.snapshots import MINIMAL_KIND, MinimalSnapshot, _write_minimal, snapshot_hash


def _old_writer(name: str, overlay: dict[str, str], note: str) -> bytes:
    """sweep/snapshots.py's _write_minimal before the type (its body, verbatim, as bytes)."""
    snap: dict[str, Any] = {
        "schema_version": 0,
        "kind": MINIMAL_KIND,
        "note": note,
        "environment": name,
        "env": dict(sorted(overlay.items())),
        "host": {
            "kernel": platform.release(),
            "machine": platform.machine(),
            "python": platform.python_version(),
        },
    }
    return json_bytes(snap)


def _old_hash(data: dict[str, Any]) -> str:
    """snapshot_hash's minimal branch before the type."""
    blob = json.dumps({"env": data.get("env"), "host": data.get("host")}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _no_schema_hash(data: dict[str, Any]) -> str | None:
    raise AssertionError("a minimal snapshot is hashed by sweep/snapshots.py, not envsnap")


_text = st.text(max_size=10)


@given(_text, st.dictionaries(_text, _text, max_size=5), _text)
def test_the_typed_writer_writes_the_untyped_writers_bytes(name: str, overlay: dict[str, str],
                                                           note: str) -> None:
    old = _old_writer(name, overlay, note)
    doc = MinimalSnapshot.of(name, overlay, note=note)
    assert json_bytes(doc.to_json()) == old
    again = MinimalSnapshot.from_dict(json.loads(old), where="f")
    assert again == doc and json_bytes(again.to_json()) == old
    assert again.hash() == _old_hash(json.loads(old))


def test_a_written_snapshot_reads_back_and_hashes_as_before(tmp_path: Path) -> None:
    path = tmp_path / "env-docker.json"
    with RunDirFS(tmp_path) as fs:
        _write_minimal(fs, path, "docker:x", {"B": "2", "A": "1"}, note="not captured")
        assert path.read_bytes() == _old_writer("docker:x", {"B": "2", "A": "1"}, "not captured")
        assert snapshot_hash(fs, path, _no_schema_hash) == _old_hash(json.loads(path.read_bytes()))


def test_a_key_a_newer_writer_added_is_kept() -> None:
    data = {**MinimalSnapshot.of("d", {"A": "1"}, note="n").to_json(), "image": "ubuntu"}
    doc = MinimalSnapshot.from_dict(data, where="f")
    assert doc.extra == {"image": "ubuntu"} and doc.to_json() == data


_GOOD = MinimalSnapshot.of("docker:x", {"A": "1"}, note="n").to_json()
_DAMAGE = [
    ({**_GOOD, "env": ["A=1"]}, "env: expected an object"),
    ({**_GOOD, "env": {"A": 1}}, "env.A: expected a string"),
    ({k: v for k, v in _GOOD.items() if k != "host"}, "host: missing"),
    ({**_GOOD, "environment": None}, "environment: expected a string"),
    ({**_GOOD, "schema_version": "0"}, "schema_version: expected an integer"),
]


@pytest.mark.parametrize(("data", "words"), _DAMAGE, ids=[w for _, w in _DAMAGE])
def test_a_damaged_one_is_located_and_its_hash_cannot_be_read(tmp_path: Path, data: dict[str, Any],
                                                              words: str) -> None:
    path = tmp_path / "env-docker.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError) as exc:
        MinimalSnapshot.from_dict(data, where=str(path))
    assert exc.value.message.startswith(f"{path}: {words}"), exc.value.message
    assert exc.value.hint
    # refused now (sweep/snapshots.py says why): the untyped hash hashed the damage as written
    with RunDirFS(tmp_path) as fs:
        assert snapshot_hash(fs, path, _no_schema_hash) is None
