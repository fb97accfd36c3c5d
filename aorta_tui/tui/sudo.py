"""Under ``sudo``, files the TUI writes belong to the user who ran sudo, not to root.

The rules live in the engine (:mod:`aorta_tui.core.ownership`), which writes most of the
files; this is the TUI's name for them.
"""

from __future__ import annotations

from pathlib import Path

from aorta_tui.core.ownership import adopt, adopt_tree, invoking_user_ids

__all__ = ["give_to_invoking_user", "invoking_user_ids"]


def give_to_invoking_user(path: Path, *, recursive: bool = False) -> None:
    """chown ``path`` (and, with ``recursive``, everything under it) to SUDO_UID/SUDO_GID.

    For paths the TUI created. A no-op when not under sudo; a failed chown (read-only mount,
    foreign file system) is ignored because the file itself is intact and readable.
    """
    (adopt_tree if recursive else adopt)(path)
