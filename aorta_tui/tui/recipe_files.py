"""Recipe files nearby, for Home's list and the editor's open dialog (no Textual here).

The working directory's own ``*.yaml`` / ``*.yml``, then everything under ``./recipes``
(``recipes/examples/...`` included) down to ``MAX_DEPTH`` directories. Bounded on a huge or
odd tree: at most ``MAX_ENTRIES`` directory entries are looked at, hidden directories and
symlinked directories are not entered (no loops), and a file counts as a recipe only when its
first 4000 bytes hold one of a recipe's keys.
"""

from __future__ import annotations

import os
from pathlib import Path

MAX_DEPTH = 4  # recipes/a/b/c/d/x.yaml is the deepest listed
MAX_ENTRIES = 5000  # directory entries looked at, in all
LIMIT = 200  # recipes listed
RECIPE_KEYS = ("schema_version:", "cells:", "mitigation_axis:", "workload:")


def looks_like_recipe(path: Path) -> bool:
    try:
        if not path.is_file():  # a FIFO would block the read below
            return False
        with path.open("rb") as fh:  # the keys sit at the top: read no more than that
            head = fh.read(4000).decode("utf-8", "replace")
    except OSError:
        return False
    return any(key in head for key in RECIPE_KEYS)


def _yaml(name: str) -> bool:
    return name.endswith((".yaml", ".yml")) and not name.startswith(".")


def find_recipes(base: Path, *, limit: int = LIMIT, max_depth: int = MAX_DEPTH,
                 max_entries: int = MAX_ENTRIES) -> list[Path]:
    """Recipes in ``base`` and under ``base/recipes`` (sorted, each directory's files first)."""
    found: list[Path] = []
    budget = [max_entries]

    def take(directory: Path) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(directory) as it:
                entries = []
                for entry in it:
                    if budget[0] <= 0:
                        break
                    budget[0] -= 1
                    entries.append(entry)
        except OSError:
            return []
        return sorted(entries, key=lambda e: e.name)

    def add_files(entries: list[os.DirEntry[str]]) -> None:
        for entry in entries:
            if len(found) >= limit:
                return
            if _yaml(entry.name) and looks_like_recipe(Path(entry.path)):
                found.append(Path(entry.path))

    add_files(take(base))

    def walk(directory: Path, depth: int) -> None:
        entries = take(directory)
        add_files(entries)
        if depth >= max_depth:
            return
        for entry in entries:
            if len(found) >= limit or budget[0] <= 0:
                return
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir and not entry.name.startswith("."):
                walk(Path(entry.path), depth + 1)

    recipes = base / "recipes"
    if recipes.is_dir():
        walk(recipes, 1)
    return found


def read_recipe_for_edit(path: Path) -> str:
    """The text of the recipe file ``path`` for the editor: a regular file (a FIFO or
    /dev/zero is refused, never waited on), at most the recipe engine's size limit, UTF-8.
    Raises ``UsageError`` with the file named (exit 2 on the command line)."""
    from aorta_tui.core.inputs import decode_utf8, read_input_bytes
    from aorta_tui.recipe.loader import MAX_RECIPE_BYTES

    data = read_input_bytes(path, what="recipe", limit=MAX_RECIPE_BYTES,
                            hint="pass the path of a recipe .yaml file")
    if b"\x00" in data:
        from aorta_tui.core.errors import UsageError

        raise UsageError(f"{path}: this is a binary file, not a YAML recipe", hint="pass the recipe's .yaml file")
    return decode_utf8(data.removeprefix(b"\xef\xbb\xbf"), where=str(path), what="recipe")


def new_file_problem(path: Path) -> str | None:
    """Why a recipe cannot be created at ``path`` (which does not exist), or None."""
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        return f"{path}: its directory {parent} does not exist"
    if not path.name.endswith((".yaml", ".yml")):
        return f"{path}: a recipe file's name ends in .yaml or .yml"
    return None
