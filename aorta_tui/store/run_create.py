"""Making a run directory, all or nothing (built hidden as ``.<run-id>.creating``, renamed
once filled), discarding one no trial ran in, and refusing one whose top-level outputs are
not what the engine writes there."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

from aorta_tui.core.atomic import fsync_dir
from aorta_tui.core.errors import AortaError, RunDirError, UsageError
from aorta_tui.core.rundir_fs import rundir_refused
from aorta_tui.store.naming import CREATING_SUFFIX, JOURNAL, new_run_id, safe_component
from aorta_tui.store.write_errors import write_failure


def _output_error(output: Path, exc: OSError) -> AortaError:
    return write_failure(exc, None, resumable=False) or UsageError(
        f"cannot create the run directory under {output}: {exc.strerror or exc}",
        hint="pass a writable --output DIR",
    )


def create_run_dir(output: Path, ticket: str, populate: Callable[[Path], None]) -> Path:
    """Create ``<output>/<ticket>/<run-id>`` holding what ``populate`` writes, all or nothing.

    The directory is filled as ``.<run-id>.creating`` and renamed once ``populate`` is done, so
    a run directory without its ``run.json`` never exists under a run's name.
    """
    parent = output / safe_component(ticket)
    try:
        parent.mkdir(parents=True, exist_ok=True)
        run_id = new_run_id()
        staging = parent / f".{run_id}{CREATING_SUFFIX}"
        staging.mkdir()
    except OSError as exc:
        raise _output_error(output, exc) from None
    if not os.access(staging, os.W_OK):
        raise UsageError(f"{staging} is not writable", hint="pass a writable --output DIR")
    try:
        populate(staging)
        (staging / JOURNAL).touch()  # listed (and resumable) from the moment it has its name
        final = parent / run_id
        os.rename(staging, final)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)  # a failed creation leaves nothing (a kill: the hidden dir)
        if isinstance(exc, OSError):
            raise _output_error(output, exc) from None
        raise
    fsync_dir(parent)
    return final


def check_outputs(run_dir: Path, *, files: tuple[str, ...] = (),
                  dirs: tuple[str, ...] = ()) -> None:
    """Refuse, before anything is changed, a run directory where one of the ``files`` an engine
    replaces atomically is a directory (or a FIFO, a socket, a device), or where one of the
    ``dirs`` it writes into is not a directory: a located exit 2 with the ``mv`` that clears it,
    never an exit 70 once the trials have run again."""
    for name in (*files, *dirs):
        path = run_dir / name
        try:
            st = path.lstat()
        except OSError:
            continue  # absent: written when its time comes
        want_dir = name in dirs
        if want_dir and stat.S_ISDIR(st.st_mode):
            continue
        if not want_dir and (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            continue  # a link is replaced, never followed, by the atomic rename
        if want_dir and stat.S_ISLNK(st.st_mode):
            # a link where the tool writes into a directory is what an attack plants, not damage:
            # the same refusal (exit 3) the file layer gives when it meets one later
            raise rundir_refused(str(path), "a symlink")
        what = ("a directory" if stat.S_ISDIR(st.st_mode) else "a symlink" if stat.S_ISLNK(st.st_mode)
                else "a file" if stat.S_ISREG(st.st_mode) else "a special file")
        raise RunDirError(
            f"{path} is {what}, not a {'directory' if want_dir else 'file'}: aorta-tui writes its "
            f"{name}{'/' if want_dir else ''} there",
            hint=f"move it away (`mv {path} {path}.bad`) and run the command again")


def staged_run_id(staging: Path) -> str:
    """The run id of a directory ``create_run_dir`` is filling (``.<run-id>.creating``)."""
    name = staging.name
    if name.startswith(".") and name.endswith(CREATING_SUFFIX):
        return name[1:-len(CREATING_SUFFIX)]
    return name


def discard_new_run(run_dir: Path) -> bool:
    """Remove a run directory this process created moments ago and in which no trial ran (the
    executor refused the run before its first trial: docs/slurm.md), and its ticket directory
    when that is left empty. Renamed to a hidden ``.creating`` name first, which no listing
    shows, so a kill half-way leaves what a killed creation leaves, never half a run."""
    grave = run_dir.with_name(f".{run_dir.name}.discarded{CREATING_SUFFIX}")
    try:
        os.rename(run_dir, grave)
    except OSError:
        return False
    shutil.rmtree(grave, ignore_errors=True)
    with contextlib.suppress(OSError):
        run_dir.parent.rmdir()  # only when empty: other runs of the ticket stay
    return True


def prepare_output(output: Path, ticket: str) -> Path:
    """Create an empty ``<output>/<ticket>/<run-id>`` or explain why it cannot be created."""
    return create_run_dir(output, ticket, lambda _d: None)
