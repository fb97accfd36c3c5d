"""Issue 36: no engine module runs the command line as a child.

An engine (a sweep, the policy evaluator, the queue sweep, the agent) starts its trials through an
engine entry point (``python -m aorta_tui.hwqueue.child``, ``python -m aorta_tui.sweep.child``)
that takes a typed request file, never ``aorta-tui ...`` or ``python -m aorta_tui ...``: a child
command line is a second, untyped way in that must be kept in step with the CLI's flags. Only the
front ends and their bridge (``relay/``, which runs ``aorta-tui <cmd> --json`` for the TUI:
docs/architecture.md, "One bridge to the TUI") may run it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "aorta_tui"
FRONT_ENDS = {"cli", "tui", "relay"}
# the CLI as a child: the console script, or the package's __main__ through -m
CLI_WORDS = {"aorta-tui", "aorta_tui"}


def _engine_modules() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py"))
            if len(p.relative_to(PACKAGE).parts) > 1 and p.relative_to(PACKAGE).parts[0] not in FRONT_ENDS]


def _cli_children(tree: ast.AST) -> list[int]:
    """Lines of list/tuple displays that name the CLI as a program: ``"-m", "aorta_tui"``
    together, or ``"aorta-tui"`` first (an argv's program, not a value or a message)."""
    lines = []
    # `mode, flavour = "aorta-tui", "aorta-tui"` unpacks values: no argv
    unpacked = {id(n.value) for n in ast.walk(tree)
                if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Tuple)}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.List, ast.Tuple)) or id(node) in unpacked:
            continue
        words = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        module_run = any(a == "-m" and b in CLI_WORDS for a, b in zip(words, words[1:], strict=False))
        first = node.elts[0] if node.elts else None
        program = isinstance(first, ast.Constant) and first.value == "aorta-tui"
        if module_run or program:
            lines.append(node.lineno)
    return lines


def test_no_engine_module_runs_the_cli_as_a_child() -> None:
    found = {f"{p.relative_to(PACKAGE)}:{line}" for p in _engine_modules()
             for line in _cli_children(ast.parse(p.read_text(encoding="utf-8")))}
    assert found == set()


def test_the_check_sees_a_cli_child_where_one_is_written() -> None:
    # the detector itself: the shapes an engine used to write (policy/evaluator.py ran
    # `python -m aorta_tui queue run ...` until 2026-12-04)
    assert _cli_children(ast.parse('argv = [py, "-m", "aorta_tui", "queue", "run", w]')) == [1]
    assert _cli_children(ast.parse('run(["aorta-tui", "sweep", "run", "--json"])')) == [1]
    assert _cli_children(ast.parse('argv = [py, "-m", "aorta_tui.hwqueue.child", cfg, out]')) == []
    assert _cli_children(ast.parse('msg = "run aorta-tui queue run"')) == []
    assert _cli_children(ast.parse('mode, flavour = "aorta-tui", "aorta-tui"')) == []  # values
    # and the front ends' bridge is the one place it is allowed
    assert _cli_children(ast.parse((PACKAGE / "relay" / "engine_run.py").read_text())) != []
