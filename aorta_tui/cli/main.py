"""The ``aorta-tui`` command: the TUI by default, ``--batch`` and subcommands headless.

Sub-command modules are imported here but import nothing heavy themselves (see
``cli/common.py``): ``aorta-tui --help`` must not pay for the engine, rich, textual or torch.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from aorta_tui import __version__
from aorta_tui.cli import (
    attach_cmd,
    env_cmd,
    policy_cmd,
    queue_cmd,
    recipe_cmd,
    run_cmd,
    sweep_cmd,
    trace_cmd,
)
from aorta_tui.cli.common import cli_command, new_app

app = new_app(
    "Terminal control room for triaging GPU workloads on ROCm and CUDA machines.\n\n"
    "With no command, opens the TUI (run it as `sudo aorta-tui` for eBPF tracing).\n\n"
    "\b\nExamples:\n"
    "  aorta-tui --batch recipes/quickstart.yaml        # a sweep, headless\n"
    "  aorta-tui --batch probe.yaml -- bash launch.sh   # a probe sweep over a command\n"
    "  aorta-tui env probe --summary                    # what this machine has\n"
    "  aorta-tui queue run hetero_kernels --streams 8   # stress hardware queues\n"
    "  sudo aorta-tui trace queue --probes cuda -- python train.py"
)
app.info.no_args_is_help = False
app.info.invoke_without_command = True

app.add_typer(sweep_cmd.app, name="sweep")
app.add_typer(recipe_cmd.app, name="recipe")
app.add_typer(env_cmd.app, name="env")
app.add_typer(queue_cmd.app, name="queue")
app.add_typer(policy_cmd.app, name="policy")
app.add_typer(trace_cmd.app, name="trace")
app.command("run")(run_cmd.run_workload)
app.command("attach")(attach_cmd.attach)


@app.callback()
@cli_command
def main(
    ctx: typer.Context,
    batch: Path | None = typer.Option(
        None,
        "--batch",
        metavar="RECIPE",
        help="Run RECIPE headless (same options as `sweep run`; a command follows `--`).",
    ),
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    if version:
        print(f"aorta-tui {__version__}")
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        from aorta_tui.cli.tui_launch import launch_tui

        launch_tui()


def _rewrite_batch(argv: list[str]) -> list[str]:
    """``--batch RECIPE rest...`` is exactly ``sweep run --recipe RECIPE rest...``."""
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--batch" and i + 1 < len(argv):
            return ["sweep", "run", "--recipe", argv[i + 1], *argv[:i], *argv[i + 2 :]]
        if arg.startswith("--batch="):
            return ["sweep", "run", "--recipe", arg.split("=", 1)[1], *argv[:i], *argv[i + 1 :]]
    return argv


def run() -> None:
    argv = _rewrite_batch(sys.argv[1:])
    app(args=argv, prog_name="aorta-tui")
