"""Issue 12, item 11: under sudo, what the tool creates belongs to the user who ran sudo.

The real CLI runs as root with ``SUDO_UID``/``SUDO_GID`` of a real unprivileged user
(``nobody``); then that user, with no privilege at all (``setpriv``), runs a second
``--batch`` in the same working directory, which must succeed. A root-owned directory that
existed before keeps its owner.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aorta_tui.core import ownership
from tests.engine_support import REPO

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv"
)

RECIPE = ("schema_version: 1\nmode: probe\nticket: T-11\ntrials: 1\nmitigation_axis: [none]\n"
          "diagnostic_axis: [none]\n")


def _user() -> tuple[int, int]:
    pw = pwd.getpwnam("nobody")
    return pw.pw_uid, pw.pw_gid


def _cli(args: list[str], cwd: Path, *, as_user: tuple[int, int] | None = None,
         sudo_of: tuple[int, int] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUDO_")}
    env["PYTHONPATH"] = str(REPO)
    argv = [sys.executable, "-m", "aorta_tui", *args]
    if sudo_of is not None:
        env.update(SUDO_UID=str(sudo_of[0]), SUDO_GID=str(sudo_of[1]), SUDO_USER="nobody")
    if as_user is not None:
        env["HOME"] = str(cwd)
        argv = ["setpriv", f"--reuid={as_user[0]}", f"--regid={as_user[1]}", "--clear-groups",
                "--", *argv]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _workdir(tmp_path: Path) -> Path:
    """A working directory the unprivileged user may write, reachable through tmp_path."""
    tmp_path.chmod(0o755)
    for parent in tmp_path.parents:  # pytest's base dirs are 0700: let the user through
        if parent == Path("/tmp"):
            break
        parent.chmod(parent.stat().st_mode | 0o711)
    work = tmp_path / "work"
    work.mkdir()
    os.chown(work, *_user())
    (work / "probe.yaml").write_text(RECIPE)
    return work


def _owners(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.relpath(os.path.join(dirpath, name), root)] = (st.st_uid, st.st_gid)
    return out


def test_sudo_batch_then_user_batch_in_the_same_directory(tmp_path: Path) -> None:
    user = _user()
    work = _workdir(tmp_path)
    first = _cli(["--batch", "probe.yaml", "--no-snapshot", "--", "bash", "-c", "echo hi"], work,
                 sudo_of=user)
    assert first.returncode == 0, first.stderr
    owners = _owners(work / "aorta-out")
    assert len(owners) >= 10, owners  # aorta-out's ticket dir, run dir, its files, trial dir ...
    wrong = {p: o for p, o in owners.items() if o != user}
    assert wrong == {}, f"left to root under sudo: {wrong}"
    assert os.stat(work / "aorta-out").st_uid == user[0]

    second = _cli(["--batch", "probe.yaml", "--no-snapshot", "--", "bash", "-c", "echo again"],
                  work, as_user=user)
    assert second.returncode == 0, second.stderr  # was: Permission denied on aorta-out/T-11
    assert len(list((work / "aorta-out" / "T-11").glob("*/journal.jsonl"))) == 2


def test_sudo_env_snapshot_output_and_preexisting_parent(tmp_path: Path) -> None:
    user = _user()
    work = _workdir(tmp_path)
    kept = work / "root-owned"
    kept.mkdir()
    os.chown(kept, 0, 0)
    out = kept / "new" / "deeper" / "env.json"
    proc = _cli(["env", "probe", "-o", str(out)], work, sudo_of=user)
    assert proc.returncode == 0, proc.stderr
    assert os.stat(kept).st_uid == 0, "a parent that existed before must keep its owner"
    for path in (kept / "new", kept / "new" / "deeper", out):
        assert (os.stat(path).st_uid, os.stat(path).st_gid) == user, path
    # A sweep writing under a root-owned output directory leaves that directory root's.
    proc = _cli(["--batch", "probe.yaml", "--no-snapshot", "--output", str(kept), "--", "true"],
                work, sudo_of=user)
    assert proc.returncode == 0, proc.stderr
    assert os.stat(kept).st_uid == 0
    assert os.stat(kept / "T-11").st_uid == user[0]


def test_make_dirs_gives_only_what_it_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uid, gid = _user()
    monkeypatch.setenv("SUDO_UID", str(uid))
    monkeypatch.setenv("SUDO_GID", str(gid))
    made = ownership.make_dirs(tmp_path / "a" / "b")
    assert made == [tmp_path / "a", tmp_path / "a" / "b"]
    assert os.stat(tmp_path).st_uid == 0
    assert all(os.stat(p).st_uid == uid for p in made)
    assert ownership.make_dirs(tmp_path / "a" / "b") == []
    monkeypatch.setenv("SUDO_UID", "0")  # sudo from root: nothing to give
    assert ownership.invoking_user_ids() is None
