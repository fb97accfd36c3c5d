"""core/rundir_fs.py: the one file layer of a run directory, against hostile names and links.

Property-based: whatever name a damaged or hostile run directory (or a journal line) hands the
layer, it either refuses it (``RunDirRefused``, exit 3) or acts strictly beneath the root, and
no link is ever followed on the way.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.core import rundir_fs
from aorta_tui.core.errors import ExitCode
from aorta_tui.core.rundir_fs import RunDirFS, RunDirRefused, split_relative

SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

component = st.one_of(
    st.sampled_from(["..", ".", "", "/", "a/../..", "\x00", "x\x00y", "~", "-", " ", "trials",
                     "a" * 256, "é" * 128, "\udcff"]),
    st.text(min_size=0, max_size=40),
)
hostile = st.lists(component, min_size=0, max_size=5).map("/".join) | st.text(max_size=300)


def _inside(root: Path, created: Path) -> bool:
    return os.path.realpath(created).startswith(os.path.realpath(root) + os.sep)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@SETTINGS
@given(name=hostile)
def test_a_hostile_name_is_refused_or_stays_beneath_the_root(tmp_path: Path, name: str) -> None:
    root = tmp_path / "run"
    root.mkdir(exist_ok=True)
    outside_before = sorted(os.listdir(tmp_path))
    try:
        parts = split_relative(name)
    except RunDirRefused as exc:
        assert exc.exit_code == ExitCode.ENVIRONMENT and "refused" in exc.message
        return
    assert all(p not in ("", ".", "..") and "/" not in p and "\x00" not in p for p in parts)
    with RunDirFS(root) as fs:
        try:
            written = fs.atomic_write_bytes(name, b"x")
        except (RunDirRefused, UnicodeEncodeError, OSError):
            pass  # a name the file system refuses (a lone surrogate, a component too long)
        else:
            assert _inside(root, written) and written.read_bytes() == b"x"
    assert sorted(os.listdir(tmp_path)) == outside_before


@SETTINGS
@given(depth=st.integers(min_value=0, max_value=3), data=st.data())
def test_a_link_at_any_component_is_refused_and_never_followed(tmp_path: Path, depth: int,
                                                               data: st.DataObject) -> None:
    """A directory or the file itself a link to a directory outside: every operation refuses
    it, naming the link, and nothing appears outside."""
    base = tmp_path / f"case-{depth}-{len(list(tmp_path.iterdir()))}"
    root, outside = base / "run", base / "outside"
    outside.mkdir(parents=True)
    comps = ["a", "b", "c", "d"][: depth + 1]
    link_at = data.draw(st.integers(min_value=0, max_value=depth))
    here = root
    for i, c in enumerate(comps):
        if i == link_at:
            here.mkdir(parents=True, exist_ok=True)
            (here / c).symlink_to(outside)
            break
        here = here / c
    rel = "/".join(comps) + "/f.json"
    link = root.joinpath(*comps[: link_at + 1])
    op = data.draw(st.sampled_from(["write", "read", "log", "mkdir", "json"]))
    with RunDirFS(root) as fs, pytest.raises(RunDirRefused) as caught:
        if op == "write":
            fs.atomic_write_bytes(rel, b"{}")
        elif op == "read":
            fs.read_bytes(rel, what="record", limit=1 << 20)
        elif op == "log":
            os.close(fs.open_log(rel))
        elif op == "mkdir":
            os.close(fs.make_dirs(rel))
        else:
            fs.load_json(rel, what="record", limit=1 << 20)
    assert f"{link} is a symlink: refused" in caught.value.message
    assert list(outside.iterdir()) == []
    with RunDirFS(root) as fs:
        assert fs.read_json_or_none(rel) is None  # the forgiving reader: no record, no error


def test_fifo_device_and_oversized_files_are_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dev").symlink_to("/dev/zero")
    (tmp_path / "big").write_bytes(b"x" * 2048)
    with RunDirFS(tmp_path) as fs:
        with pytest.raises(RunDirRefused, match="fifo is a FIFO"):
            fs.read_bytes("fifo", what="record", limit=1 << 20)
        with pytest.raises(RunDirRefused, match="fifo is a FIFO"):
            fs.open_log("fifo")
        with pytest.raises(RunDirRefused, match="dev is a symlink"):
            fs.read_bytes("dev", what="record", limit=1 << 20)
        with pytest.raises(Exception, match="over the 1.0 KiB limit"):
            fs.read_bytes("big", what="record", limit=1024)


def test_a_hard_link_to_another_file_is_not_truncated(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    run = tmp_path / "run"
    run.mkdir()
    os.link(victim, run / "stdout.log")
    with RunDirFS(run) as fs, pytest.raises(RunDirRefused, match="2 hard links"):
        fs.open_log("stdout.log")
    assert victim.read_bytes() == b"keep me"


def test_atomic_write_sets_the_mode_on_the_descriptor_and_renames_beneath_the_root(tmp_path: Path) -> None:
    with RunDirFS(tmp_path) as fs:
        fs.atomic_write_bytes("x/y/secret.env", b"A=1\n", mode=0o600)
    f = tmp_path / "x" / "y" / "secret.env"
    assert f.read_bytes() == b"A=1\n" and stat.S_IMODE(f.stat().st_mode) == 0o600
    assert [p.name for p in f.parent.iterdir()] == ["secret.env"]  # no temp file left


def test_the_walk_without_openat2_refuses_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels (or seccomp filters) without openat2: the per-component O_NOFOLLOW walk."""
    monkeypatch.setitem(rundir_fs._openat2_state, "usable", False)
    (tmp_path / "outside").mkdir()
    (tmp_path / "run" / "trials").mkdir(parents=True)
    (tmp_path / "run" / "trials" / "cell").symlink_to(tmp_path / "outside")
    with RunDirFS(tmp_path / "run") as fs:
        with pytest.raises(RunDirRefused, match="trials/cell is a symlink: refused"):
            fs.atomic_write_bytes("trials/cell/trial-000/result.json", b"{}")
        fs.atomic_write_bytes("trials/ok/result.json", b"{}")
        assert fs.read_bytes("trials/ok/result.json", what="record", limit=10) == b"{}"
    assert list((tmp_path / "outside").iterdir()) == []


