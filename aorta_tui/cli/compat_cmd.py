"""Upstream AORTA's command spellings: `mitigations list`, `environments list`, the deprecated
`probe` / `triage` aliases (a one-line notice on stderr, then the `sweep` command), and the
`sweep run` flags that overlay a recipe (see docs/compat.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from aorta_tui.cli.common import cli_command, new_app

mitigations_app = new_app("Upstream AORTA's `aorta mitigations ...` (same as `sweep list-mitigations`).")
environments_app = new_app("Upstream AORTA's `aorta environments ...` (same as `sweep list-environments`).")

_FILE_HELP = "A sidecar JSON file to merge into the listing (repeatable)."


@mitigations_app.command("list")
@cli_command
def mitigations_list(
    files: list[Path] = typer.Option([], "--file", "--mitigations-file", help=_FILE_HELP),
    json_mode: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """List every mitigation (built-in, plugin, sidecar) and the variables it sets."""
    from aorta_tui.cli import sweep_cmd

    sweep_cmd.list_mitigations(json_mode=json_mode, mitigations_file=files)


@environments_app.command("list")
@cli_command
def environments_list(
    files: list[Path] = typer.Option([], "--file", "--mitigations-file", help=_FILE_HELP),
    json_mode: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """List every environment (built-in, plugin, sidecar)."""
    from aorta_tui.cli import sweep_cmd

    sweep_cmd.list_environments(json_mode=json_mode, mitigations_file=files)


# -- deprecated aliases -----------------------------------------------------------------------

def deprecation_notice(old: str, new: str) -> None:
    print(f"warning: '{old}' is deprecated and will be removed in a future release; use "
          f"'{new}' instead.", file=sys.stderr, flush=True)


def rewrite_deprecated(argv: list[str]) -> list[str]:
    """``probe ARGS`` -> ``sweep run ARGS`` (``probe --list-patterns`` -> ``sweep
    list-patterns``); ``triage SUB ARGS`` -> ``sweep SUB ARGS``. Prints upstream's notice.
    Everything after the command word is passed on untouched, ``--`` included."""
    if not argv or argv[0] not in ("probe", "triage"):
        return argv
    head, rest = argv[0], argv[1:]
    if any(a in ("-h", "--help") for a in rest[:1]):
        return argv  # the alias's own help
    if head == "probe":
        before = rest[: rest.index("--")] if "--" in rest else rest
        if "--list-patterns" in before:
            deprecation_notice("aorta probe --list-patterns", "aorta-tui sweep list-patterns")
            return ["sweep", "list-patterns", *[a for a in before if a != "--list-patterns"]]
        deprecation_notice("aorta probe", "aorta-tui sweep run")
        return ["sweep", "run", *rest]
    sub = rest[0] if rest else "run"
    deprecation_notice(f"aorta triage {sub}", f"aorta-tui sweep {sub}")
    return ["sweep", *(rest or ["run"])]


_ALIAS_SETTINGS = {"allow_extra_args": True, "ignore_unknown_options": True}


def probe_alias(ctx: typer.Context) -> None:
    """Deprecated: upstream's `aorta probe`; runs `aorta-tui sweep run` with the same arguments."""
    _delegate(["probe", *ctx.args])


def triage_alias(ctx: typer.Context) -> None:
    """Deprecated: upstream's `aorta triage run|list-mitigations|list-environments`; runs the
    `aorta-tui sweep` command of that name."""
    _delegate(["triage", *ctx.args])


def _delegate(argv: list[str]) -> None:
    # Reached when the typer app is called directly (tests, `python -m`): the program's own
    # entry point rewrites argv before parsing, which keeps `--` and the command intact.
    from aorta_tui.cli.main import app

    raise typer.Exit(_call(app, rewrite_deprecated(argv)))


def _call(app: Any, argv: list[str]) -> int:
    try:
        app(args=argv, prog_name="aorta-tui", standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


# -- sweep run's upstream flags ---------------------------------------------------------------

def apply_request_overrides(recipe: Any, req: Any) -> Any:
    """The recipe with `sweep run`'s overlay flags applied (or a usage error naming the flag)."""
    from aorta_tui.core.errors import UsageError
    from aorta_tui.core.recipe.overrides import apply_overrides

    if req.recipe is not None and (req.baseline_cell is not None or req.confound_threshold is not None):
        flag = "--baseline-cell" if req.baseline_cell is not None else "--confound-threshold"
        raise UsageError(f"{flag} is for flag mode (no recipe); with --recipe the recipe's "
                         "`confound:` block decides", hint="set confound.baseline_cell / "
                         "confound.threshold in the recipe, or drop the flag")
    from aorta_tui.core.recipe.collect import collectors_runnable_problem

    if req.collect:  # --collect replaces the recipe's and the cells' collectors, as upstream
        import dataclasses

        collectors_runnable_problem(tuple(req.collect), where="--collect")
        recipe = dataclasses.replace(
            recipe, collect=tuple(dict.fromkeys(req.collect)),
            cells=type(recipe.cells)(dataclasses.replace(c, collect=None) for c in recipe.cells))
    return apply_overrides(recipe, stop_after_events=req.stop_after_events,
                           max_trials=req.max_trials, disable_detectors=req.disable_detectors,
                           env_passthrough_mode=req.env_passthrough_mode)


def add_verbose_sink(bus: Any, level: int) -> None:
    """-v: a line per trial on stderr while the matrix runs; -vv: also the engine's debug log."""
    import logging

    from aorta_tui.cli.sinks import PlainSink

    bus.add(PlainSink(sys.stderr))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    log = logging.getLogger("aorta_tui")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG if level >= 2 else logging.INFO)
