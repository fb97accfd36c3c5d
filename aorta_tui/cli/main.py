"""The ``aorta-tui`` command: the TUI by default, ``--batch`` and subcommands headless.

Sub-command modules are imported here but import nothing heavy themselves (see
``cli/common.py``): ``aorta-tui --help`` must not pay for the engine, rich, textual or torch.
"""

from __future__ import annotations

import os
import signal
import sys

from aorta_tui.cli.quiet_start import _interrupted_while_starting, _started_as_the_program

# Under sudo, before anything reads or writes a file of the user's: fork the privileged helper
# (it keeps root, for bpftrace, tracefs, GPU knobs and root-only snapshot fields) and become the
# invoking user for everything else, irreversibly (privsep/boot.py, docs/security.md).
if _started_as_the_program() and os.geteuid() == 0 and "SUDO_UID" in os.environ:
    from aorta_tui.cli.privileged import load_verbs
    from aorta_tui.privsep.boot import drop_if_sudo

    drop_if_sudo(load_verbs)
elif "AORTA_TUI_PRIVSEP_FD" in os.environ:
    # an engine command the dropped tool started (privsep/client.py): take the helper
    # connection now, so the variable is gone before any trial could inherit it
    from aorta_tui.privsep import client as _privsep

    _privsep.current()

# Installed before the imports below (typer, click, the command modules: most of start-up);
# ``main`` hands SIGINT back to Python's KeyboardInterrupt once the command wrapper runs.
# SIGTERM and SIGHUP too, first (issue 37 item 10: one in the first 0.3-0.6 s killed the
# program by the signal, without a word); a signal ignored by whoever started us stays ignored.
# Each on its own: a program started with SIGINT ignored (nohup, a background job) still
# leaves with the one line on SIGTERM rather than die by it.
if _started_as_the_program():
    for _sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(_sig) is signal.SIG_DFL:
            signal.signal(_sig, _interrupted_while_starting)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted_while_starting)

from pathlib import Path  # noqa: E402

import typer  # noqa: E402

from aorta_tui import __version__  # noqa: E402
from aorta_tui.cli import (  # noqa: E402
    agent_cmd,
    attach_cmd,
    bundle_cmd,
    compat_cmd,
    edit_cmd,
    env_cmd,
    export_cmd,
    policy_cmd,
    queue_cmd,
    recipe_cmd,
    run_cmd,
    sweep_cmd,
    trace_cmd,
)
from aorta_tui.cli.common import cli_command, new_app  # noqa: E402

app = new_app(
    "Terminal control room for triaging GPU workloads on ROCm and CUDA machines.\n\n"
    "With no command, opens the TUI (run it as `sudo aorta-tui` for eBPF tracing: then only a\n"
    "small helper and bpftrace keep root, everything else runs as you).\n\n"
    "\b\nExamples:\n"
    "  aorta-tui --batch recipes/quickstart.yaml        # a sweep, headless\n"
    "  aorta-tui --batch probe.yaml -- bash launch.sh   # a probe sweep over a command\n"
    "  aorta-tui edit recipes/quickstart.yaml           # the TUI's recipe editor on a file\n"
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
app.command("bundle")(bundle_cmd.bundle)
app.command("export")(export_cmd.export)
app.command("agent", context_settings=agent_cmd._SETTINGS)(agent_cmd.agent)
app.command("edit")(edit_cmd.edit)
# upstream AORTA's spellings (cli/compat_cmd.py)
app.add_typer(compat_cmd.mitigations_app, name="mitigations")
app.add_typer(compat_cmd.environments_app, name="environments")
app.command("probe", context_settings=compat_cmd._ALIAS_SETTINGS, add_help_option=False,
            help="Deprecated alias of `sweep run` (upstream's `aorta probe`).")(compat_cmd.probe_alias)
app.command("triage", context_settings=compat_cmd._ALIAS_SETTINGS, add_help_option=False,
            help="Deprecated alias of `sweep run` / `sweep list-*` (upstream's `aorta triage`)."
            )(compat_cmd.triage_alias)


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
    # Inside cli_command from here: Ctrl-C is a KeyboardInterrupt again (exit 130, clean-ups
    # run), and every command's own handlers (a sweep's) build on that.
    if signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # A command keeps the quiet exit for SIGTERM and SIGHUP until it installs its own (a
    # sweep's stop the running trial and finish the run; the TUI's, bare or `edit` or `attach`,
    # ask the App to exit so that the terminal is given back: cli/tui_launch.launch_tui): not a
    # KeyboardInterrupt, which CPython turns into a death by SIGINT when it lands inside exec'd
    # text (a dataclass being built by a lazy import), even once caught.
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
    argv = compat_cmd.rewrite_deprecated(_rewrite_batch(sys.argv[1:]))
    app(args=argv, prog_name="aorta-tui")
