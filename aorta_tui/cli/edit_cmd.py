"""`aorta-tui edit FILE`: the TUI on the recipe editor with FILE open."""

from __future__ import annotations

from pathlib import Path

import typer

from aorta_tui.cli.common import cli_command


@cli_command
def edit(
    recipe: Path = typer.Argument(..., metavar="FILE", help="The recipe to edit (.yaml); a new one is created on save."),
) -> None:
    """Open the TUI's recipe editor on FILE.

    The file is checked before the TUI starts: a directory, a FIFO, a binary or non-UTF-8 file
    is refused with exit code 2. A FILE that does not exist opens as a new recipe that ctrl+s
    creates there (its directory must exist). Needs a terminal, as the TUI does.

    Example:

      aorta-tui edit recipes/examples/probe-bash.yaml
    """
    from aorta_tui.core.errors import UsageError
    from aorta_tui.tui.recipe_files import new_file_problem, read_recipe_for_edit

    if recipe.exists() or recipe.is_symlink():
        read_recipe_for_edit(recipe)  # UsageError (exit 2) naming the file
    else:
        problem = new_file_problem(recipe)
        if problem:
            raise UsageError(problem, hint="give an existing recipe, or a new .yaml name in an existing directory")
    from aorta_tui.cli.tui_launch import launch_tui

    launch_tui(start_recipe=recipe)
