"""The import cycles issue 17 broke stay broken; lazy and TYPE_CHECKING imports count too (grimp
sees every import statement), because a cycle hidden in a function is still a cycle."""

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


def test_core_imports_only_the_listed_module_above_it(graph) -> None:
    up = sorted((m, i) for m in graph.modules if m.startswith("aorta_tui.core")
                for i in graph.find_modules_directly_imported_by(m)
                if i.startswith("aorta_tui.") and not i.startswith("aorta_tui.core"))
    # the exceptions of pyproject.toml's layers contract, each with its reason in
    # docs/architecture.md: removing one is progress, adding one needs a reason there
    assert up == [("aorta_tui.core.recipe.validate", "aorta_tui.trace.probes")]


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