_READ_BOTH = """
import sys
from pathlib import Path
from aorta_tui.core.secrets import load_secret_hashes
from aorta_tui.executor.slurm import _Jobs
run = Path(sys.argv[1])
print(load_secret_hashes(run) is None, _Jobs.load(run).data["batches"] == {})
"""


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "link-out"])
def test_secret_hashes_and_slurm_jobs_never_hang_or_read_without_bound(tmp_path: Path, kind: str) -> None:
    """Issue 33: `secret-hashes.json` and `slurm/jobs.json` hung on a FIFO and read /dev/zero
    until memory ran out. Both are read through the file layer now: no record, at once."""
    import subprocess
    import sys

    run = tmp_path / "run"
    (run / "slurm").mkdir(parents=True)
    outside = tmp_path / "outside.json"
    outside.write_text('{"batches": {"x": 1}, "trials": {}, "kind": "aorta-tui/secret-hashes"}')
    for path in (run / "secret-hashes.json", run / "slurm" / "jobs.json"):
        if kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to("/dev/zero" if kind == "dev-zero" else outside)
    res = subprocess.run([sys.executable, "-c", _READ_BOTH, str(run)], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "True"]


def _rmtree_of_python_310(path: str, ignore_errors: bool = False, onerror: object = None) -> None:
    """shutil.rmtree's signature on Python 3.10 (the supported floor): no ``dir_fd``."""
    raise AssertionError("remove_tree must not need shutil.rmtree")


def test_remove_tree_unlinks_links_and_never_follows_them_on_python_310(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tree goes, depth first and descriptor-relative; a link inside it is removed itself and
    what it points to (outside the run) stays. Python 3.10's shutil.rmtree has no ``dir_fd``,
    so remove_tree must not call it (it once did, a TypeError on 3.10)."""
    import shutil
    monkeypatch.setattr(shutil, "rmtree", _rmtree_of_python_310)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    root = tmp_path / "run"
    (root / "trials" / "a" / "deep").mkdir(parents=True)
    (root / "trials" / "a" / "deep" / "f.log").write_text("x")
    (root / "trials" / "a" / "f.json").write_text("{}")
    (root / "trials" / "a" / "dirlink").symlink_to(outside, target_is_directory=True)
    (root / "trials" / "a" / "filelink").symlink_to(outside / "keep.txt")
    (root / "trials" / "b").mkdir()
    with RunDirFS(root) as fs:
        fs.remove_tree("trials/a")
        fs.remove_tree("trials/b")
    assert os.listdir(root / "trials") == []
    assert (outside / "keep.txt").read_text() == "keep"


@pytest.mark.parametrize("walk", ["make_dirs", "walk_open"])
def test_a_ctrl_c_right_after_a_close_is_still_a_ctrl_c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        walk: str) -> None:
    """A signal lands between bytecodes: a KeyboardInterrupt raised just after a directory's
    descriptor was closed once made the clean-up close it again (EBADF, exit 70 in place of
    130; a policy sweep's Ctrl-C hit it in CI). Each descriptor is closed once, none leaks.
    ``walk_open`` is the component walk used where openat2 is refused."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_text("x")
    real_close = os.close
    closed: list[int] = []

    def close_then_interrupt(fd: int) -> None:
        real_close(fd)
        closed.append(fd)
        if len(closed) == 1:
            raise KeyboardInterrupt  # the signal's handler, run right after the syscall

    with RunDirFS(tmp_path) as fs:
        before = set(os.listdir("/proc/self/fd"))
        monkeypatch.setattr(rundir_fs.os, "close", close_then_interrupt)
        try:
            with pytest.raises(KeyboardInterrupt):
                if walk == "make_dirs":
                    fs.make_dirs("a/b/c")
                else:
                    rundir_fs._walk_open(fs.fileno(), ("a", "b", "f"), os.O_RDONLY, 0)
        finally:
            monkeypatch.setattr(rundir_fs.os, "close", real_close)
        assert len(closed) == len(set(closed)) >= 2  # each closed once, the walk's own too
        assert set(os.listdir("/proc/self/fd")) <= before
