"""What a failed write says: a full disk (bytes or inodes), a quota, an I/O error, a
read-only filesystem or another user's directory, with the free space and the fix."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from aorta_tui.core.errors import AortaError, EnvironmentProblem, UsageError
from aorta_tui.core.inputs import permission_problem

_FULL = {errno.ENOSPC, errno.EDQUOT}
_DEVICE = {errno.EIO, errno.EROFS}


def describe_free_space(path: Path) -> str:
    """``"12.0 KiB free"`` on the filesystem holding ``path`` (or its nearest existing parent)."""
    from aorta_tui.core.inputs import describe_size

    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        st = os.statvfs(probe)
    except OSError:
        return "free space unknown"
    free = f"{describe_size(st.f_bavail * st.f_frsize)} free"
    # Out of inodes, a filesystem refuses a new file with ENOSPC while bytes are left: saying
    # only "50.0 MiB free" would send the user looking for a disk that is not full.
    if st.f_files > 0 and st.f_favail == 0:
        return f"no inodes left (all {st.f_files} in use), {free}"
    return free


def write_failure(exc: OSError, run_dir: Path | None, *, resumable: bool = True,
                  resume_command: str | None = None) -> AortaError | None:
    """The user-facing error for a failed write the machine caused (full disk, quota, I/O error,
    read-only filesystem), or ``None`` when ``exc`` is not one of those (a bug, then).

    ``resume_command`` is how this run is finished (default: the sweep's ``--resume``)."""
    denied = exc.filename or run_dir
    if isinstance(exc, PermissionError) and denied is not None:
        return permission_problem(denied, fix_dir=run_dir)
    if exc.errno not in _FULL | _DEVICE:
        return None
    where = Path(exc.filename) if exc.filename else run_dir
    what = f"could not write {where}" if where else "could not write the run directory"
    if exc.errno in _FULL:
        free = describe_free_space(where or Path("."))
        why = f"{exc.strerror or 'no space left'} ({free} there)"
        fix = ("delete files on that filesystem (its inodes, the number of files it can hold, "
               "are used up)" if "no inodes left" in free
               else "free some space on that filesystem (or raise the quota)")
    else:
        why = exc.strerror or str(exc)
        fix = "check the disk (dmesg) or write elsewhere with --output DIR"
    resume_command = resume_command or f"aorta-tui sweep run --resume {run_dir}"
    then = (f", then finish the run with `{resume_command}` (finished trials "
            "are kept)") if resumable and run_dir is not None else ", then run it again"
    return EnvironmentProblem(f"{what}: {why}", hint=fix + then)


def output_write_error(exc: OSError, path: str | os.PathLike[str], *, option: str = "-o") -> AortaError:
    """The error for a file or directory the user named (``-o``, ``--run-dir``) that could not
    be written: the machine's problem (full disk or inodes, quota, I/O error, read-only, another
    user's directory) is exit 3 naming the file and the free space; anything else exit 2."""
    if exc.filename is None:
        exc.filename = os.fspath(path)
    return write_failure(exc, None, resumable=False) or UsageError(
        f"cannot write {exc.filename}: {exc.strerror or exc}",
        hint=f"choose a writable path with {option}")
