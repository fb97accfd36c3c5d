"""Refuse what root should not do: continue, report or bundle a run directory another user
controls, as root with nobody to drop to.

A run directory holds what its next session runs and reads: the command in
``recipe.resolved.yaml`` (its hash in ``run.json`` says the recipe is whole, not who wrote it),
the journal, the results. Whoever can write it decides what a resume runs. Under ``sudo`` the
tool drops to the invoking user for all of that (docs/security.md, "The privileged helper");
run as root *without* sudo (a root shell, a cron job, ``su -``) there is nobody to drop to, so a
directory that another user owns, or that anyone but root can write (itself, anything in it,
or a directory above it, sticky ones such as ``/tmp`` aside), is refused with exit 3, naming
the owner and the safe way: run the command as that user. ``--i-trust-this-directory``
overrides it; the engine then records the override in the run's journal (a ``run_warning``
with code ``untrusted_run_dir``), so whoever reads the run later sees it.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from aorta_tui.core.errors import EnvironmentProblem

TRUST_FLAG = "--i-trust-this-directory"
TRUST_WARNING_CODE = "untrusted_run_dir"
MAX_ENTRIES = 500_000  # a run directory this large is checked this far, then judged foreign


@dataclass(frozen=True)
class Distrust:
    """Why root should not trust a run directory: the first thing found that someone else
    controls, and who (``owner``: a uid, or None when it is root's but writable by others)."""

    path: str
    owner: int | None
    why: str


def root_without_sudo() -> bool:
    """Root, with no invoking user to drop to (no ``SUDO_UID`` of another user)."""
    if os.geteuid() != 0:
        return False
    try:
        return int(os.environ.get("SUDO_UID", "0")) == 0
    except ValueError:
        return True


def _user(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _judge(path: str, st: os.stat_result, *, ancestor: bool = False) -> Distrust | None:
    if st.st_uid != 0:
        return Distrust(path, st.st_uid, f"belongs to {_user(st.st_uid)}")
    if stat.S_ISLNK(st.st_mode):
        return None  # a link's own mode means nothing; its owner is root
    writable = stat.S_IMODE(st.st_mode) & 0o022
    if writable and not (ancestor and st.st_mode & stat.S_ISVTX):
        who = "group and others" if writable == 0o022 else "others" if writable == 0o002 else "its group"
        return Distrust(path, None, f"is writable by {who} (mode {stat.S_IMODE(st.st_mode):04o})")
    return None


def find_distrust(run_dir: str | os.PathLike[str]) -> Distrust | None:
    """The first thing in or above ``run_dir`` that someone other than root controls."""
    root = Path(os.path.realpath(run_dir))
    for parent in reversed(root.parents):  # / first: the outermost cause is the one to fix
        if (found := _judge(str(parent), os.stat(parent), ancestor=True)) is not None:
            return found
    if (found := _judge(str(root), os.stat(root))) is not None:
        return found
    seen = 0
    for dirpath, dirnames, filenames, dir_fd in os.fwalk(root, follow_symlinks=False):
        for name in (*dirnames, *filenames):
            seen += 1
            if seen > MAX_ENTRIES:
                return Distrust(str(root), None, f"holds more than {MAX_ENTRIES} files (not checked whole)")
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if (found := _judge(os.path.join(dirpath, name), st)) is not None:
                return found
    return None


def check_run_dir_trust(run_dir: str | os.PathLike[str], *, command: str,
                        trusted: bool = False) -> str | None:
    """Refuse (exit 3) to go on as root without sudo over a run directory someone else controls.

    ``command`` is the command as the user would type it without ``aorta-tui`` (``"sweep run
    --resume RUN"``), for the fix. Returns ``None`` when there is nothing to say, or, when
    ``trusted`` (``--i-trust-this-directory``) overrode a refusal, the note the engine must
    record in the run's journal. The one check every command that reads or resumes a run
    calls before it reads anything of the run (``sweep run --resume``, ``policy resume``,
    ``policy report``, ``queue resume``, ``bundle``)."""
    if not root_without_sudo():
        return None
    try:
        found = find_distrust(run_dir)
    except OSError as exc:
        found = Distrust(str(run_dir), None, f"cannot be checked ({exc.strerror or exc})")
    if found is None:
        return None
    if trusted:
        return (f"{TRUST_FLAG}: root went on without sudo although {found.path} {found.why}; "
                "whoever controls it chose what this session ran and read")
    if found.owner is not None:
        user = _user(found.owner)
        fix = (f"run it as {user}: `sudo -u {user} aorta-tui {command}`; or, only if you "
               f"trust {user} with root, add {TRUST_FLAG}")
    else:
        fix = (f"run it as an unprivileged user, or make {found.path} writable by root alone "
               f"(`chmod go-w {found.path}`); or, only if you trust every user who can write it, "
               f"add {TRUST_FLAG}")
    raise EnvironmentProblem(
        f"refused: aorta-tui runs as root without sudo, and {found.path} {found.why}: whoever "
        f"controls the run directory {run_dir} chooses what a resume runs (its recipe's command) "
        "and what the tool reads, so root would run and read it for them", hint=fix)
