"""``run.json``: what was run (recipe hash, command, aorta-tui version), written atomically
and read back checked; a directory without it is no run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aorta_tui import __version__
from aorta_tui.core.errors import RunDirError, UsageError
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.store.naming import CREATING_SUFFIX, RUN_META


def write_run_meta(run_dir: Path, meta: dict[str, Any]) -> None:
    with RunDirFS(run_dir) as fs:
        fs.atomic_write_json(RUN_META, {"aorta_tui_version": __version__, **meta})


def read_run_meta(run_dir: Path) -> dict[str, Any]:
    path = run_dir / RUN_META
    # A directory still being created (or left so by a kill) is never a run, even with its
    # run.json written: it has not got its name, so nothing lists it or follows it.
    if run_dir.name.endswith(CREATING_SUFFIX) or (
            not path.exists() and ((run_dir / "recipe.resolved.yaml").exists()
                                   or (run_dir / "plan.json").exists())):
        raise RunDirError(
            f"{run_dir} was never fully created (aorta-tui was stopped while writing it; it has no "
            f"{RUN_META}), so no trial ran in it",
            hint="start the sweep again as a new run (the same recipe and command); this directory "
            "can be deleted",
        )
    if not run_dir.is_dir():  # a file or nothing: no run (exit 2), as a missing run.json says
        raise RunDirError(
            f"{run_dir} is not an aorta-tui run directory (no {RUN_META})",
            hint="pass the directory that holds journal.jsonl, e.g. aorta-out/TICKET/20261129-101500-ab12")
    try:
        from aorta_tui.core.inputs import MiB, require_object

        with RunDirFS(run_dir) as fs:  # run.json through the file layer: never a link's target
            meta = fs.load_json(RUN_META, what="run.json", limit=4 * MiB)
        return require_object(meta, where=str(path), what="run.json written by aorta-tui")
    except FileNotFoundError:
        raise RunDirError(
            f"{run_dir} is not an aorta-tui run directory (no {RUN_META})",
            hint="pass the directory that holds journal.jsonl, e.g. aorta-out/TICKET/20261129-101500-ab12",
        ) from None
    except UsageError as exc:
        if not path.exists():
            raise RunDirError(
                f"{run_dir} is not an aorta-tui run directory (no {RUN_META})",
                hint="pass the directory that holds journal.jsonl, e.g. aorta-out/TICKET/20261129-101500-ab12",
            ) from None
        raise RunDirError(f"{exc.message}", hint="the run directory is damaged; start a new run") from None
