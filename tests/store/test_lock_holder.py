"""The lock file's one line as a typed record (issue 36 item 3): one writer with the old bytes,
one reader that never guesses a pid from a damaged line (the run directory is untrusted)."""

from __future__ import annotations

import json
import os
import socket

from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.store.lock import LockHolder, describe_holder

PIDS = st.integers(1, 2**22)
HOSTS = st.one_of(st.none(), st.text(max_size=20))
TIMES = st.one_of(st.none(), st.floats(0, 4e9))


def _old_line(pid: int, host: str | None, at: float | None) -> bytes:
    """The writer before the type (store/lock.py, RunLock.acquire), verbatim."""
    line = json.dumps({"pid": pid, "host": host, "started_at": at}) + "\n"
    return line.encode()


@given(PIDS, HOSTS, TIMES)
def test_the_line_is_the_old_writers_bytes_and_reads_back_as_itself(pid, host, at) -> None:
    record = LockHolder(pid, host, at)
    assert record.to_line() == _old_line(pid, host, at)
    assert LockHolder.from_line(record.to_line()) == record


def test_mine_names_this_process_on_this_host() -> None:
    me = LockHolder.mine()
    assert (me.pid, me.host) == (os.getpid(), socket.gethostname())
    assert describe_holder(me) == f"pid {os.getpid()} on {socket.gethostname()}"


DAMAGED = [b"", b"{", b"[1]", b'"pid"', b'{"pid": 0}', b'{"pid": -4}', b'{"pid": true}',
           b'{"pid": "12"}', b'{"pid": 12.0}', b'{"pid": 12, "host": 5}',
           b'{"pid": 12, "started_at": "now"}', b'{"pid": 12, "started_at": false}', b"\xff\xfe"]


def test_a_damaged_line_is_the_unnamed_holder_never_a_guessed_pid() -> None:
    for line in DAMAGED:
        assert LockHolder.from_line(line) == LockHolder(), line
    assert describe_holder(LockHolder()).startswith("another process (its pid is not known")


@given(st.binary(max_size=64))
def test_any_bytes_read_as_a_record_with_a_real_pid_or_none(line: bytes) -> None:
    got = LockHolder.from_line(line)
    assert got.pid is None or (type(got.pid) is int and got.pid > 0)
    assert got.host is None or isinstance(got.host, str)
    assert got.started_at is None or type(got.started_at) is float


def test_a_held_lock_whose_line_nests_deep_is_held_by_an_unnamed_process(tmp_path) -> None:
    """A user who can write the run directory filled a held lock's line with 4,096 "[": every
    reader of the lock (attach, the TUI, bundle, cancel) died with RecursionError (exit 70)."""
    from aorta_tui.store.lock import RunLock, lock_holder

    lock = RunLock(tmp_path)
    lock.acquire()
    try:
        fd = os.open(tmp_path / ".lock", os.O_WRONLY)
        os.pwrite(fd, b"[" * 4096 + b"\n", 0)
        os.close(fd)
        assert LockHolder.from_line(b"[" * 4096) == LockHolder()
        assert lock_holder(tmp_path) == LockHolder()
    finally:
        lock.release()
    assert lock_holder(tmp_path) is None
