"""cli/quiet_start's handler (Ctrl-C, SIGTERM or SIGHUP before a command installs its own) leaves
with exit 130 even when its one line cannot be written: after a hangup the terminal is gone and
the write fails with EIO. It raised instead, inside `aorta-tui edit`'s running TUI: an internal
error and a traceback file in /tmp."""

from __future__ import annotations

import errno
from types import SimpleNamespace

import pytest

from aorta_tui.cli import quiet_start


class _Exited(Exception):
    pass


@pytest.mark.parametrize("write_fails", [False, True])
def test_the_handler_leaves_with_130_whether_or_not_its_line_can_be_written(
        monkeypatch: pytest.MonkeyPatch, write_fails: bool) -> None:
    written: list[bytes] = []

    def write(fd: int, data: bytes) -> int:
        if write_fails:
            raise OSError(errno.EIO, "Input/output error")
        written.append(data)
        return len(data)

    def _exit(code: int) -> None:
        raise _Exited(code)

    monkeypatch.setattr(quiet_start, "os", SimpleNamespace(write=write, _exit=_exit))
    with pytest.raises(_Exited) as exited:
        quiet_start._interrupted_while_starting(1, None)
    assert exited.value.args == (130,)
    assert written == ([] if write_fails else [b"interrupted\n"])
