"""A queue sweep's failed point (``trials/s<NNNN>/result.json`` of kind
``aorta-tui/queue-sweep-failed-point``) as a typed value (hwqueue/failed_point_doc.py): the new
writer writes the bytes the untyped one did (its code copied below, verbatim), any record reads
back to itself, a damaged one is a located UsageError (exit 2) that the resume takes for no
result, and an oversize one is refused unread."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import AortaError, ExitCode, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.hwqueue.failed_point_doc import FAILED_POINT_KIND, FailedPointRecord
from aorta_tui.hwqueue.result import SCHEMA_VERSION
from aorta_tui.hwqueue.sweep import _whole_point

_text = st.text(max_size=12)
_streams = st.integers(0, 2**40)
_json = st.recursive(st.none() | st.booleans() | st.integers(-9, 9) | _text,
                     lambda inner: st.lists(inner, max_size=2)
                     | st.dictionaries(_text, inner, max_size=2), max_leaves=4)
_errors = st.builds(lambda cls, message, hint, location, code: _error(cls, message, hint,
                                                                        location, code),
                    st.sampled_from([AortaError, UsageError]), _text, st.none() | _text,
                    st.none() | _text, st.sampled_from(list(ExitCode)))


def _error(cls: type[AortaError], message: str, hint: str | None, location: str | None,
           code: ExitCode) -> AortaError:
    error = cls(message, hint=hint, location=location)
    error.exit_code = code
    return error


def _old_record(n: int, error: AortaError) -> dict[str, Any]:
    # verbatim: hwqueue/sweep.py _StoreSweep._point before the type
    record = {"schema_version": SCHEMA_VERSION, "kind": FAILED_POINT_KIND, "streams": n,
              "reason": error.render(), "exit_code": int(error.exit_code)}
    return record


@settings(max_examples=100, deadline=None)
@given(_streams, _errors)
def test_the_writer_writes_the_untyped_writers_bytes(n: int, error: AortaError) -> None:
    assert json_bytes(FailedPointRecord.of(n, error).to_json()) == json_bytes(_old_record(n, error))


_records = st.builds(
    FailedPointRecord, streams=_streams, reason=_text, exit_code=st.none() | st.integers(0, 255),
    schema_version=st.integers(1, 3),
    extra=st.dictionaries(_text.filter(lambda k: k not in {
        "schema_version", "kind", "streams", "reason", "exit_code"}), _json, max_size=2))


@settings(max_examples=100, deadline=None)
@given(_records)
def test_any_record_reads_back_to_itself(record: FailedPointRecord) -> None:
    data = json.loads(json_bytes(record.to_json()))
    assert FailedPointRecord.from_json(data, "r.json") == record
    assert FailedPointRecord.is_one(data)


def _valid() -> dict[str, Any]:
    return FailedPointRecord.of(2, UsageError("the 2-stream point failed", hint="h")).to_json()


@pytest.mark.parametrize(("key", "value", "words"), [
    ("streams", "2", "streams: expected an integer, found a string '2'"),
    ("streams", True, "streams: expected an integer"),
    ("reason", 3, "reason: expected a string"),
    ("exit_code", 2.5, "exit_code: expected an integer or null"),
    ("schema_version", None, "schema_version: expected an integer"),
    ("kind", "aorta-tui/queue-result",
     "kind: expected 'aorta-tui/queue-sweep-failed-point', found 'aorta-tui/queue-result'"),
])
def test_damage_is_located_and_is_no_result_to_the_resume(key: str, value: object,
                                                          words: str) -> None:
    data = {**_valid(), key: value}
    with pytest.raises(UsageError) as got:
        FailedPointRecord.from_json(data, "trials/s0002/result.json")
    assert str(got.value).startswith(f"trials/s0002/result.json: {words}")
    assert got.value.exit_code == ExitCode.USAGE
    assert _whole_point(data, "s0002") is None  # the point runs again


@pytest.mark.parametrize("key", ["streams", "reason", "kind", "schema_version"])
def test_a_required_field_missing_is_located(key: str) -> None:
    data = _valid()
    del data[key]
    with pytest.raises(UsageError, match=rf"^r\.json: {key}: missing"):
        FailedPointRecord.from_json(data, "r.json")


def test_the_resume_takes_a_whole_record_of_its_own_point_only() -> None:
    data = _valid()
    assert _whole_point(data, "s0002") == data
    assert _whole_point(data, "s0004") is None  # another point's
    del data["exit_code"]  # by hand, without one: still the point's failure (read as INTERNAL)
    assert _whole_point(data, "s0002") == data
    assert FailedPointRecord.from_json(data, "r.json").exit_code is None
    with pytest.raises(UsageError, match=r"^r\.json: \(top level\): expected an object"):
        FailedPointRecord.from_json([1], "r.json")


def test_a_record_file_is_read_and_an_oversize_one_refused_unread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    point = tmp_path / "trials" / "s0002"
    point.mkdir(parents=True)
    (point / "result.json").write_bytes(json_bytes(_valid()))
    with RunDirFS(tmp_path) as fs:
        record = FailedPointRecord.read(fs, "trials/s0002/result.json")
        assert record.to_json() == _valid() and record.failed_point().streams == 2
        monkeypatch.setitem(INPUT_LIMITS, "queue sweep failed point", 64)
        with pytest.raises(UsageError, match="over the 64 B limit"):
            FailedPointRecord.read(fs, "trials/s0002/result.json")
