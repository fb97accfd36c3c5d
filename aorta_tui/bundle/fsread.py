"""Reading an input's files through directory descriptors, never through path names.

A run directory may change while it is bundled (a trial still writes; a hostile process may
swap a subdirectory for a symlink to ``/etc`` after it was listed). Every directory is opened
relative to its parent's descriptor with ``O_NOFOLLOW | O_DIRECTORY``, every file relative to
its directory's descriptor with ``O_NOFOLLOW | O_NOCTTY | O_CLOEXEC | O_NONBLOCK``, and every
check (type, links, owner, filesystem, size) is made with ``fstat`` on the opened descriptor:
a name swapped after the listing can only fail to open, never lead outside the input.

This is the bundle's one place for descriptor-relative reading (the lead may point it at the
shared run-directory file layer later: :func:`walk_files` and :func:`read_open` are the API).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC | os.O_NONBLOCK
_CHUNK = 1024 * 1024


@dataclass
class Found:
    """One entry of an input: its bytes, or why it is left out; ``st`` from ``fstat``."""

    rel: str
    data: bytes | None
    skipped: str | None
    st: os.stat_result | None


def _why_left_out(st: os.stat_result, owner: os.stat_result, limit: int) -> str | None:
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_nlink > 1:
        return (f"a hard link ({st.st_nlink} names for one file): its content may be a file "
                "outside the run directory; left out")
    if st.st_uid != owner.st_uid:
        return (f"owned by uid {st.st_uid}, not by the run's owner (uid {owner.st_uid}): "
                "left out")
    if st.st_dev != owner.st_dev:
        return "on another filesystem mounted inside the run directory: left out"
    if st.st_size > limit:  # the logical size: a sparse file is refused before any read
        return f"{st.st_size} bytes, over the {limit} bytes a bundle reads"
    return None


def read_open(fd: int, owner: os.stat_result, limit: int) -> tuple[bytes | None, str | None,
                                                                   os.stat_result]:
    """The bytes of an opened file (at most ``limit``, counted in bytes read, so a file that
    grows is cut at the limit and refused), or why it is left out; closes ``fd``."""
    try:
        st = os.fstat(fd)
        why = _why_left_out(st, owner, limit)
        if why is not None:
            return None, why, st
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            return None, f"grew past the {limit} bytes a bundle reads while it was read", st
        return b"".join(chunks), None, st
    finally:
        os.close(fd)


def _open_at(name: str, dir_fd: int) -> tuple[int | None, str | None]:
    """A descriptor of ``name`` in ``dir_fd`` (never through a symlink), or why not."""
    try:
        return os.open(name, _FILE_FLAGS, dir_fd=dir_fd), None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            try:
                target = os.readlink(name, dir_fd=dir_fd)
            except OSError:
                target = "?"
            return None, f"a symlink (to {shown_name(target)[:200]}): not followed"
        return None, f"cannot read it: {exc.strerror or exc}"


def read_at(dir_fd: int, name: str, rel: str, owner: os.stat_result, limit: int) -> Found:
    try:  # a FIFO or a device is never opened (a tape rewinds on open); fstat decides after
        first = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        return Found(rel, None, f"cannot read it: {exc.strerror or exc}", None)
    if not stat.S_ISREG(first.st_mode) and not stat.S_ISLNK(first.st_mode):
        return Found(rel, None, "not a regular file", first)
    fd, why = _open_at(name, dir_fd)
    if fd is None:
        return Found(rel, None, why, None)
    data, why, st = read_open(fd, owner, limit)
    return Found(rel, data, why, st)


def walk_files(root: str, owner: os.stat_result, limit: int) -> Iterator[Found]:
    """Every entry under the directory ``root`` (sorted, depth first), read through
    descriptors; a subdirectory is entered only through a descriptor opened without
    following a symlink and of the input's filesystem."""
    top = os.open(root, _DIR_FLAGS)
    try:
        yield from _walk(top, "", owner, limit)
    finally:
        os.close(top)


def _walk(dir_fd: int, prefix: str, owner: os.stat_result, limit: int) -> Iterator[Found]:
    try:
        names = sorted(os.listdir(dir_fd))
    except OSError as exc:
        yield Found(prefix.rstrip("/") or ".", None, f"cannot list it: {exc.strerror}", None)
        return
    for name in names:
        rel = prefix + name
        try:
            sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                yield Found(rel, None, f"cannot read it: {exc.strerror or exc}", None)
                continue
            yield read_at(dir_fd, name, rel, owner, limit)  # a file, a link, a FIFO ...
            continue
        try:
            st = os.fstat(sub)
            if st.st_dev != owner.st_dev:
                yield Found(rel, None, "on another filesystem mounted inside the run "
                            "directory: left out", st)
                continue
            yield from _walk(sub, rel + "/", owner, limit)
        finally:
            os.close(sub)


def read_one(path: str, owner: os.stat_result, limit: int) -> Found:
    """A single file given by the user (a queue result), opened without following a link."""
    parent, name = os.path.split(os.path.abspath(path))
    dir_fd = os.open(parent or "/", _DIR_FLAGS & ~os.O_NOFOLLOW)
    try:
        return read_at(dir_fd, name, name, owner, limit)
    finally:
        os.close(dir_fd)


def shown_name(name: str) -> str:
    """A file name fit for the manifest and a terminal: bytes that are not UTF-8 (kept by the
    OS as surrogates) written as ``\\xNN``, control characters escaped."""
    raw = name.encode("utf-8", "surrogateescape")
    text = raw.decode("utf-8", "backslashreplace")
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
                   for ch in text)
