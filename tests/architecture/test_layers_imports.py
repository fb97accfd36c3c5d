"""No import cycle anywhere under aorta_tui/ (issue 25), and the ones issue 17 broke stay broken;
lazy and TYPE_CHECKING imports count too (grimp sees every import statement), because a cycle
hidden in a function is still a cycle."""

from __future__ import annotations

import grimp
import pytest

# (importer, imported): the second never reaches the first back
ONE_WAY = [
    ("aorta_tui.hwqueue.result", "aorta_tui.hwqueue.harness"),  # run.py calls both
    ("aorta_tui.tui.app", "aorta_tui.tui.screens.base"),  # screens see tui/host.py's protocol
]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("aorta_tui", cache_dir=None)


@pytest.mark.parametrize(("upper", "lower"), ONE_WAY)
def test_the_lower_module_never_imports_the_upper_one(graph, upper: str, lower: str) -> None:
    assert graph.find_shortest_chain(importer=lower, imported=upper) is None


def test_core_imports_nothing_above_it(graph) -> None:
    # core is the shared base: what it needs from above it declares as an interface
    # (core/services.py), so not one of its imports leaves it
    up = sorted((m, i) for m in graph.modules if m.startswith("aorta_tui.core")
                for i in graph.find_modules_directly_imported_by(m)
                if i.startswith("aorta_tui.") and not i.startswith("aorta_tui.core"))
    assert up == []


def test_the_layers_contract_has_no_exceptions() -> None:
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11+")

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    assert [c.get("ignore_imports", []) for c in contracts] == [[] for _ in contracts]
    assert "acyclic_siblings" in {c["type"] for c in contracts}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_module_under_aorta_tui_is_in_an_import_cycle(graph) -> None:
    # import-linter's acyclic_siblings contract checks siblings; this checks every module
    # against every other one, a package and its own modules included
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i.startswith("aorta_tui")}
             for m in graph.modules if m.startswith("aorta_tui")}
    assert _cycles(edges) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_every_source_directory_is_a_regular_package_so_the_contract_sees_it(graph) -> None:
    # grimp (hence import-linter) skips a directory without __init__.py: trace/device/ was one,
    # and its import from hwqueue broke the layers unseen.
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "aorta_tui"
    sources = {p.parent for p in root.rglob("*.py") if "__pycache__" not in p.parts}
    missing = sorted(str(d.relative_to(root.parent)) for d in sources if not (d / "__init__.py").exists())
    assert missing == []
    for path in root.rglob("*.py"):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__")
        assert module in graph.modules, f"{module} is not in the import graph"
