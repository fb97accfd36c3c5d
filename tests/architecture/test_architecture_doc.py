"""docs/architecture.md matches the code: its Layers block names every package of aorta_tui/,
in the order of pyproject.toml's layers contract, and nothing that does not exist; each step of
one recipe's path from --batch to the matrix screen is named by a package that exists; every
module path it gives exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11+; the project runs on 3.10 too")

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "architecture.md").read_text()
PACKAGES = {p.parent.name for p in (REPO / "aorta_tui").glob("*/__init__.py")}


def _block_after(heading: str) -> list[str]:
    """The lines of the first ``` block after ``heading``."""
    rest = DOC[DOC.index(heading):]
    start = rest.index("```\n") + 4
    return rest[start:rest.index("```", start)].splitlines()


def doc_layers() -> list[list[str]]:
    """Each line of the Layers block that starts with aorta_tui/: the packages it names."""
    layers = []
    for line in _block_after("## Layers"):
        if line.startswith("aorta_tui/"):
            head = re.split(r"\s{2,}", line.strip())[0]
            layers.append([part.strip().removeprefix("aorta_tui/").removesuffix("/")
                           for part in head.split("|")])
    return layers


def contract_layers() -> list[list[str]]:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    return [[m.strip().removeprefix("aorta_tui.") for m in layer.split("|")] for layer in layers]


def test_the_layers_block_names_every_package_and_only_packages() -> None:
    named = [p for layer in doc_layers() for p in layer]
    assert len(named) == len(set(named)), "a package is named twice"
    assert sorted(set(named) - PACKAGES) == [], "named but not a package of aorta_tui/"
    assert sorted(PACKAGES - set(named)) == [], "a package of aorta_tui/ the doc leaves out"


def test_the_layers_block_is_the_contracts_order() -> None:
    assert doc_layers() == contract_layers()


def test_every_step_of_the_recipe_path_is_named_by_a_package_that_exists() -> None:
    block = _block_after("## Data flow of one recipe, from `--batch` to the matrix screen")
    steps = [re.match(r"\[([a-z_]+)\]", line) for line in block]
    named = [m.group(1) for m in steps if m]
    assert len(named) >= 10, "the recipe's path lost its package names"
    assert sorted(set(named) - PACKAGES) == []
    # from the command line to the screen: the path starts in cli and ends in tui
    assert named[0] == "cli" and named[-1] == "tui"


def test_every_module_path_the_doc_gives_exists() -> None:
    # `pkg/module.py` (relative to aorta_tui/) or a repository path (tests/, docs/, scripts/)
    paths = set(re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.(?:py|tcss|c))", DOC))
    missing = sorted(p for p in paths
                     if not (REPO / "aorta_tui" / p).exists() and not (REPO / p).exists())
    assert missing == []

