"""Key paths (``cells[1].mitigations[0]``) and their parents, with keys a hostile file may hold."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st


@given(st.text(max_size=30))
def test_parent_path_of_any_key_never_raises_and_shortens(path: str) -> None:
    # A key of its own ending in "]" (no "[") crashed the location lookup of a policy file's
    # unknown key: ValueError out of parse_policy_text, found by its hypothesis fuzzer.
    from aorta_tui.recipe.loader import parent_path

    parent = parent_path(path)
    assert len(parent) < len(path) or path == parent == ""


def test_an_unknown_key_ending_in_a_bracket_is_a_located_error(tmp_path) -> None:
    from aorta_tui.core.errors import UsageError
    from aorta_tui.policy.file import parse_policy_text

    with pytest.raises(UsageError) as info:
        parse_policy_text('{"x]": null}', "pol.json")
    assert "pol.json:1" in info.value.render() and "x]" in info.value.render()
