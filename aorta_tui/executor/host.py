"""The run as an executor sees it (the seam below the orchestrator; ``trial/host.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from aorta_tui.trial.host import TrialHost


class ExecutorHost(TrialHost, Protocol):
    """The run as an executor sees it: the pools' view, and the preparation of a trial (its
    directory, environment, argv and ``ProcessSpec``) that a batched submission does ahead."""

    def prepare_trial(self, run_dir: Path, spec: Any) -> tuple[Any, Path, dict[str, str], list[str], Any]: ...
