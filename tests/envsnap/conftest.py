"""Shared fixtures for the envsnap tests: the committed real snapshots."""

from __future__ import annotations

import copy

import pytest
from envsnap_helpers import load_fixture as _load


@pytest.fixture(scope="session")
def _h200() -> dict:
    return _load("h200.json")


@pytest.fixture(scope="session")
def _cpu_box() -> dict:
    return _load("cpu-box.json")


@pytest.fixture
def h200(_h200: dict) -> dict:
    return copy.deepcopy(_h200)


@pytest.fixture
def cpu_box(_cpu_box: dict) -> dict:
    return copy.deepcopy(_cpu_box)


@pytest.fixture
def upstream_h200() -> dict:
    return _load("upstream-h200.json")


@pytest.fixture
def upstream_cpu_box() -> dict:
    return _load("upstream-cpu-box.json")
