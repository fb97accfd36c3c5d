"""Issue 36: no module reads a private member of another package's object.

A private name (``_x``) read on anything but ``self``/``cls``/``super()`` is allowed only when
that name is defined (a function, a class, or an assignment to ``self._x``/``_x``) in the
reading module's own package, or when the receiver is a module outside aorta_tui (``torch._C``,
``atexit._run_exitfuncs``: a library's internals, used on purpose, each with its own comment).
What a lower package needs from a higher one is a public protocol it declares
(``trial/host.py``, ``executor/__init__.py``), never a reach into the higher one's privates.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "aorta_tui"
# torch is imported lazily, inside functions or through a handle (worker and workload code
# only): its internals are a library's, not another package's of ours
_LAZY_EXTERNAL = {"torch"}


def _package_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else ""


def _defined_private_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _external_modules(tree: ast.AST) -> set[str]:
    """Names bound in this module to modules outside aorta_tui."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if not a.name.startswith("aorta_tui"):
                    out.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and not node.module.startswith("aorta_tui"):
            out.update(a.asname or a.name for a in node.names)
    return out


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _private_reads(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, receiver, name) of every ``<receiver>._name`` read that is not on self/cls/super()."""
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__") and isinstance(node.ctx, ast.Load)):
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super":
            continue
        out.append((node.lineno, ast.unparse(value), node.attr))
    return out


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_no_module_reads_another_packages_private_members() -> None:
    trees = {p: ast.parse(p.read_text(encoding="utf-8"), filename=str(p)) for p in PACKAGE.rglob("*.py")}
    defined: dict[str, set[str]] = defaultdict(set)
    for path, tree in trees.items():
        defined[_package_of(path)] |= _defined_private_names(tree)
    offenders = []
    for path, tree in trees.items():
        external = _external_modules(tree)
        own = defined[_package_of(path)]
        for line, receiver, name in _private_reads(tree):
            root = _root_name(ast.parse(receiver, mode="eval").body)
            if name in own or root in external or _LAZY_EXTERNAL & set(receiver.split(".")):
                continue
            offenders.append(f"{path.relative_to(PACKAGE.parent)}:{line} {receiver}.{name}")
    assert not offenders, ("a private member of another package's object is read; give it a public "
                           "name in a protocol the lower package declares:\n" + "\n".join(offenders))


def test_the_rule_sees_a_reach_into_another_package(tmp_path: Path) -> None:
    """The walk itself: the pattern the trial pools had (``sweep._workload_cls``) is a read the
    rule reports, and a read on self is not."""
    tree = ast.parse("def f(sweep):\n    return sweep._workload_cls, sweep.plan\n"
                     "class A:\n    def g(self):\n        return self._x\n")
    assert _private_reads(tree) == [(2, "sweep", "_workload_cls")]
