"""``collect_paths``: copy the files a probe recipe names into the trial's directory.

Upstream AORTA's probe recipes list paths or globs (``${AORTA_ARTIFACT_DIR}/stdout.log``,
``/tmp/rccl-*.log``) whose files belong with the trial. After each trial, every pattern is
expanded with the trial's environment (``$NAME`` / ``${NAME}``), then globbed (``**`` spans
directories). A match inside the trial directory is already kept there; one outside is copied to
``collected/<its absolute path>`` under the trial directory. What was collected, and why
anything was not, goes into ``result.json`` under ``collected``.

Bounded and never blocking: regular files only (a FIFO or a device is skipped before it is read),
at most :data:`MAX_FILES` files, :data:`MAX_FILE_BYTES` per file and :data:`MAX_TOTAL_BYTES` per
trial. A symlink is followed only to a regular file. Collecting never fails a trial: a problem
is a note.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

MAX_FILES = 1000
MAX_FILE_BYTES = 64 << 20
MAX_TOTAL_BYTES = 256 << 20
COLLECTED_DIR = "collected"
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_CHUNK = 1 << 20


def expand(pattern: str, env: Mapping[str, str]) -> tuple[str, list[str]]:
    """``pattern`` with ``$NAME``/``${NAME}`` taken from ``env``; also the names it lacked."""
    missing: list[str] = []

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name in env:
            return env[name]
        missing.append(name)
        return m.group(0)

    return _VAR.sub(sub, pattern), missing


def collect_trial_paths(patterns: Sequence[str], trial_dir: Path, env: Mapping[str, str],
                        cwd: Path | None = None) -> dict[str, Any]:
    """Collect every file ``patterns`` match into ``trial_dir``; returns the record for
    ``result.json``: ``{"files": [{"pattern", "source", "path", "bytes"}], "notes": [...]}``."""
    files: list[dict[str, Any]] = []
    notes: list[str] = []
    total = 0
    root = trial_dir.resolve()
    base = cwd or Path.cwd()
    for pattern in patterns:
        text, missing = expand(pattern, env)
        if missing:
            notes.append(f"{pattern}: ${missing[0]} is not set in the trial's environment")
            continue
        matches = sorted(glob.glob(text if os.path.isabs(text) else str(base / text),
                                   recursive=True))
        if not matches:
            notes.append(f"{pattern}: nothing matched {text}")
        for source in matches:
            if len(files) >= MAX_FILES:
                notes.append(f"{pattern}: stopped after {MAX_FILES} files")
                break
            entry, note = _collect_one(pattern, Path(source), root, MAX_TOTAL_BYTES - total)
            if note:
                notes.append(note)
            if entry:
                files.append(entry)
                total += entry["bytes"] if entry["copied"] else 0
    return {"files": files, "notes": notes}


def _collect_one(pattern: str, source: Path, root: Path, budget: int
                 ) -> tuple[dict[str, Any] | None, str | None]:
    try:
        st = source.stat()  # follows a symlink: only to judge what it points at
    except OSError as exc:
        return None, f"{source}: cannot read it ({exc.strerror or exc})"
    if stat.S_ISDIR(st.st_mode):
        return None, f"{source} is a directory (write {pattern.rstrip('/')}/** for its files)"
    if not stat.S_ISREG(st.st_mode):
        return None, f"{source} is not a regular file; not read"
    resolved = source.resolve()
    if resolved == root or root in resolved.parents:
        rel = resolved.relative_to(root).as_posix()
        return {"pattern": pattern, "source": str(source), "path": rel, "bytes": st.st_size,
                "copied": False}, None
    if st.st_size > MAX_FILE_BYTES:
        return None, f"{source}: {st.st_size} bytes, over the {MAX_FILE_BYTES}-byte limit per file"
    if st.st_size > budget:
        return None, f"{source}: over the {MAX_TOTAL_BYTES}-byte limit of files collected per trial"
    dest = Path(COLLECTED_DIR, *resolved.parts[1:])
    try:
        copied = _copy_regular(resolved, root, dest, limit=min(MAX_FILE_BYTES, budget))
    except OSError as exc:
        return None, f"{source}: not collected ({exc.strerror or exc})"
    if copied is None:
        return None, f"{source} changed into something that is not a regular file; not read"
    return {"pattern": pattern, "source": str(source), "path": dest.as_posix(), "bytes": copied,
            "copied": True}, None


def _open_dest(root: Path, rel: Path) -> int:
    """Create ``root/rel`` for writing without following a symlink anywhere below ``root``:
    the trial (maybe running as root) could have planted ``collected/etc -> /etc``."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(root, flags)
    try:
        for part in rel.parts[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            sub = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = sub
        return os.open(rel.parts[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                       | os.O_CLOEXEC, 0o600, dir_fd=fd)
    finally:
        os.close(fd)


def _copy_regular(source: Path, root: Path, rel: Path, *, limit: int) -> int | None:
    """Copy at most ``limit`` bytes of the regular file ``source``; None if it is not one.
    The copy is readable by others only when the source is."""
    fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        out = _open_dest(root, rel)
        n = 0
        try:
            while n < limit and (chunk := os.read(fd, min(_CHUNK, limit - n))):
                os.write(out, chunk)
                n += len(chunk)
            os.fchmod(out, stat.S_IMODE(st.st_mode) & 0o644 | 0o600)
        finally:
            os.close(out)
        return n
    finally:
        os.close(fd)
