"""scripts/count_any.py counts exactly the bare ``Any`` annotations (what CI prints after mypy),
and the type checker's configuration is the one scripts/typecheck.sh runs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]


def _count_any():
    spec = importlib.util.spec_from_file_location("count_any", REPO / "scripts" / "count_any.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


count_any = _count_any()

BARE = ["Any", "typing.Any", "'Any'", '" Any "']
NOT_BARE = ["dict[str, Any]", "Any | None", "int", "'list[Any]'", "object", "typing.Anything",
            "'not valid ('", "list[typing.Any]", "AnyStr"]
# where an annotation can stand; {} is replaced by it
PLACES = ["def f(x: {}): pass", "def f() -> {}: pass", "x: {} = 1", "def f(*args: {}): pass",
          "def f(**kw: {}): pass", "def f(*, k: {}): pass", "def f(a: {}, /): pass",
          "async def f(x: {}): pass", "class C:\n    attr: {}",
          "def outer():\n    def inner(x: {}): pass"]


@given(st.lists(st.tuples(st.sampled_from(BARE + NOT_BARE), st.sampled_from(PLACES)),
                max_size=12))
def test_counts_only_bare_any_wherever_it_stands(tmp_path_factory, pieces):
    source = "import typing\nfrom typing import Any, AnyStr\n" + "\n".join(
        place.format(annotation) for annotation, place in pieces) + "\n"
    path = tmp_path_factory.mktemp("src") / "mod.py"
    path.write_text(source)
    assert count_any.count_file(path) == sum(1 for annotation, _ in pieces if annotation in BARE)


def test_unannotated_code_counts_nothing(tmp_path):
    path = tmp_path / "mod.py"
    path.write_text("from typing import Any\nx = Any\ndef f(a, *b, **c):\n    return Any\n")
    assert count_any.count_file(path) == 0


def test_prints_the_total_and_each_package(tmp_path):
    (tmp_path / "pkg" / "a").mkdir(parents=True)
    (tmp_path / "pkg" / "a" / "m.py").write_text("from typing import Any\ndef f(x: Any) -> Any: ...\n")
    (tmp_path / "pkg" / "b").mkdir()
    (tmp_path / "pkg" / "b" / "m.py").write_text("def g(x: int) -> int: ...\n")
    (tmp_path / "pkg" / "top.py").write_text("from typing import Any\ny: Any = 1\n")
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "count_any.py"),
                          str(tmp_path / "pkg")], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert lines[0].endswith(": 3")
    assert [line.split() for line in lines[1:]] == [["a", "2"], ["top", "1"]]  # b has none


def test_a_missing_root_is_an_input_error(tmp_path):
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "count_any.py"),
                          str(tmp_path / "absent")], capture_output=True, text=True)
    assert out.returncode == 2
    assert "is not a directory" in out.stderr


def test_typecheck_runs_in_both_test_paths_and_mypy_is_installed_by_the_test_extra():
    script = (REPO / "scripts" / "test.sh").read_text()
    fast, _, full = script.partition("\nfi\n")
    for path in (fast, full):
        assert "lint-imports --no-cache" in path
        assert path.index("bash scripts/typecheck.sh") > path.index("lint-imports --no-cache")
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11+")
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert any(dep.startswith("mypy") for dep in pyproject["project"]["optional-dependencies"]["test"])
    assert pyproject["tool"]["mypy"]["files"] == ["aorta_tui"]


def _typecheck_tree(tmp_path: Path, module_text: str) -> subprocess.CompletedProcess[str]:
    """scripts/typecheck.sh run on a one-module package beside the real mypy and the repo's
    [tool.mypy] settings (files = aorta_tui), as CI runs it on the repository."""
    (tmp_path / "scripts").mkdir(parents=True)
    for name in ("typecheck.sh", "count_any.py"):
        (tmp_path / "scripts" / name).write_text((REPO / "scripts" / name).read_text())
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    for tool in ("mypy", "python"):
        (tmp_path / ".venv" / "bin" / tool).symlink_to(REPO / ".venv" / "bin" / tool)
    text = (REPO / "pyproject.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(text[text.index("[tool.mypy]"):text.index("[tool.importlinter]")])
    (tmp_path / "aorta_tui").mkdir()
    (tmp_path / "aorta_tui" / "__init__.py").write_text("")
    (tmp_path / "aorta_tui" / "mod.py").write_text(module_text)
    return subprocess.run(["bash", str(tmp_path / "scripts" / "typecheck.sh")], capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_typecheck_fails_on_one_type_error_and_passes_without_it(tmp_path):
    bad = _typecheck_tree(tmp_path / "bad", "def half(n: int) -> int:\n    return n / 2\n")
    assert bad.returncode != 0, bad.stdout + bad.stderr
    assert "mod.py:2: error" in bad.stdout and "[return-value]" in bad.stdout
    assert "bare Any annotations" not in bad.stdout  # it stops at the error
    good = _typecheck_tree(tmp_path / "good", "from typing import Any\n\n\ndef same(n: Any) -> int:\n"
                           "    return int(n)\n")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Success: no issues found" in good.stdout
    assert "bare Any annotations under aorta_tui/: 1" in good.stdout
