"""Paths and loaders shared by the envsnap tests (a uniquely named module, not conftest)."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "envsnap"
REPO = Path(__file__).resolve().parents[2]


def load_fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def typed(data: dict):
    """A snapshot's parsed JSON as ``load_snapshot`` returns it: ours read by the one reader,
    upstream's wrapped as it is (the tests edit the JSON, then hand it over)."""
    from aorta_tui.envsnap import EnvSnapshot, UpstreamSnapshot
    from aorta_tui.envsnap.upstream import is_upstream

    return UpstreamSnapshot(data) if is_upstream(data) else EnvSnapshot.from_dict(data)
