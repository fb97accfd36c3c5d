#!/usr/bin/env python3
"""Counts the bare ``Any`` annotations under a package: parameters, returns and variables
annotated exactly ``Any`` (or ``typing.Any``; in quotes too), not ``dict[str, Any]`` or
``Any | None``. Prints the total, then the count per package (the first directory under the
root), largest first. The number to drive down: ``Any`` belongs only where the data is untyped
by nature (raw YAML, JSON from outside).

    python scripts/count_any.py [ROOT]   (default: aorta_tui)
"""

from __future__ import annotations

import ast
import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path


def is_bare_any(annotation: ast.expr | None) -> bool:
    """``Any``, ``typing.Any`` or the string ``"Any"``."""
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value.strip(), mode="eval").body
        except SyntaxError:
            return False
    if isinstance(annotation, ast.Name):
        return annotation.id == "Any"
    return (isinstance(annotation, ast.Attribute) and annotation.attr == "Any"
            and isinstance(annotation.value, ast.Name) and annotation.value.id in ("typing", "t"))


def annotations(tree: ast.AST) -> Iterator[ast.expr | None]:
    """Every annotation in ``tree``: each parameter's (``*args``/``**kwargs`` too), each
    return's, and each annotated variable's."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            yield from (p.annotation for p in params if p is not None)
            yield node.returns
        elif isinstance(node, ast.AnnAssign):
            yield node.annotation


def count_file(path: Path) -> int:
    tree = ast.parse(path.read_bytes(), filename=str(path))
    return sum(1 for ann in annotations(tree) if is_bare_any(ann))


def count_tree(root: Path) -> Counter[str]:
    """Bare ``Any`` per package under ``root`` (a module directly in ``root`` counts under its
    own name)."""
    per_package: Counter[str] = Counter()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        package = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        per_package[package] += count_file(path)
    return per_package


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else "aorta_tui")
    if not root.is_dir():
        print(f"count_any: {root} is not a directory", file=sys.stderr)
        return 2
    per_package = count_tree(root)
    print(f"bare Any annotations under {root}/: {sum(per_package.values())}")
    for package, n in sorted(per_package.items(), key=lambda kv: (-kv[1], kv[0])):
        if n:
            print(f"  {package:<12} {n}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # `| head` closed the pipe: what it read is what was asked for
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
