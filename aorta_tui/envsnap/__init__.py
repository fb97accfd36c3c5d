"""Environment snapshots: capture, load, hash, query, summarize and diff (engine layer).

Public interface::

    capture_snapshot(*, timeout_s=20.0, include_torch=True) -> EnvSnapshot  # never raises or hangs
    snapshot_hash(snapshot) -> str          # equal for two captures of one environment
    load_snapshot(path) -> EnvSnapshot | UpstreamSnapshot   # ours or upstream's; UsageError
    diff_snapshots(a, b, *, include_volatile=False) -> DiffReport

``EnvSnapshot`` (``doc.py``) is env.json typed: ``to_json()`` is what is written,
``EnvSnapshot.from_dict`` the one reader.

``python -m aorta_tui.envsnap --output PATH [--no-torch]`` writes one atomically.
Nothing here imports torch, rich or textual.
"""

from __future__ import annotations

from aorta_tui.envsnap.capture import SCHEMA_VERSION, capture_snapshot
from aorta_tui.envsnap.diff import DiffEntry, DiffReport, diff_snapshots
from aorta_tui.envsnap.doc import EnvSnapshot, Field, Snapshot, UpstreamSnapshot
from aorta_tui.envsnap.rules import snapshot_hash
from aorta_tui.envsnap.schema import iter_leaves, load_snapshot, validate

__all__ = [
    "SCHEMA_VERSION",
    "DiffEntry",
    "DiffReport",
    "EnvSnapshot",
    "Field",
    "Snapshot",
    "UpstreamSnapshot",
    "capture_snapshot",
    "diff_snapshots",
    "iter_leaves",
    "load_snapshot",
    "snapshot_hash",
    "validate",
]
