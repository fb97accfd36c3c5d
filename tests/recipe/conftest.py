"""Fixtures of the recipe tests: the upstream recipes, a registry, the examples."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE_UPSTREAM = REPO / "tests" / "fixtures" / "upstream-recipes"
SHARED_UPSTREAM = REPO.parent / "shared" / "compat" / "upstream-recipes"
EXAMPLES = REPO / "recipes" / "examples"


@pytest.fixture(scope="session")
def upstream_dir() -> Path:
    """The upstream recipes: the byte-identical copy in tests/fixtures, else shared/."""
    for candidate in (FIXTURE_UPSTREAM, SHARED_UPSTREAM):
        if (candidate / "README.md").is_file():
            return candidate
    pytest.skip(f"upstream recipes not found in {FIXTURE_UPSTREAM} or {SHARED_UPSTREAM}")


@pytest.fixture(scope="session")
def registry():
    from aorta_tui.registry.registry import Registry

    return Registry()


@pytest.fixture(scope="session")
def example_files() -> list[Path]:
    files = sorted(EXAMPLES.glob("*.yaml"))
    assert files, f"no example recipes in {EXAMPLES}"
    return files
