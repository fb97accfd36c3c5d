"""A run directory's files, reached only through descriptors: the one file layer of a run.

A run directory is untrusted input, even to the process that made it: its owner (or anyone who
can write it or a directory on the way) may swap any file or directory for a symlink, a FIFO or
a device at any moment, between our check and our use. So nothing of a run directory is opened
by path. :class:`RunDirFS` holds a descriptor of the run's root and reaches everything beneath
it relative to that descriptor:

- **no link is followed beneath the root**: ``openat2`` with
  ``RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS`` where the kernel has it, else a
  walk that opens each component with ``O_NOFOLLOW`` relative to its parent's descriptor; a
  relative path is checked first (no ``..``, no absolute path, no NUL, no empty component);
- **acts on descriptors, never on paths**: directories are made with ``mkdirat`` and opened
  before anything goes in them; the mode is set with ``fchmod`` on the open file (never a
  chown: under sudo the tool is already the user); a temp file is made, renamed and its directory fsynced relative to the directory's
  descriptor (``core/atomic.write_at``);
- **checks before reading**: a file is read only when ``fstat`` of the opened descriptor says
  it is a regular file within the size limit (``core/inputs.read_fd_bounded``, the reader every
  input file goes through); a FIFO never blocks the open (``O_NONBLOCK``);
- **says what it refused**: :class:`RunDirRefused` (exit 3) names the path and what it is
  ("RUN/trials/a/trial-002/stdout.log is a symlink: refused").

The root itself is the path the user named, so it may be reached through a link; nothing under
it is.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from aorta_tui.core import atomic
from aorta_tui.core.errors import AortaError, RunDirRefused, UsageError
from aorta_tui.core.inputs import (
    Json,
    MiB,
    decode_utf8,
    describe_kind,
    parse_json_text,
    read_fd_bounded,
)

_O_NOCTTY = getattr(os, "O_NOCTTY", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | _O_NOCTTY
_FILE_BASE = os.O_NOFOLLOW | os.O_CLOEXEC | _O_NOCTTY | os.O_NONBLOCK
MAX_NAME = 255  # NAME_MAX of every Linux file system the tool writes on

# openat2(2): struct open_how and the resolve flags (linux/openat2.h); the syscall number is
# the same on every architecture that has it (the unified table from 5.x on).
_SYS_OPENAT2 = 437
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08


def _remove_tree_at(dir_fd: int, name: str) -> None:
    """Remove the directory ``name`` of ``dir_fd`` and everything in it, each entry relative to
    its parent's descriptor and no link followed (a link is unlinked itself; a directory swapped
    for a link on the way fails the ``O_NOFOLLOW`` open). shutil.rmtree takes ``dir_fd`` only
    from Python 3.11, and 3.10 is supported."""
    fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    try:
        with os.scandir(fd) as entries:
            names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        for child, is_dir in names:
            if is_dir:
                _remove_tree_at(fd, child)
            else:
                os.unlink(child, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_openat2_state: dict[str, Any] = {"usable": None, "libc": None}
__all__ = ["RunDirFS", "RunDirRefused", "rundir_refused", "split_relative"]


def rundir_refused(path: str, what: str) -> RunDirRefused:
    """The one refusal for something in a run directory that is not what the tool expects."""
    return RunDirRefused(
        f"{path} is {what}: refused (a run directory's files are never followed out of it)",
        hint=f"someone who can write the run directory put it there; look at it (`ls -la "
             f"{os.path.dirname(path) or '.'}`), move it away and run the command again")


def split_relative(rel: str | os.PathLike[str]) -> tuple[str, ...]:
    """The components of a path inside a run directory, or :class:`RunDirRefused` for one that
    could name anything else (absolute, ``..``, NUL, an empty or over-long component)."""
    text = os.fspath(rel)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    parts = tuple(p for p in PurePosixPath(text).parts if p != ".")
    bad = (not text or text.startswith("/") or "\x00" in text or not parts
           or any(p in ("..", "") or "/" in p or len(os.fsencode(p)) > MAX_NAME for p in parts))
    if bad:
        raise RunDirRefused(f"{text[:200]!r} is not a path inside the run directory: refused",
                            hint="a run directory's files are named by aorta-tui; this name was not")
    return parts


def _openat2(dir_fd: int, rel: str, flags: int, mode: int) -> int | None:
    """``openat2`` beneath ``dir_fd`` with no link followed; ``None`` where the kernel (or a
    seccomp filter) does not offer it, so the caller walks instead."""
    if _openat2_state["usable"] is False:
        return None
    libc = _openat2_state["libc"]
    if libc is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long  # syscall(2) is variadic: every argument a long
        _openat2_state["libc"] = libc
    how = _OpenHow(flags, mode if flags & os.O_CREAT else 0,
                   _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)
    fd = libc.syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_long(dir_fd),
                      ctypes.c_char_p(os.fsencode(rel)), ctypes.byref(how),
                      ctypes.c_size_t(ctypes.sizeof(how)))
    if fd >= 0:
        _openat2_state["usable"] = True
        return int(fd)
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM) and not _openat2_state["usable"]:
        _openat2_state["usable"] = False
        return None
    raise OSError(err, os.strerror(err), rel)


def _walk_open(dir_fd: int, parts: tuple[str, ...], flags: int, mode: int) -> int:
    """Open ``parts`` beneath ``dir_fd`` one component at a time, each with ``O_NOFOLLOW``."""
    cur = dir_fd
    try:
        for part in parts[:-1]:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=cur)
            # the new descriptor is held before the old one is closed: a Ctrl-C between the
            # two must not make the clean-up below close a descriptor twice (EBADF, exit 70)
            prev, cur = cur, nxt
            if prev != dir_fd:
                os.close(prev)
        return os.open(parts[-1], flags | os.O_NOFOLLOW, mode, dir_fd=cur)
    finally:
        if cur != dir_fd:
            os.close(cur)


class RunDirFS:
    """The run directory ``root``, held by a descriptor; every path is relative to it.

    Use ``with RunDirFS(run_dir) as fs:`` or keep one for a run's length (``RunStore.fs``) and
    :meth:`close` it. Paths given to its methods are relative (``"trials/a/trial-001"``) or
    absolute paths under ``root`` as the tool spelled them (``run_dir / "env"``).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._abs_root = Path(os.path.abspath(root))
        try:  # the user named the root: it may be reached through a link; nothing beneath it
            self._fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | _O_NOCTTY)
        except NotADirectoryError:
            raise RunDirRefused(f"{self.root} is not a directory: refused",
                                hint="pass a run directory") from None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:  # a reader that kept no handle (RunStore for one look) leaks nothing
        if getattr(self, "_fd", -1) >= 0:
            self.close()

    def __enter__(self) -> RunDirFS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fileno(self) -> int:
        return self._fd

    # -- names -------------------------------------------------------------------------------

    def rel(self, path: str | os.PathLike[str]) -> tuple[str, ...]:
        """``path``'s components beneath the root: a path as the tool spelled it (the root
        joined with more, relative or absolute) or one relative to the root."""
        p = Path(path)
        for base in (self.root, self._abs_root):
            try:
                return split_relative(p.relative_to(base))
            except ValueError:
                continue
        if p.is_absolute():
            raise RunDirRefused(f"{p} is outside the run directory {self.root}: refused",
                                hint="a run's files are written inside its directory")
        return split_relative(p)

    def display(self, parts: tuple[str, ...]) -> str:
        return str(self.root.joinpath(*parts))

    # -- opening -----------------------------------------------------------------------------

    def open_at(self, path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
        """A descriptor of ``path`` beneath the root, no link followed on the way or at the end;
        a refusal names the component that is a link or not a directory."""
        parts = self.rel(path)
        flags |= _FILE_BASE if not flags & os.O_DIRECTORY else os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = _openat2(self._fd, "/".join(parts), flags, mode)
            return fd if fd is not None else _walk_open(self._fd, parts, flags, mode)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EXDEV, errno.ENXIO, errno.EISDIR):
                raise self._locate(parts, exc) from None
            exc.filename = self.display(parts)
            raise

    def _locate(self, parts: tuple[str, ...], exc: OSError) -> AortaError:
        """Which component made the open fail, and what it is instead."""
        for i in range(1, len(parts) + 1):
            try:
                st = os.stat("/".join(parts[:i]), dir_fd=self._fd, follow_symlinks=False)
            except OSError:
                break
            last = i == len(parts)
            if stat.S_ISLNK(st.st_mode):
                return rundir_refused(self.display(parts[:i]), "a symlink")
            if not last and not stat.S_ISDIR(st.st_mode):
                return rundir_refused(self.display(parts[:i]), f"{describe_kind(st.st_mode)}, not a directory")
            if last and exc.errno in (errno.ENXIO, errno.EISDIR, errno.ENOTDIR):
                return rundir_refused(self.display(parts), describe_kind(st.st_mode))
        return rundir_refused(self.display(parts), f"not reachable without a link ({exc.strerror})")

    @contextmanager
    def directory(self, path: str | os.PathLike[str], *, create: bool = False) -> Iterator[int]:
        """A descriptor of the directory ``path`` (made with its parents when ``create``)."""
        fd = self.make_dirs(path) if create else self.open_at(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            yield fd
        finally:
            os.close(fd)

    def make_dirs(self, path: str | os.PathLike[str], mode: int = 0o755) -> int:
        """``mkdir -p`` beneath the root, relative to each parent's descriptor; returns the
        last one's descriptor. They are the process's own: under sudo the tool already runs as
        the invoking user (``privsep/boot.py``), so nothing is made as root and given away."""
        cur = os.dup(self._fd)
        try:
            for i, part in enumerate(self.rel(path)):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, mode, dir_fd=cur)
                try:
                    nxt = os.open(part, _DIR_FLAGS, dir_fd=cur)
                except OSError as exc:
                    raise self._locate(self.rel(path)[: i + 1], exc) from None
                # as in _walk_open: a KeyboardInterrupt landing between a close and the
                # assignment made the handler close ``cur`` twice (EBADF hid the Ctrl-C: exit 70
                # in place of 130, a policy sweep stopped as its next trial's directory was made)
                prev, cur = cur, nxt
                os.close(prev)
            return cur
        except BaseException:
            os.close(cur)
            raise

    @contextmanager
    def _parent(self, path: str | os.PathLike[str], *, create: bool) -> Iterator[tuple[int, str]]:
        parts = self.rel(path)
        if len(parts) == 1:
            yield self._fd, parts[0]
            return
        with self.directory("/".join(parts[:-1]), create=create) as fd:
            yield fd, parts[-1]

    # -- reading -----------------------------------------------------------------------------

    def lstat(self, path: str | os.PathLike[str]) -> os.stat_result | None:
        """What ``path`` is (a link itself, not its target), or ``None`` when it is missing."""
        try:
            with self._parent(path, create=False) as (fd, name):
                return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, RunDirRefused):
            return None

    def is_file(self, path: str | os.PathLike[str]) -> bool:
        st = self.lstat(path)
        return st is not None and stat.S_ISREG(st.st_mode)

    def open_read(self, path: str | os.PathLike[str], *, missing_ok: bool = False) -> BinaryIO | None:
        """A regular file beneath the root opened for reading (a stream a reader walks itself,
        such as a trial's log); a FIFO, a device or a socket is refused without waiting."""
        try:
            fd = self.open_at(path, os.O_RDONLY)
        except FileNotFoundError:
            if missing_ok:
                return None
            raise
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):  # a FIFO (opened without waiting), a device, a socket
                raise rundir_refused(self.display(self.rel(path)), describe_kind(mode))
            os.set_blocking(fd, True)  # a regular file never blocks; the flag only guarded the open
        except BaseException:
            os.close(fd)
            raise
        return os.fdopen(fd, "rb")

    def read_bytes(self, path: str | os.PathLike[str], *, what: str, limit: int,
                   missing_ok: bool = False) -> bytes | None:
        """The bytes of a regular file beneath the root, at most ``limit`` of them."""
        fh = self.open_read(path, missing_ok=missing_ok)
        if fh is None:
            return None
        with fh:
            return read_fd_bounded(fh, where=self.display(self.rel(path)), what=what, limit=limit)

    def load_json(self, path: str | os.PathLike[str], *, what: str, limit: int) -> Json:
        """A JSON file of the run parsed, with ``core/inputs``' located errors (exit 2) for
        bad text; missing: ``FileNotFoundError``; not a regular file: :class:`RunDirRefused`."""
        where = self.display(self.rel(path))
        raw = self.read_bytes(path, what=what, limit=limit)
        assert raw is not None
        text = decode_utf8(raw, where=where, what=what)
        if not text.strip():
            raise UsageError(f"{where}: the {what} file is empty")
        return parse_json_text(text, where=where, what=what)

    def read_json_or_none(self, path: str | os.PathLike[str], *, limit: int = 64 * MiB) -> Any:
        """A record decoded, or ``None`` when it is missing, refused, over ``limit`` or not
        JSON: for readers to whom a damaged record is no record (the trial runs again)."""
        try:
            data = self.read_bytes(path, what="record", limit=limit, missing_ok=True)
            return None if data is None else json.loads(data)
        except (AortaError, OSError, ValueError, RecursionError):
            return None

    # -- writing -----------------------------------------------------------------------------

    def open_log(self, path: str | os.PathLike[str], mode: int = 0o644, *, append: bool = False) -> int:
        """A file to write a stream into, emptied (or appended to): created or reopened without
        following a link, refused unless it is a regular file with one link (a hard link to
        another file is not ours to truncate or grow), then cut to nothing on the descriptor."""
        flags = os.O_WRONLY | os.O_CREAT | _FILE_BASE | (os.O_APPEND if append else 0)
        with self._parent(path, create=True) as (dir_fd, name):
            try:
                fd = os.open(name, flags, mode, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                    raise self._locate(self.rel(path), exc) from None
                raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
                what = describe_kind(st.st_mode) if not stat.S_ISREG(st.st_mode) else \
                    f"a file with {st.st_nlink} hard links"
                raise rundir_refused(self.display(self.rel(path)), what)
            if not append:
                os.ftruncate(fd, 0)
            os.set_blocking(fd, True)
            return fd
        except BaseException:
            os.close(fd)
            raise

    def atomic_write_bytes(self, path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644,
                           durable: bool = True) -> Path:
        """``data`` at ``path`` atomically: temp file, fchmod, rename, all relative to the
        parent's descriptor (made when missing)."""
        with self._parent(path, create=True) as (dir_fd, name):
            atomic.write_at(dir_fd, name, data, mode=mode, durable=durable,
                            where=self.display(self.rel(path)))
        return self.root.joinpath(*self.rel(path))

    def atomic_write_json(self, path: str | os.PathLike[str], obj: object, *, durable: bool = True) -> Path:
        return self.atomic_write_bytes(path, atomic.json_bytes(obj), durable=durable)

    def atomic_write_text(self, path: str | os.PathLike[str], text: str) -> Path:
        return self.atomic_write_bytes(path, text.encode("utf-8"))

    def remove_tree(self, path: str | os.PathLike[str]) -> None:
        """Remove ``path`` (a link is removed itself, never what it points to)."""
        with self._parent(path, create=False) as (dir_fd, name):
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                _remove_tree_at(dir_fd, name)
            else:
                os.unlink(name, dir_fd=dir_fd)

    def rename(self, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        """Rename within the run directory, relative to both parents' descriptors."""
        with self._parent(src, create=False) as (sfd, sname), \
                self._parent(dst, create=True) as (dfd, dname):
            os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)

    def copy_file(self, src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
                  limit: int) -> None:
        data = self.read_bytes(src, what="file", limit=limit)
        assert data is not None
        self.atomic_write_bytes(dst, data)


def refuse_unless_regular(fs: RunDirFS, path: str | os.PathLike[str]) -> None:
    """:class:`RunDirRefused` unless ``path`` beneath the root is a regular file reached without
    a link: for a file another module must open by path (a recipe: its loader keeps its path)."""
    st = fs.lstat(path)
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise rundir_refused(fs.display(fs.rel(path)), "a symlink")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise rundir_refused(fs.display(fs.rel(path)), describe_kind(st.st_mode))
