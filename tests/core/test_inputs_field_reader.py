"""``FieldReader.number``: a typed document's number field, optional (null or missing reads as
its default), or ``required`` (null and missing are one located refusal).

``required`` replaced the trace result's own ``_required_number``; its message is the one that
reader wrote, so a damaged ``wall_s`` reads as it always did.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.core.inputs import MAX_JSON_NUMBER, FieldReader

_numbers = st.one_of(
    st.integers(-(10**6), 10**6),
    st.floats(min_value=-MAX_JSON_NUMBER, max_value=MAX_JSON_NUMBER, allow_nan=False))
# What a decoded JSON document may hold at a number's key that is not a number
_not_numbers = st.one_of(
    st.booleans(), st.text(max_size=6), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.sampled_from([math.inf, -math.inf, math.nan, 10**400, 1e301]))
_absent = st.sampled_from(["null", "missing"])


def _doc(state: str) -> dict[str, Any]:
    return {"x": None} if state == "null" else {}


def _reader() -> FieldReader:
    return FieldReader("doc.json", "trace result")


@given(value=_numbers, default=st.none() | _numbers, required=st.booleans())
def test_a_number_reads_as_itself_whatever_the_default_or_required(
        value: float, default: float | None, required: bool) -> None:
    assert _reader().number({"x": value}, "x", "p", default, required=required) == value


@given(state=_absent, default=st.none() | _numbers)
def test_null_and_missing_read_as_the_default(state: str, default: float | None) -> None:
    assert _reader().number(_doc(state), "x", "p", default) == default


@given(state=_absent)
def test_a_required_number_refuses_null_and_missing_alike(state: str) -> None:
    with pytest.raises(UsageError) as err:
        _reader().number(_doc(state), "x", "p", required=True)
    assert err.value.exit_code == ExitCode.USAGE
    # byte for byte the message trace/result_doc.py's own copy wrote
    assert err.value.message == "doc.json: p.x: expected a number, found null or nothing"
    assert err.value.hint == "this trace result is damaged or was not written by aorta-tui"


@given(value=_not_numbers, required=st.booleans(), default=st.none() | _numbers)
def test_a_value_that_is_no_finite_number_is_a_located_exit_2(
        value: object, required: bool, default: float | None) -> None:
    with pytest.raises(UsageError) as err:
        _reader().number({"x": value}, "x", "", default, required=required)
    assert err.value.message.startswith("doc.json: x: expected a finite number or null, found ")


def test_the_overloads_give_a_float_where_one_is_sure() -> None:
    """What mypy sees: each annotation below is checked by mypy over this file (with a plain
    ``float | None`` return a required read would not type-check as ``float``)."""
    f, d = _reader(), {"x": 1.5}
    required: float = f.number(d, "x", "", required=True)
    defaulted: float = f.number({}, "x", "", 0.0)
    maybe: float | None = f.number({}, "x", "")
    assert (required, defaulted, maybe) == (1.5, 0.0, None)


@pytest.mark.parametrize(("value", "found"), [
    (None, "found null"), (True, "found true"), (False, "found false"),
    ("x", "found a string 'x'"), ([1], "found an array [1]"), (3, "found a number 3")])
def test_a_wrong_value_is_said_in_jsons_words_once(value: object, found: str) -> None:
    """The message said "found null None" and "found a boolean True" (the type, then Python's
    spelling of the value) until it said each value once, as JSON writes it."""
    from aorta_tui.core.inputs import require_type

    expected = "integer" if isinstance(value, str) else "string"
    with pytest.raises(UsageError) as err:
        require_type(value, expected, where="f.json", field="a")
    assert err.value.message.endswith(f": a: expected {'an integer' if expected == 'integer' else 'a string'}, {found}")
