"""No function under aorta_tui/ is over 80 lines (issue 36): a long function is split into named
steps, not grown. The walker counts from the ``def`` line to the function's last line
(decorators left out, docstring and comments in), nested functions and methods included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAX_LINES = 80


def long_functions(source: str, where: str, limit: int = MAX_LINES) -> list[tuple[str, int]]:
    """``(file:line name, length)`` of each function in ``source`` longer than ``limit`` lines."""
    found = []
    for node in ast.walk(ast.parse(source, filename=where)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno is not None  # set by ast.parse since Python 3.8
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                found.append((f"{where}:{node.lineno} {node.name}", length))
    return found


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_no_function_in_aorta_tui_is_over_80_lines() -> None:
    offenders = []
    for path in sorted((REPO / "aorta_tui").rglob("*.py")):
        where = str(path.relative_to(REPO))
        offenders += long_functions(path.read_text(encoding="utf-8"), where)
    listing = "\n".join(f"  {name}: {length} lines" for name, length in offenders)
    assert not offenders, (f"functions over {MAX_LINES} lines (split them into named steps):\n"
                           f"{listing}")


def _function_of(lines: int, *, decorated: bool = False, indent: str = "") -> str:
    """Source of a function that is exactly ``lines`` lines long, def line included."""
    body = [f"{indent}    x{i} = {i}" for i in range(lines - 2)] + [f"{indent}    return x0"]
    head = [f"{indent}@staticmethod"] if decorated else []
    return "\n".join([*head, f"{indent}def f():", *body]) + "\n"


def test_the_walker_counts_an_81_line_function_and_passes_an_80_line_one() -> None:
    assert long_functions(_function_of(81), "m.py") == [("m.py:1 f", 81)]
    assert long_functions(_function_of(80), "m.py") == []


def test_the_walker_finds_methods_and_leaves_decorators_out() -> None:
    method = "class C:\n" + _function_of(81, decorated=True, indent="    ")
    assert long_functions(method, "m.py") == [("m.py:3 f", 81)]
    # 80 lines plus its decorator line: the function itself is 80, within the rule
    assert long_functions("class C:\n" + _function_of(80, decorated=True, indent="    "),
                          "m.py") == []
