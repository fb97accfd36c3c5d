"""Under ``sudo``, files the TUI writes belong to the user who ran sudo, not to root."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def invoking_user_ids() -> tuple[int, int] | None:
    """(uid, gid) of the user behind ``sudo``, or ``None`` when not running under sudo as root."""
    if os.geteuid() != 0:
        return None
    try:
        return int(os.environ["SUDO_UID"]), int(os.environ["SUDO_GID"])
    except (KeyError, ValueError):
        return None


def give_to_invoking_user(path: Path, *, recursive: bool = False) -> None:
    """chown ``path`` (and, with ``recursive``, everything under it) to SUDO_UID/SUDO_GID.

    A no-op when not under sudo; a failure to chown (read-only mount, foreign filesystem) is
    ignored because the file itself is intact and readable.
    """
    ids = invoking_user_ids()
    if ids is None:
        return
    uid, gid = ids
    targets = [Path(path)]
    if recursive and Path(path).is_dir():
        targets.extend(Path(path).rglob("*"))
    for target in targets:
        with contextlib.suppress(OSError):
            os.chown(target, uid, gid, follow_symlinks=False)
