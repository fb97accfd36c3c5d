"""Issue 12, item 11 (and issue 33): under sudo, what the tool creates belongs to the user who
ran sudo, because everything but the privileged helper runs as that user.

The real CLI runs as root with ``SUDO_UID``/``SUDO_GID`` of a real unprivileged user
(``aorta-usr``, made by tests/privsep/sudo_support.py); then that user, with no privilege at all
(``setpriv``), runs a second ``--batch`` in the same working directory, which must succeed. A
root-owned directory that existed before is root's: the tool, running as the user, may not write
into it and says so (exit 3), as ``sudoedit`` would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.privsep.sudo_support import SudoUser, cli_argv, ensure_user, make_user_dir, run_sudo

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv"
)

RECIPE = ("schema_version: 1\nmode: probe\nticket: T-11\ntrials: 1\nmitigation_axis: [none]\n"
          "diagnostic_axis: [none]\n")


@pytest.fixture()
def user() -> SudoUser:
    return ensure_user()


@pytest.fixture()
def work(user: SudoUser) -> Iterator[Path]:
    path = make_user_dir(user)
    (path / "probe.yaml").write_text(RECIPE)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _as_user(user: SudoUser, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in user.env().items() if not k.startswith("SUDO_")}
    env.update(HOME=str(cwd), USER=user.name)
    argv = ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--init-groups", "--", *cli_argv(*args)]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _owners(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.relpath(os.path.join(dirpath, name), root)] = (st.st_uid, st.st_gid)
    return out


def test_sudo_batch_then_user_batch_in_the_same_directory(user: SudoUser, work: Path) -> None:
    first = run_sudo(user, ["--batch", "probe.yaml", "--no-snapshot", "--", "bash", "-c", "echo hi"], work)
    assert first.returncode == 0, first.stderr
    owners = _owners(work / "aorta-out")
    assert len(owners) >= 10, owners  # aorta-out's ticket dir, run dir, its files, trial dir ...
    wrong = {p: o for p, o in owners.items() if o != (user.uid, user.gid)}
    assert wrong == {}, f"left to root under sudo: {wrong}"
    assert os.stat(work / "aorta-out").st_uid == user.uid

    second = _as_user(user, ["--batch", "probe.yaml", "--no-snapshot", "--", "bash", "-c", "echo again"], work)
    assert second.returncode == 0, second.stderr  # was: Permission denied on aorta-out/T-11
    assert len(list((work / "aorta-out" / "T-11").glob("*/journal.jsonl"))) == 2


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_sudo_env_snapshot_output_and_a_root_owned_parent(user: SudoUser, work: Path) -> None:
    out = work / "new" / "deeper" / "env.json"
    proc = run_sudo(user, ["env", "probe", "-o", str(out)], work)
    assert proc.returncode == 0, proc.stderr
    for path in (work / "new", work / "new" / "deeper", out):
        assert (os.stat(path).st_uid, os.stat(path).st_gid) == (user.uid, user.gid), path
    # A root-owned directory is root's: the tool runs as the user and may not write into it.
    kept = work / "root-owned"
    kept.mkdir()
    os.chown(kept, 0, 0)
    for args in (["env", "probe", "-o", str(kept / "new" / "env.json")],
                 ["--batch", "probe.yaml", "--no-snapshot", "--output", str(kept), "--", "true"]):
        proc = run_sudo(user, args, work)
        assert proc.returncode == 3, proc.stderr
        assert "permission denied" in proc.stderr and f"runs as {user.name}" in proc.stderr
        assert f"{kept} belongs to root, mode 0755" in proc.stderr, proc.stderr
        # the hint is one that works: not `sudo aorta-tui` (it would run as the user again)
        assert "`sudo aorta-tui" not in proc.stderr, proc.stderr
        assert f"`sudo chown -R {user.name} {kept}" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
        assert list(kept.iterdir()) == []


def test_root_never_writes_then_chowns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       user: SudoUser) -> None:
    """The drop makes the user the creator; nothing is made as root and given away after (a
    root-writes-then-chowns pattern is what issue 33 forbids). The file layer called as root
    with a sudo user in the environment (no drop: root's own process) leaves root's files
    root's: no chown to ``SUDO_UID`` any more."""
    from aorta_tui.core.atomic import atomic_write_bytes
    from aorta_tui.core.rundir_fs import RunDirFS
    from aorta_tui.store.run_create import create_run_dir

    monkeypatch.setenv("SUDO_UID", str(user.uid))
    monkeypatch.setenv("SUDO_GID", str(user.gid))
    atomic_write_bytes(tmp_path / "a" / "b" / "out.json", b"{}")
    run = create_run_dir(tmp_path / "out", "T", lambda d: (d / "run.json").write_text("{}"))
    with RunDirFS(run) as fs:
        os.close(fs.make_dirs("trials/c/t"))
        os.close(fs.open_log("trials/c/t/stdout.log"))
        fs.atomic_write_bytes("trials/c/t/result.json", b"{}")
    made = [p for p in tmp_path.rglob("*")]
    assert len(made) >= 10
    assert {p: p.lstat().st_uid for p in made} == {p: 0 for p in made}
