"""core/atomic.write_at: a special file at the name is refused, never replaced.

The CLI refuses such an ``-o`` before any work (cli/common.check_output_file); the writer itself
refuses too, for every caller that did not ask first: a reader's FIFO swapped for a regular file
loses the reader its pipe, and as root a device node would go."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from aorta_tui.core.atomic import atomic_write_bytes, atomic_write_json
from aorta_tui.core.errors import RunDirRefused


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()


@pytest.mark.parametrize("make, kind, test", [(_fifo, "FIFO", stat.S_ISFIFO), (_socket, "socket", stat.S_ISSOCK)])
def test_a_special_file_at_the_name_is_refused_and_kept(tmp_path: Path, make, kind: str, test) -> None:
    target = tmp_path / "q.json"
    make(target)
    with pytest.raises(RunDirRefused, match=kind) as exc:
        atomic_write_bytes(target, b"{}")
    assert exc.value.exit_code == 3 and str(target) in str(exc.value)
    assert test(os.lstat(target).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["q.json"]  # no temp file left behind


def test_a_regular_file_and_a_link_to_one_are_still_replaced(tmp_path: Path) -> None:
    target = tmp_path / "q.json"
    target.write_text("old")
    atomic_write_json(target, {"a": 1})
    assert target.read_text().startswith("{")
    real = tmp_path / "real.json"
    real.write_text("kept")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    atomic_write_bytes(link, b"new")  # the link's name gets the file; the file it named stays
    assert not link.is_symlink() and link.read_bytes() == b"new" and real.read_text() == "kept"
