"""A real second user and the real CLI started the way ``sudo`` starts it (shared by the
privilege-separation tests and tests/reliability/test_rel_proc_sudo.py).

``sudo aorta-tui`` is the CLI as root with ``SUDO_UID``/``SUDO_GID``/``SUDO_USER`` naming the user
who typed it, ``PATH`` set to sudo's ``secure_path`` and ``HOME`` root's: these tests start it
exactly so, for the user ``aorta-usr`` made here (CI runs as root on a fresh machine). After the
drop the tool imports as that user, who cannot read a virtualenv whose interpreter lives under
``/root`` (mode 0700): the CLI runs on the system's python3 (same version, same ABI) with the
repository and the test virtualenv's site-packages on ``PYTHONPATH``, both readable by others.
"""

from __future__ import annotations

import fcntl
import grp
import os
import pwd
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
USER = "aorta-usr"
EXTRA_GROUP = "aorta-grp"  # a supplementary group: the drop must keep it
SECURE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _system_python() -> str | None:
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if not os.path.exists(candidate):
            continue
        r = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"],
                           capture_output=True, text=True)
        if r.stdout.strip() == str(tuple(sys.version_info[:2])):
            return candidate
    return None


PYTHON = _system_python()


@dataclass(frozen=True)
class SudoUser:
    name: str
    uid: int
    gid: int
    groups: frozenset[int]
    home: str

    def env(self, **extra: str) -> dict[str, str]:
        """What sudo leaves a command: root's HOME and USER, secure_path, SUDO_*."""
        site = sysconfig.get_paths()["purelib"]
        env = {"PATH": SECURE_PATH, "HOME": "/root", "USER": "root", "LOGNAME": "root",
               "SHELL": "/bin/bash", "MAIL": "/var/mail/root", "TERM": "xterm", "LANG": "C.UTF-8",
               "SUDO_UID": str(self.uid), "SUDO_GID": str(self.gid), "SUDO_USER": self.name,
               "SUDO_COMMAND": "/usr/bin/aorta-tui", "PYTHONPATH": f"{REPO}:{site}",
               "PYTHONDONTWRITEBYTECODE": "1"}
        env.update(extra)
        return env


def _ensure_user() -> SudoUser:
    # CI's unit tier runs on two pytest-xdist workers: both may make the user at once on a fresh
    # machine, and shadow-utils refuses a second writer of /etc/passwd ("cannot lock"), so the
    # making is one at a time across processes
    with open("/run/lock/aorta-tests-user.lock" if os.path.isdir("/run/lock") else
              "/tmp/aorta-tests-user.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _make_user()


def _make_user() -> SudoUser:
    subprocess.run(["groupadd", "-f", EXTRA_GROUP], check=True, capture_output=True)
    try:
        pwd.getpwnam(USER)
    except KeyError:
        r = subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", "--groups", EXTRA_GROUP, USER],
                           capture_output=True, text=True)
        if r.returncode not in (0, 9):  # 9: made meanwhile by another test run
            raise RuntimeError(f"useradd {USER}: {r.stderr.strip()}") from None
    subprocess.run(["usermod", "-a", "-G", EXTRA_GROUP, USER], check=True, capture_output=True)
    pw = pwd.getpwnam(USER)
    groups = frozenset(os.getgrouplist(USER, pw.pw_gid))
    assert grp.getgrnam(EXTRA_GROUP).gr_gid in groups
    return SudoUser(USER, pw.pw_uid, pw.pw_gid, groups, pw.pw_dir)


def cli_argv(*args: str) -> list[str]:
    assert PYTHON is not None
    return [PYTHON, "-m", "aorta_tui", *args]


def run_sudo(user: SudoUser, args: list[str], cwd: Path, timeout: float = 180,
             **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli_argv(*args), cwd=cwd, env=user.env(**env), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def status_ids(pid: int) -> dict[str, list[int]]:
    """``Uid``/``Gid``/``Groups`` of /proc/PID/status (real, effective, saved, filesystem)."""
    out: dict[str, list[int]] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("Uid", "Gid", "Groups"):
            out[key] = [int(x) for x in value.split()]
    return out


def children(pid: int) -> list[int]:
    """The pid's children now; none when it has already gone (a tree is sampled while it runs,
    so a process listed a moment ago may have exited: CI saw /proc/PID/task vanish)."""
    out = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []
    for task in tasks:
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def ensure_user() -> SudoUser:
    """The second user (made here when missing), or a skip saying why it cannot be."""
    import pytest

    if os.geteuid() != 0:
        pytest.skip("needs root: it makes a second user and starts the tool as sudo does")
    if PYTHON is None:
        pytest.skip(f"needs a system python3 of version {sys.version_info[:2]} that {USER} can run")
    if shutil.which("useradd") is None:
        pytest.skip("needs useradd to make the second user")
    return _ensure_user()


def make_user_dir(user: SudoUser) -> Path:
    """A fresh directory of the user's under /tmp (pytest's tmp_path is under root's 0700 one)."""
    path = Path(tempfile.mkdtemp(prefix="aorta-privsep-", dir="/tmp"))
    os.chown(path, user.uid, user.gid)
    return path


HELPER = (
    "import os, socket, sys\n"
    "from aorta_tui.cli.privileged import load_verbs\n"
    "from aorta_tui.privsep.helper import run_helper\n"
    "run_helper(socket.socket(fileno=int(sys.argv[1])), os.getppid(), load_verbs)\n"
)


def start_helper(env: dict[str, str] | None = None) -> tuple[socket.socket, subprocess.Popen[bytes]]:
    """A real helper process (root, the tool's verb families) on one end of a socketpair, as
    ``privsep.boot`` forks it; the test holds the other end. Closing it ends the helper."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    proc = subprocess.Popen([sys.executable, "-c", HELPER, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                            env=env)
    theirs.close()
    mine.settimeout(60)
    return mine, proc
