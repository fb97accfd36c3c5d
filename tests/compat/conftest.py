"""Fixtures of the upstream-compatibility tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def registry():
    from aorta_tui.registry.registry import Registry

    return Registry()
