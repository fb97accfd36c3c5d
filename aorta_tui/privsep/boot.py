"""Under ``sudo``: fork the privileged helper, then become the invoking user for good.

``sudo aorta-tui ...`` starts as root with ``SUDO_UID``/``SUDO_GID``/``SUDO_USER`` naming the user
who typed it. Before the tool reads or writes any file of the user's, :func:`drop_if_sudo`

1. forks the helper (:mod:`aorta_tui.privsep.helper`), which keeps root and is connected to
   this process by a socketpair;
2. sets this process's supplementary groups to the user's (``getgrouplist``), then its real,
   effective and saved gid and uid to the user's (``setresgid``, ``setresuid``): no id of root
   is left, so nothing later can take it back, and it checks that;
3. restores what sudo changed in the environment (:func:`invoking_environment`).

From then on the TUI, the engine, every file access and every trial (they are this process's
children) run as the user; only the helper and the bpftrace it starts are root. Without
``sudo`` (root logged in as root, or an ordinary user) nothing happens here.
"""

from __future__ import annotations

import os
import pwd
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from aorta_tui.privsep import client
from aorta_tui.privsep.helper import VerbFamily, run_helper

# what sudo's env_reset removes or replaces and the tool puts back from the invoking shell
# (sudo's own parent process) where it is missing: the terminal's type and locale
TERMINAL_VARS = ("TERM", "COLORTERM", "LANG", "LC_ALL", "LC_CTYPE", "NO_COLOR")
# a virtual environment or conda env the user had active
ENV_PREFIX_VARS = ("VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV")
SUDO_SECURE_PATH_NOTE = "sudo's secure_path"


class DropFailed(SystemExit):
    """The process could not become the user (or could not go on as the user): it stops with
    the reason and exit code 3 (environment) rather than go on as root."""

    def __init__(self, message: str) -> None:
        os.write(2, f"aorta-tui: {message}\n".encode(errors="replace"))
        super().__init__(3)


@dataclass(frozen=True)
class InvokingUser:
    uid: int
    gid: int
    name: str
    home: str
    shell: str
    groups: tuple[int, ...]


def invoking_user(environ: Mapping[str, str]) -> InvokingUser | None:
    """The user behind ``sudo`` when this process is root started by sudo for someone else."""
    if os.geteuid() != 0:
        return None
    try:
        uid, gid = int(environ["SUDO_UID"]), int(environ["SUDO_GID"])
    except (KeyError, ValueError):
        return None
    if uid == 0:
        return None  # sudo from root: there is nobody to drop to
    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        raise DropFailed(f"SUDO_UID={uid} names no user in the password database; "
                         "refusing to run as root for an unknown user") from None
    groups = tuple(sorted(set(os.getgrouplist(pw.pw_name, gid))))
    return InvokingUser(uid, gid, pw.pw_name, pw.pw_dir, pw.pw_shell, groups)


def _sudo_parent_environ() -> dict[str, str]:
    """The environment sudo itself was started with (the user's shell's), read as root before
    the drop: sudo is this process's parent (or, with ``use_pty``, its monitor process, a fork
    of sudo with the same environment)."""
    try:
        data = Path(f"/proc/{os.getppid()}/environ").read_bytes()[: 1 << 20]
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in data.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def invoking_environment(environ: Mapping[str, str], user: InvokingUser,
                         shell_env: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with what sudo changed put back for ``user``.

    - ``HOME``, ``USER``, ``LOGNAME``, ``SHELL``: the user's, from the password database (sudo
      sets them to root's, or keeps ``HOME`` of the user only with some configurations);
    - ``PATH``: the invoking shell's (sudo replaces it by ``secure_path``); where that cannot
      be read, sudo's with the virtualenv's ``bin`` first;
    - ``VIRTUAL_ENV``, ``CONDA_PREFIX``, ``CONDA_DEFAULT_ENV``: kept when sudo kept them,
      otherwise taken from the invoking shell;
    - ``TERM``, ``COLORTERM``, ``LANG``, ``LC_*``, ``NO_COLOR``: from the invoking shell where
      sudo dropped them;
    - ``MAIL`` (root's mailbox) is removed; ``SUDO_*`` stay (they say who ran the tool);
    - the umask is untouched (sudo applies the union of its own and the user's).
    """
    env = dict(environ)
    env.update(HOME=user.home, USER=user.name, LOGNAME=user.name, SHELL=user.shell)
    env.pop("MAIL", None)
    for name in (*ENV_PREFIX_VARS, *TERMINAL_VARS):
        if not env.get(name) and shell_env.get(name):
            env[name] = shell_env[name]
    if shell_env.get("PATH"):
        env["PATH"] = shell_env["PATH"]
    elif env.get("VIRTUAL_ENV"):
        env["PATH"] = os.path.join(env["VIRTUAL_ENV"], "bin") + os.pathsep + env.get("PATH", "")
    return env


def become(user: InvokingUser) -> None:
    """setgroups, setresgid, setresuid: all ids the user's; then prove root cannot come back."""
    os.setgroups(list(user.groups))
    os.setresgid(user.gid, user.gid, user.gid)
    os.setresuid(user.uid, user.uid, user.uid)
    if os.getresuid() != (user.uid,) * 3 or os.getresgid() != (user.gid,) * 3:
        raise DropFailed("dropping to the invoking user left a root id; stopping")
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise DropFailed("root could be regained after the drop; stopping")


def _require_readable_interpreter(user: InvokingUser) -> None:
    """After the drop the tool imports as the user: an interpreter or package it cannot read
    (a virtualenv under root's 0700 home) would fail later with an ImportError; say it now."""
    import aorta_tui

    for what, path in (("the Python standard library", os.path.dirname(os.__file__)),
                       ("the aorta_tui package", os.path.dirname(aorta_tui.__file__))):
        if not os.access(path, os.R_OK | os.X_OK):
            raise DropFailed(f"{user.name} cannot read {what} at {path}, and under sudo aorta-tui runs as "
                             f"{user.name}; fix: install aorta-tui where {user.name} can read it (its own "
                             "virtualenv), or run it as root without sudo")


def drop_if_sudo(load_verbs: Callable[[], list[VerbFamily]]) -> InvokingUser | None:
    """Fork the helper and become the invoking user, when started by sudo; else do nothing."""
    user = invoking_user(os.environ)
    if user is None:
        return None
    shell_env = _sudo_parent_environ()
    parent = os.getpid()
    try:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
    except OSError as exc:
        raise DropFailed(f"cannot start the privileged helper: {exc.strerror or exc}") from None
    if pid == 0:  # the helper: root, for the verbs only
        mine.close()
        run_helper(theirs, parent, load_verbs)
    theirs.close()
    try:
        become(user)
    except OSError as exc:
        raise DropFailed(f"cannot become {user.name} (uid {user.uid}): {exc}") from None
    _require_readable_interpreter(user)
    restored = invoking_environment(dict(os.environ), user, shell_env)
    os.environ.clear()
    os.environ.update(restored)
    client.install(client.Client(mine, helper_pid=pid))
    return user
