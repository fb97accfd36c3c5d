"""Every module aorta_tui imports is the standard library's, its own, a declared dependency, or
an optional one named here with the extra (or the user) that provides it.

The quickstart broke on a fresh install once (found at the end of the session of 2026-12-05,
before the stop): `cli/stream_end.py` imported `click`, which the test environment had through
another package and typer 0.28 no longer brings. Read from the AST, so a lazy import inside a
function counts as much as one at the top.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "aorta_tui"
# a declared distribution -> the module it installs
MODULE_OF = {"typer": "typer", "pyyaml": "yaml", "numpy": "numpy", "textual": "textual",
             "watchfiles": "watchfiles", "google-re2": "re2", "detect-secrets": "detect_secrets",
             "prometheus_client": "prometheus_client"}
OPTIONAL = {
    "torch": "users bring their ROCm or CUDA build (worker and workload code only)",
    "pandas": "the `analysis` extra (DataFrames, parquet)",
    "pyarrow": "`export --format parquet`, said when missing",
    "openai": "the `agent-llm` extra",
    "rich": "required by both typer and textual, which are declared",
    "_typeshed": "type checking only (under TYPE_CHECKING)",
    "libprobe": "envsnap's own probe script, run by path with the standard library alone",
}


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {re.split(r"[\[<>=!~ ;]", dep, maxsplit=1)[0].lower() for dep in project["dependencies"]}
    unmapped = names - set(MODULE_OF)
    assert not unmapped, f"map the new dependency to its module: {sorted(unmapped)}"
    return {MODULE_OF[n] for n in names}


def imported_modules(tree: ast.AST) -> set[str]:
    """The top-level names of every absolute import in ``tree``."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_every_import_is_the_stdlibs_our_own_declared_or_a_named_optional() -> None:
    allowed = set(sys.stdlib_module_names) | {"aorta_tui"} | _declared() | set(OPTIONAL)
    strays = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in imported_modules(ast.parse(path.read_text(encoding="utf-8"))) - allowed:
            strays.setdefault(name, str(path.relative_to(ROOT)))
    assert strays == {}


def test_the_rule_sees_an_undeclared_import() -> None:
    tree = ast.parse("def f():\n    from click.exceptions import Exit\n    import yaml\n")
    assert imported_modules(tree) == {"click", "yaml"}
    assert "click" not in set(sys.stdlib_module_names) | _declared() | set(OPTIONAL)
