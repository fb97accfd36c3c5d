"""`aorta-tui run --workload NAME`: one workload, no matrix."""

from __future__ import annotations

from aorta_tui.cli.common import cli_command


@cli_command
def run_workload() -> None:
    """Run one registered workload without a matrix."""
    from aorta_tui.core.errors import UsageError

    raise UsageError("`aorta-tui run` is not built yet")
