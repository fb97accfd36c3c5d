"""Under ``sudo``, what aorta-tui creates belongs to the user who ran sudo, not to root.

Since issue 33 the ``aorta-tui`` program drops to the invoking user before it touches a file
(:mod:`aorta_tui.privsep.boot`), so what it creates is the user's without a chown and
:func:`invoking_user_ids` is ``None`` in every process of the tool (its euid is never 0 with
``SUDO_UID`` set; the privileged helper creates nothing of the user's). What is left here is
called by ``core/atomic.py`` and ``store/rundir.py`` only, where it is a no-op; it goes with them.
The text below is how it worked when the whole tool ran as root.

``sudo aorta-tui ...`` (for eBPF tracing, GPU clocks) runs as root, so every directory and
file it makes - ``aorta-out/``, the ticket directory, the run directory and all in it, ``-o``
files - would be root's, and the user's next run without sudo in the same place fails with
"Permission denied". With ``SUDO_UID``/``SUDO_GID`` set and euid 0, each path the tool
*creates* is given to that user; a path that existed before (a parent directory, a file it
replaces, a run directory made by someone else) keeps its owner.

- :func:`make_dirs` instead of ``mkdir(parents=True, exist_ok=True)``: the directories it
  created are given away, the ones that existed are not touched.
- :func:`adopt` for one new file or directory; :func:`created` for a directory tree the tool
  made (a run directory): given away now and again by :func:`adopt_created` at the end, for
  what was written into it meanwhile (logs, trial directories, the lock).

A failed chown (a read-only or foreign file system) is ignored: the file itself is intact.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from pathlib import Path

_lock = threading.Lock()
_created_roots: list[Path] = []  # trees the tool made in this process (run directories)


def invoking_user_ids() -> tuple[int, int] | None:
    """(uid, gid) of the user behind ``sudo``, or ``None`` when not running under sudo as root."""
    if os.geteuid() != 0:
        return None
    try:
        uid, gid = int(os.environ["SUDO_UID"]), int(os.environ["SUDO_GID"])
    except (KeyError, ValueError):
        return None
    return None if uid == 0 else (uid, gid)  # sudo from root: nothing to give


def adopt(path: str | os.PathLike[str]) -> None:
    """Give ``path`` (created by the tool) to the sudo user; a no-op when not under sudo."""
    ids = invoking_user_ids()
    if ids is not None:
        with contextlib.suppress(OSError):
            os.chown(path, *ids, follow_symlinks=False)


def adopt_fd(fd: int) -> None:
    """``adopt`` an open file or directory by its descriptor (``fchown``): what the tool made
    in a run directory is given away without naming a path someone could swap."""
    ids = invoking_user_ids()
    if ids is not None:
        with contextlib.suppress(OSError):
            os.fchown(fd, *ids)


def adopt_tree(path: str | os.PathLike[str]) -> None:
    """``adopt`` ``path`` and everything under it (symlinks themselves, never their targets).

    Walked with directory descriptors (``os.fwalk``) and chowned relative to them: a directory
    swapped for a link during the walk cannot send the chown outside the tree."""
    ids = invoking_user_ids()
    if ids is None:
        return
    root = Path(path)
    with contextlib.suppress(OSError):
        os.chown(root, *ids, follow_symlinks=False)
    if not root.is_dir() or root.is_symlink():
        return
    with contextlib.suppress(OSError):
        for _dirpath, dirnames, filenames, dir_fd in os.fwalk(root, follow_symlinks=False):
            for name in (*dirnames, *filenames):
                with contextlib.suppress(OSError):
                    os.chown(name, *ids, dir_fd=dir_fd, follow_symlinks=False)


def make_dirs(path: str | os.PathLike[str]) -> list[Path]:
    """``mkdir -p path``; under sudo the directories it created go to the sudo user.

    Returns the directories created, outermost first. Pre-existing ones keep their owner.
    """
    target = Path(path)
    missing: list[Path] = []
    probe = target
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    target.mkdir(parents=True, exist_ok=True)
    made = [p for p in reversed(missing) if p.is_dir()]
    for p in made:
        adopt(p)
    return made


def created(path: str | os.PathLike[str]) -> None:
    """``path`` is a tree the tool made (a run directory): give it away now and at the end
    (:func:`adopt_created`, also run at interpreter exit - a Ctrl-C included)."""
    root = Path(path)
    with _lock:
        if not _created_roots:
            atexit.register(adopt_created)
        if root not in _created_roots:
            _created_roots.append(root)
    adopt_tree(root)


def make_tree(path: str | os.PathLike[str]) -> Path:
    """``mkdir -p`` a directory the tool owns whole (an output directory of its own)."""
    make_dirs(path)
    created(path)
    return Path(path)


def adopt_created(resumed: str | os.PathLike[str] | None = None) -> None:
    """At the end of a run: give away everything under the trees the tool made.

    ``resumed``: a run directory this process continued; it is included when it already
    belongs to the sudo user (made by an earlier run of the tool for that user), so the files
    this session added are the user's too. One owned by anyone else is left alone.
    """
    ids = invoking_user_ids()
    if ids is None:
        return
    with _lock:
        roots = list(_created_roots)
    if resumed is not None:
        with contextlib.suppress(OSError):
            if os.stat(resumed).st_uid == ids[0]:
                roots.append(Path(resumed))
    for root in roots:
        adopt_tree(root)
