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
    _delegate(ctx, ["probe", *ctx.args])


def triage_alias(ctx: typer.Context) -> None:
    """Deprecated: upstream's `aorta triage run|list-mitigations|list-environments`; runs the
    `aorta-tui sweep` command of that name."""
    _delegate(ctx, ["triage", *ctx.args])


def _delegate(ctx: typer.Context, argv: list[str]) -> None:
    # Reached when the typer app is called directly (tests, `python -m`): the program's own
    # entry point rewrites argv before parsing, which keeps `--` and the command intact. The
    # root command is the whole program (cli/main.py's app), found without importing main.
    raise typer.Exit(_call(ctx.find_root().command, rewrite_deprecated(argv)))


def _call(app: Any, argv: list[str]) -> int:
    try:
        app(args=argv, prog_name="aorta-tui", standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


# -- sweep run's upstream flags ---------------------------------------------------------------



