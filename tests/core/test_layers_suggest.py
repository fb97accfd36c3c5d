"""One "did you mean" helper (issue 17): ``core/suggest.py``; every unknown-name error asks it."""

from __future__ import annotations

import ast
import difflib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.core import suggest

# Its last test records what the others ran in the attack harness table, so the whole file
# runs in one tier (slow: --fast leaves it all out) and on one xdist worker (its group: CI
# runs this tier with --dist loadgroup), in file order; a worker's counts reach no other.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("tally-layers_suggest")]

REPO = Path(__file__).resolve().parents[2]
names = st.text(alphabet="abcdefghij_-.", min_size=1, max_size=12)
COUNT = {"cases": 0, "failures": 0}


@settings(max_examples=300, deadline=None)
@given(names, st.lists(names, max_size=15), st.randoms(use_true_random=False))
def test_matches_are_difflibs_whatever_the_order_of_the_candidates(word, cands, rnd) -> None:
    COUNT["cases"] += 1
    shuffled = list(cands)
    rnd.shuffle(shuffled)
    want = difflib.get_close_matches(word, sorted(cands), n=3, cutoff=0.6)
    ok = suggest.close_matches(word, shuffled, n=3) == want
    near = suggest.nearest(word, shuffled)
    ok = ok and near == (want[0] if want else None)
    ok = ok and suggest.did_you_mean(word, shuffled) == (f"did you mean {want[0]!r}? " if want else "")
    ok = ok and suggest.did_you_mean_any(word, shuffled) == (f"did you mean {', '.join(want)}?" if want else None)
    COUNT["failures"] += not ok
    assert ok


def test_the_phrasings_callers_and_tests_read() -> None:
    assert suggest.did_you_mean("stpes", ["steps", "seed"]) == "did you mean 'steps'? "
    assert suggest.did_you_mean("zzz", ["steps"]) == ""
    assert suggest.did_you_mean_any("fifo", ["fifo-strict", "fif0"], cutoff=0.5, joiner=" or ") == \
        "did you mean fif0 or fifo-strict?"
    # a 1 MB key (a hostile JSON file) is answered at once, not after difflib's quadratic work
    assert suggest.nearest("a" * 1_000_000, ["a" * 150]) is None


def test_nothing_else_calls_difflib() -> None:
    callers = []
    for path in sorted((REPO / "aorta_tui").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "get_close_matches":
                callers.append(str(path.relative_to(REPO)))
    assert callers == ["aorta_tui/core/suggest.py"]


def test_zz_record_counts(attack_tally) -> None:
    attack_tally.record("did-you-mean agreement with difflib", cases=COUNT["cases"],
                        failures=COUNT["failures"], promise="same names, any candidate order")
    assert COUNT["failures"] == 0
