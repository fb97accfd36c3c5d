"""Find the shared library a uprobe must attach to: what the process maps, else the loader cache."""

from __future__ import annotations

import fnmatch
import functools
import os
import shutil
import subprocess
from pathlib import Path

from aorta_tui.core import spawn_gate


def mapped_libraries(pid: int) -> list[Path]:
    """Distinct file-backed executable mappings of ``pid`` (from ``/proc/PID/maps``)."""
    out: list[Path] = []
    seen: set[str] = set()
    try:
        text = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return out
    for ln in text.splitlines():
        parts = ln.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        path = parts[5].strip()
        if path.endswith(" (deleted)") or path in seen:
            continue
        seen.add(path)
        out.append(Path(path))
    return out


LD_SO_CACHE = Path("/etc/ld.so.cache")


def loader_cache() -> dict[str, Path]:
    """``soname -> path`` from ``ldconfig -p`` (x86-64 entries first).

    Every probe set's detection asks, so ldconfig runs once per state of ``/etc/ld.so.cache``
    (its mtime), not once per probe set."""
    try:
        stamp = LD_SO_CACHE.stat().st_mtime_ns
    except OSError:
        stamp = None
    return dict(_loader_cache(stamp))


@functools.lru_cache(maxsize=1)
def _loader_cache(_stamp: int | None) -> dict[str, Path]:
    exe = shutil.which("ldconfig") or ("/sbin/ldconfig" if os.path.exists("/sbin/ldconfig") else None)
    if exe is None:
        return {}
    try:
        text = spawn_gate.run([exe, "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    out: dict[str, Path] = {}
    for ln in text.splitlines():
        if "=>" not in ln:
            continue
        left, right = ln.split("=>", 1)
        name = left.strip().split(" ", 1)[0]
        if name not in out or "x86-64" in left:
            out.setdefault(name, Path(right.strip()))
    return out


def resolve_library(
    patterns: list[str], *, pid: int | None = None, explicit: Path | None = None
) -> tuple[Path | None, str]:
    """Return (path, how it was found) for the first library matching one of ``patterns``.

    Order: an explicit path; the libraries ``pid`` really maps; the loader cache; the
    directories on ``LD_LIBRARY_PATH``. Never a hard-coded install prefix.
    """
    if explicit is not None:
        p = Path(explicit)
        return (p.resolve(), "given with --lib") if p.exists() else (None, f"{p} does not exist")
    if pid is not None:
        for lib in mapped_libraries(pid):
            if any(fnmatch.fnmatch(lib.name, pat) for pat in patterns):
                return lib.resolve(), f"mapped by pid {pid} (/proc/{pid}/maps)"
    cache = loader_cache()
    for pat in patterns:
        for name, path in cache.items():
            if fnmatch.fnmatch(name, pat) and path.exists():
                return path.resolve(), "loader cache (ldconfig -p)"
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if not d or not os.path.isdir(d):
            continue
        for entry in sorted(os.listdir(d)):
            if any(fnmatch.fnmatch(entry, pat) for pat in patterns):
                return (Path(d) / entry).resolve(), "LD_LIBRARY_PATH"
    where = f"mapped by pid {pid}, " if pid is not None else ""
    return None, f"no library matching {', '.join(patterns)} ({where}in the loader cache or LD_LIBRARY_PATH)"
