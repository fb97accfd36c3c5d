"""`export --format csv` writes the tables with the standard library (no pandas needed): what
pandas' ``to_csv(index=False)`` wrote for the same rows, cell for cell, for any rows."""

from __future__ import annotations

import csv
import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.analysis.export import _csv
from aorta_tui.analysis.tables import Table

CELL = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40),
                 st.floats(allow_nan=False),
                 st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8))
ROWS = st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]), CELL, max_size=3), max_size=5)


def _parsed(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def _same_cell(ours: str, theirs: str) -> bool:
    """Equal, or the one difference on purpose: 3 where pandas made an integer column with an
    empty cell float and wrote "3.0"."""
    if ours == theirs:
        return True
    try:
        return int(ours) == float(theirs)
    except ValueError:
        return False


@given(ROWS)
def test_the_csv_is_pandas_to_csv_cell_for_cell(rows: list[dict[str, object]]) -> None:
    pd = pytest.importorskip("pandas")
    table = Table.of(rows)
    theirs = pd.DataFrame(rows, columns=list(table.columns)).to_csv(index=False)
    ours = _csv(table).decode("utf-8")
    if not any(isinstance(v, int) and not isinstance(v, bool) for r in rows for v in r.values()):
        assert ours == theirs  # byte for byte where no integer column can turn float
    a, b = _parsed(ours), _parsed(theirs)
    assert len(a) == len(b)
    for mine, pandas_row in zip(a, b, strict=True):
        assert len(mine) == len(pandas_row)
        assert all(_same_cell(x, y) for x, y in zip(mine, pandas_row, strict=True)), (mine, pandas_row)


def test_an_integer_beside_an_empty_cell_stays_an_integer() -> None:
    table = Table.of([{"exit_code": 0, "peak_rss_kb": 231760}, {"exit_code": None, "peak_rss_kb": None}])
    assert _csv(table) == b"exit_code,peak_rss_kb\n0,231760\n,\n"


def test_columns_are_the_rows_keys_in_first_seen_order_and_a_missing_key_is_empty() -> None:
    table = Table.of([{"b": 1}, {"a": "x,y", "b": 2.5}])
    assert table.columns == ("b", "a")
    assert _csv(table) == b'b,a\n1,\n2.5,"x,y"\n'
