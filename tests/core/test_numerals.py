"""One test for "is this text a number": ``core.numerals.ascii_digits``.

The defect it ends: ``str.isdigit()`` says yes to ``'²'`` and ``'¹'``, ``int()`` then raises, and
a user typing ``--metrics ²`` or ``top=¹`` got a traceback (both found by hypothesis in CI). The
rule test keeps the three Unicode-wide predicates out of the package so that the next parser
cannot reintroduce it.
"""

from __future__ import annotations

import ast
import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.numerals import ascii_digits

PACKAGE = Path(__file__).resolve().parents[2] / "aorta_tui"
BANNED = {"isdigit", "isdecimal", "isnumeric"}


@given(st.text())
def test_ascii_digits_is_exactly_what_int_reads_as_plain_decimal(text: str) -> None:
    expected = bool(text) and set(text) <= set(string.digits)
    assert ascii_digits(text) is expected
    if expected:
        assert str(int(text)).lstrip("0") == text.lstrip("0")


@given(st.text(alphabet=st.characters(categories=["Nd", "No", "Nl"])).filter(
    lambda t: not set(t) <= set(string.digits)))
def test_unicode_digits_are_not_numbers_here(text: str) -> None:
    assert not ascii_digits(text)


def test_refuses_the_inputs_that_crashed() -> None:
    for text in ("²", "¹", "1²", "٣", "１", " 1", "1 ", "+1", "-1", "1_0", ""):
        assert not ascii_digits(text), text
    assert ascii_digits("0") and ascii_digits("0065535")


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_no_unicode_wide_digit_predicate_in_the_package() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in BANNED):
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} "
                                 f".{node.func.attr}()")
    assert not offenders, ("use aorta_tui.core.numerals.ascii_digits (int() refuses what "
                           "isdigit() accepts):\n" + "\n".join(offenders))
