"""Find GPU shared libraries the way the dynamic loader would, and fingerprint them.

Search order mirrors a process started in this environment: ``LD_LIBRARY_PATH``, the
pip-installed vendor wheels on ``sys.path`` (``nvidia/*/lib``, ``_rocm_sdk_*/lib``), the
toolkit homes (``$CUDA_HOME``, ``/usr/local/cuda``, ROCm roots), then the ``ldconfig`` cache.
The first directory that has the library wins, as it would for ``dlopen``.

Fingerprint: files up to 64 MiB are hashed whole; larger ones (cuBLASLt, cuDNN engines are
hundreds of MiB) by sha256 over size + first and last 4 MiB, which is what makes the probe
fast. The source string says which method produced each hash.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import sys

from aorta_tui.envsnap import fields as F
from aorta_tui.envsnap.fields import Leaf

FULL_HASH_LIMIT = 64 << 20
SAMPLE = 4 << 20


def _lib_regex(stem: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(stem)}\.so(\.\d+)*$")


def site_dirs() -> list[str]:
    return [p for p in sys.path if p and os.path.isdir(p) and p.endswith(("site-packages", "dist-packages"))]


def wheel_lib_dirs(patterns: tuple[str, ...]) -> list[str]:
    dirs: list[str] = []
    for site in site_dirs():
        for pattern in patterns:
            dirs.extend(sorted(glob.glob(os.path.join(site, pattern))))
    return [d for d in dirs if os.path.isdir(d)]


def ldconfig_dirs(timeout_s: float) -> list[str]:
    result = F.run_command(["ldconfig", "-p"], timeout_s=timeout_s)
    if not result.ok:
        for candidate in ("/sbin/ldconfig", "/usr/sbin/ldconfig"):
            if os.path.exists(candidate):
                result = F.run_command([candidate, "-p"], timeout_s=timeout_s)
                break
    dirs: list[str] = []
    for line in result.output.splitlines():
        m = re.search(r"=>\s*(\S+)$", line)
        if m:
            d = os.path.dirname(m.group(1))
            if d not in dirs:
                dirs.append(d)
    return dirs


def find_library(stem: str, search_dirs: list[str]) -> tuple[str | None, list[str]]:
    """First match in search order (the loader's choice) and every other distinct copy."""
    rx = _lib_regex(stem)
    hits: list[str] = []
    for d in search_dirs:
        try:
            names = sorted(n for n in os.listdir(d) if rx.match(n))
        except OSError:
            continue
        if not names:
            continue
        # Prefer the versioned soname over the dev symlink (libfoo.so), highest version first.
        names.sort(key=lambda n: (n.count("."), [int(x) for x in re.findall(r"\d+", n)]), reverse=True)
        real = os.path.realpath(os.path.join(d, names[0]))
        if real not in hits:
            hits.append(real)
    return (hits[0] if hits else None), hits[1:]


def fingerprint(path: str) -> Leaf:
    try:
        size = os.path.getsize(path)
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            if size <= FULL_HASH_LIMIT:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
                method = "sha256 of the whole file"
            else:
                h.update(str(size).encode())
                h.update(fh.read(SAMPLE))
                fh.seek(size - SAMPLE)
                h.update(fh.read(SAMPLE))
                method = "sha256 of size + first and last 4 MiB"
    except PermissionError:
        return F.error(f"permission denied reading {path}", f"file:{path}",
                       needs_root=os.geteuid() != 0)
    except OSError as exc:
        return F.error(f"hashing {path} failed: {exc.strerror or exc}", f"file:{path}")
    return F.ok(h.hexdigest()[:16], f"file:{path} ({method}, 16 hex)")


def library_entry(stem: str, search_dirs: list[str], searched: str) -> tuple[dict[str, Leaf], str | None]:
    path, others = find_library(stem, search_dirs)
    if path is None:
        reason = f"{stem}.so not found ({searched})"
        return {"path": F.not_applicable(reason, "search"), "content_hash": F.not_applicable(reason, "search"),
                "other_copies": F.not_applicable(reason, "search")}, None
    return {
        "path": F.ok(path, "search: " + searched),
        "content_hash": fingerprint(path),
        "other_copies": F.ok(others, "search: " + searched),
    }, path
