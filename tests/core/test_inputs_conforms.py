"""One check of a decoded JSON value against a field's annotation: ``core.inputs.conforms`` and
its words, ``hint_text``.

It replaced three copies that had drifted apart (the journal reader's, the queue sweep's
config check, the sweep request's reader): one took an int where a float was wanted and one
did not, one refused NaN and the others let it through, and a 401-digit integer for
``confound_threshold`` was a traceback in the third. The annotations are drawn from the shapes
the typed records use (scalars, ``Path``, ``list[T]``, ``dict[str, T]``, unions, ``Any``).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.events import EVENT_TYPES
from aorta_tui.core.inputs import conforms, hint_text

_SCALARS: list[Any] = [bool, int, float, str, Path]


def _alternatives(hint: Any) -> tuple[Any, ...]:
    if typing.get_origin(hint) in (typing.Union, type(int | None)):
        return typing.get_args(hint)
    return (hint,)


# The annotations of the records' fields: a union's alternatives, a list's items and a dict's
# values are drawn from the same grammar, and any of them may be Optional.
_annotations: st.SearchStrategy[Any] = st.recursive(
    st.sampled_from(_SCALARS),
    lambda inner: st.one_of(
        inner.map(lambda h: list[h]),
        inner.map(lambda h: dict[str, h]),
        (inner | st.just(Any)).map(lambda h: list[h]),
        st.tuples(inner, inner).map(lambda ab: typing.Union[ab]),  # noqa: UP007 - the other union object
        st.tuples(inner, inner).map(lambda ab: ab[0] | ab[1]),  # A | B (types.UnionType)
        inner.map(lambda h: h | None),
    ),
    max_leaves=6,
)
# ... and those that do not take null at the top (Optional inside is still drawn): null taken
# out of a top-level union, not filtered (a filter costs draws, and slow draws fail CI)
_hints = _annotations.map(
    lambda h: typing.Union[tuple(a for a in _alternatives(h) if a is not type(None))])  # noqa: UP007

_json: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


def _fitting(hint: Any) -> st.SearchStrategy[Any]:
    """Values a JSON document holds for ``hint`` (built from the annotation, not from conforms)."""
    if len(_alternatives(hint)) > 1:
        return st.one_of([_fitting(h) for h in _alternatives(hint)])
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is list:
        return st.lists(_fitting(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(st.text(max_size=6), _fitting(args[1]), max_size=3)
    return {
        Any: _json, type(None): st.none(), bool: st.booleans(), int: st.integers(),
        float: st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**60), 2**60),
        str: st.text(max_size=8), Path: st.text(min_size=1, max_size=8),
    }[hint]


# The JSON kinds of a top-level value, and which kinds each annotation takes.
_KIND_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(), "boolean": st.booleans(), "integer": st.integers(),
    "float": st.floats(allow_nan=False, allow_infinity=False),  # 1.0 too: JSON's 1.0 is no int
    "string": st.text(min_size=1, max_size=8), "array": st.lists(_json, min_size=1, max_size=3),
    "object": st.dictionaries(st.text(max_size=4), _json, min_size=1, max_size=3),
}


def _kinds_taken(hint: Any) -> set[str]:
    taken: set[str] = set()
    for alt in _alternatives(hint):
        origin = typing.get_origin(alt) or alt
        taken |= {type(None): {"null"}, bool: {"boolean"}, int: {"integer"},
                  float: {"integer", "float"}, str: {"string"}, Path: {"string"},
                  list: {"array"}, dict: {"object"}}[origin]
    return taken


@given(st.data(), _annotations | st.just(Any))
def test_a_value_built_for_the_annotation_conforms(data: st.DataObject, hint: Any) -> None:
    value = data.draw(_fitting(hint))
    assert conforms(value, hint), (value, hint)


@given(st.data(), st.sampled_from(_SCALARS) | _annotations)  # the recursion favours big ones
def test_a_value_of_a_json_kind_the_annotation_does_not_take_does_not_conform(
        data: st.DataObject, hint: Any) -> None:
    for kind in sorted(set(_KIND_VALUES) - _kinds_taken(hint)):  # each kind it does not take
        value = data.draw(_KIND_VALUES[kind], label=kind)
        assert not conforms(value, hint), (value, hint)


@given(st.booleans(), st.integers())
def test_a_boolean_is_never_an_integer(flag: bool, n: int) -> None:
    # True is an int to Python; `"streams": true` is no count
    assert not conforms(flag, int) and not conforms(flag, int | None)
    assert not conforms([n, flag], list[int]) and not conforms({"k": flag}, dict[str, int])
    assert not conforms(flag, float)
    assert conforms(flag, int | bool) and conforms(n, int) and conforms([n], list[int])


_NOT_FINITE = st.sampled_from([math.nan, math.inf, -math.inf]) | st.integers(
    min_value=2**1024, max_value=2**1100).flatmap(lambda n: st.sampled_from([n, -n]))


@given(_NOT_FINITE, st.floats(allow_nan=False, allow_infinity=False))
def test_nan_infinity_and_an_integer_past_float_do_not_conform_to_float(bad: Any, ok: float) -> None:
    assert not conforms(bad, float) and not conforms(bad, float | None)
    assert not conforms([ok, bad], list[float]) and not conforms({"p": bad}, dict[str, float | None])
    assert conforms(ok, float) and conforms([ok], list[float])
    # the journal's choice: its writer puts a NaN figure down as NaN, and the line stays an event
    assert conforms(bad, float, finite=False) and conforms([ok, bad], list[float], finite=False)


@given(_hints)
def test_null_conforms_only_where_the_annotation_allows_it(hint: Any) -> None:
    assert not conforms(None, hint)
    assert conforms(None, hint | None) and conforms(None, typing.Optional[hint])  # noqa: UP045
    assert conforms(None, Any) and conforms([None], list[Any])
    assert not conforms([None], list[hint]) and conforms([None], list[hint | None])


def test_a_path_is_a_non_empty_string() -> None:
    assert conforms("runs/a", Path) and conforms("runs/a", Path | None)
    assert not conforms("", Path) and not conforms("", Path | None)  # Path("") is the cwd
    assert not conforms(["a", ""], list[Path])


@given(st.lists(_hints, min_size=2, max_size=4, unique_by=hint_text), st.booleans())
def test_hint_text_names_every_alternative_of_a_union(alternatives: list[Any], finite: bool) -> None:
    union = typing.Union[tuple(alternatives)]  # noqa: UP007 - flattens nested unions
    text = hint_text(union, finite=finite)
    for alt in _alternatives(union):
        assert hint_text(alt, finite=finite) in text, (alt, text)
    # typing's cache may hand back `union | None` with its alternatives in another order (a
    # Union equal as a set was made before): the same words, null last, in any order
    nullable = hint_text(union | None, finite=finite)
    assert nullable.endswith(" or null") and len(nullable) == len(f"{text} or null"), nullable
    for alt in _alternatives(union):
        assert hint_text(alt, finite=finite) in nullable, (alt, nullable)


def test_a_union_typing_hands_back_in_another_order_is_named_whole() -> None:
    """Found in explore mode: Union[B, A] | None came back as Union[A, B, None] (typing's cache
    keeps the first of two unions equal as sets)."""
    typing.Union[list[Path], list[list[Any]]]  # noqa: B018, UP007 - the cached order
    later = typing.Union[list[list[Any]], list[Path]]  # noqa: UP007
    nullable = hint_text(later | None)
    assert nullable.endswith(" or null") and len(nullable) == len(hint_text(later)) + len(" or null")
    assert all(hint_text(alt) in nullable for alt in typing.get_args(later))


def test_hint_text_in_json_words() -> None:
    assert hint_text(int | None) == "an integer or null"
    assert hint_text(typing.Optional[bool]) == "true or false or null"  # noqa: UP045
    assert hint_text(list[str] | None) == "an array (items: a string) or null"
    assert hint_text(dict[str, float | None]) == "an object (values: a finite number or null)"
    assert hint_text(dict[str, float | None], finite=False) == "an object (values: a number or null)"
    assert hint_text(dict[str, Any]) == "an object" and hint_text(Path) == "a path (a non-empty string)"


@pytest.mark.parametrize("hint", [tuple[int, ...], Literal["a", "b"], set[str], list[tuple[int, int]]])
def test_an_annotation_it_does_not_know_is_a_type_error_not_a_pass(hint: Any) -> None:
    # a field typed so would otherwise let a damaged file's value through unchecked
    with pytest.raises(TypeError, match="does not know"):
        conforms([1], hint)


def _record_types() -> list[type]:
    from aorta_tui.hwqueue.harness import QueueRunConfig
    from aorta_tui.sweep.way_in import SweepRequest

    return [*EVENT_TYPES.values(), QueueRunConfig, SweepRequest]


@pytest.mark.parametrize("cls", _record_types(), ids=lambda c: c.__name__)
def test_every_field_of_the_records_it_checks_has_an_annotation_it_knows(cls: type) -> None:
    # parse_journal_line never raises: a new field type must be taught to conforms, and this
    # is where that shows
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        for value in (None, 0, "x", [], {}):
            conforms(value, hints[f.name])
