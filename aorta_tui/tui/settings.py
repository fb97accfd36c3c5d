"""What the TUI is told at start, read once from the environment and handed to the App.

Screens read ``self.aorta.settings``, never ``os.environ``: a test (or an embedding program)
gives the App its settings, and a variable changed while the TUI runs changes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aorta_tui.store.naming import DEFAULT_OUTPUT


@dataclass(frozen=True)
class TuiSettings:
    output_dir: Path  # $AORTA_TUI_OUTPUT, else the sweep engine's default (./aorta-out)
    light: bool  # $AORTA_TUI_THEME=light
    metrics_addr: str | None  # $AORTA_TUI_METRICS: the trace monitor serves metrics from the start
    metrics_public: bool  # $AORTA_TUI_METRICS_PUBLIC=1: --metrics-public for the tracer

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> TuiSettings:
        return cls(
            output_dir=Path(environ.get("AORTA_TUI_OUTPUT") or DEFAULT_OUTPUT),
            light=environ.get("AORTA_TUI_THEME", "").lower() == "light",
            metrics_addr=environ.get("AORTA_TUI_METRICS", "").strip() or None,
            metrics_public=environ.get("AORTA_TUI_METRICS_PUBLIC", "") == "1",
        )

