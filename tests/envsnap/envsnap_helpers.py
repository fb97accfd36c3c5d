"""Paths and loaders shared by the envsnap tests (a uniquely named module, not conftest)."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "envsnap"
REPO = Path(__file__).resolve().parents[2]


def load_fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())
