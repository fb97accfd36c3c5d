"""ROCm section: every install layout, never one hard-coded path.

Roots are looked for in ``$ROCM_PATH``/``$ROCM_HOME``/``$HIP_PATH``, ``/opt/rocm`` and
``/opt/rocm-*``, pip-installed TheRock wheels (``_rocm_sdk_*`` on ``sys.path``) and the HIP
runtime bundled inside a ROCm build of torch (``torch/lib``). The first root found is the
primary one; all are listed. Versions come from the install's own markers (``.info/version``,
``rocm_version.h``, the TheRock manifest, pip metadata) and each library's version header and
version API.
"""

from __future__ import annotations

import glob
import json
import os
import re
from typing import Any

from aorta_tui.envsnap import fields as F
from aorta_tui.envsnap.capture import libraries as L
from aorta_tui.envsnap.fields import Leaf

ROCM_LIBRARIES = {
    "hip": "libamdhip64",
    "rocblas": "librocblas",
    "hipblaslt": "libhipblaslt",
    "miopen": "libMIOpen",
    "rccl": "librccl",
}
# library -> (header relative to include/, macro prefix)
_HEADERS = {
    "hip": ("hip/hip_version.h", "HIP_VERSION"),
    "rocblas": ("rocblas/internal/rocblas-version.h", "ROCBLAS_VERSION"),
    "hipblaslt": ("hipblaslt/hipblaslt-version.h", "HIPBLASLT_VERSION"),
    "miopen": ("miopen/version.h", "MIOPEN_VERSION"),
    "rccl": ("rccl/rccl.h", "NCCL"),
}


_NO_ROOT = ("ROCm libraries found outside any ROCm root (a distribution package?): "
            "no version marker to read")


def find_roots() -> list[dict[str, str]]:
    roots: list[dict[str, str]] = []

    def add(path: str, layout: str, via: str) -> None:
        real = os.path.realpath(path)
        if os.path.isdir(real) and real not in {r["path"] for r in roots}:
            roots.append({"path": real, "layout": layout, "via": via})

    for var in ("ROCM_PATH", "ROCM_HOME", "HIP_PATH"):
        if os.environ.get(var):
            add(os.environ[var], "classic", f"env:{var}")
    if os.path.isdir("/opt/rocm"):
        add("/opt/rocm", "classic", "file:/opt/rocm")
    for path in sorted(glob.glob("/opt/rocm-*"), reverse=True):
        add(path, "classic", "file:/opt/rocm-*")
    for site in L.site_dirs():
        for path in sorted(glob.glob(os.path.join(site, "_rocm_sdk_*"))):
            if os.path.isdir(os.path.join(path, "lib")):
                add(path, "therock-wheel", "pip:_rocm_sdk_*")
        torch_lib = os.path.join(site, "torch", "lib")
        if glob.glob(os.path.join(torch_lib, "libamdhip64.so*")):
            add(os.path.join(site, "torch"), "torch-bundled", "pip:torch/lib")
    return roots


def root_version(root: dict[str, str]) -> Leaf:
    base = root["path"]
    leaf = F.read_file(f"{base}/.info/version")
    if leaf["state"] == "ok" and leaf["value"]:
        return leaf
    header = F.read_file(f"{base}/include/rocm-core/rocm_version.h")
    if header["state"] == "ok":
        d = parse_defines(header["value"])
        if "ROCM_VERSION_MAJOR" in d:
            return F.ok(f"{d['ROCM_VERSION_MAJOR']}.{d.get('ROCM_VERSION_MINOR', 0)}."
                        f"{d.get('ROCM_VERSION_PATCH', 0)}", header["source"])
    manifest = F.read_file(f"{base}/share/therock/therock_manifest.json")
    if manifest["state"] == "ok":
        try:
            data = json.loads(manifest["value"])
            version = data.get("rocm_version") or data.get("version")
            if version:
                return F.ok(str(version), manifest["source"])
        except ValueError:
            pass
    from importlib import metadata

    for dist in ("rocm-sdk-core", "rocm"):
        try:
            return F.ok(metadata.version(dist), f"pip:{dist}")
        except metadata.PackageNotFoundError:
            continue
    return F.unknown("no .info/version, rocm_version.h, TheRock manifest or rocm-sdk-core metadata",
                     f"file:{base}")


def parse_defines(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2).strip('"')
            for m in re.finditer(r"^\s*#define\s+(\w+)\s+(\S+)", text, re.M)}


def header_version(root: str, lib: str) -> Leaf:
    rel, prefix = _HEADERS[lib]
    leaf = F.read_file(f"{root}/include/{rel}")
    if leaf["state"] != "ok":
        return leaf
    d = parse_defines(leaf["value"])
    parts = [d.get(f"{prefix}_{p}") for p in ("MAJOR", "MINOR", "PATCH")]
    if parts[0] is None:
        return F.unknown(f"no {prefix}_MAJOR in header", leaf["source"])
    version = ".".join(p for p in parts if p is not None)
    extra = d.get(f"{prefix}_TWEAK") or d.get(f"{prefix}_GITHASH")
    return F.ok(f"{version}-{extra}" if extra else version, leaf["source"])


def discover(ldconfig: list[str]) -> tuple[list[dict[str, str]], dict[str, dict[str, Leaf]], dict[str, str]]:
    roots = find_roots()
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    for r in roots:
        dirs += [f"{r['path']}/lib", f"{r['path']}/lib64"]
    dirs += ldconfig
    searched = "LD_LIBRARY_PATH, ROCm roots' lib/, ldconfig cache"
    entries: dict[str, dict[str, Leaf]] = {}
    to_probe: dict[str, str] = {}
    for key, stem in ROCM_LIBRARIES.items():
        entry, path = L.library_entry(stem, list(dict.fromkeys(dirs)), searched)
        entries[key] = entry
        if path and key != "hipblaslt":  # hipBLASLt's version API needs a handle: header only
            to_probe[key] = path
    return roots, entries, to_probe


def finish(roots: list[dict[str, str]], entries: dict[str, dict[str, Leaf]], probe: dict[str, Any],
           probe_failure: Leaf | None, gfx_targets: Leaf) -> dict[str, Any]:
    searched = "$ROCM_PATH/$ROCM_HOME/$HIP_PATH, /opt/rocm*, pip _rocm_sdk_*, torch/lib"
    if not roots and all(e["path"]["state"] != "ok" for e in entries.values()):
        reason = f"no ROCm installation found (looked at {searched})"
        na = F.not_applicable(reason, "search")
        out: dict[str, Any] = {k: dict(na) for k in ("root", "layout", "roots", "version")}
        for key in ROCM_LIBRARIES:
            out[key] = {k: dict(na) for k in ("path", "content_hash", "other_copies",
                                               "header_version", "api_version")}
        out["gfx_targets"] = gfx_targets
        return out
    primary = roots[0] if roots else None
    out = {
        "roots": F.ok(roots, "search: " + searched),
        "root": F.ok(primary["path"], primary["via"]) if primary else F.unknown(_NO_ROOT, "search"),
        "layout": F.ok(primary["layout"], primary["via"]) if primary else F.unknown(_NO_ROOT, "search"),
        "version": root_version(primary) if primary else F.unknown(_NO_ROOT, "search"),
        "gfx_targets": gfx_targets,
    }
    libs = probe.get("libs", {})
    for key, entry in entries.items():
        entry = dict(entry)
        entry["header_version"] = (header_version(primary["path"], key) if primary
                                   else F.unknown("no ROCm root with headers", "search"))
        if entry["path"]["state"] != "ok":
            entry["api_version"] = dict(entry["path"])
        elif key == "hipblaslt":
            entry["api_version"] = F.not_applicable("hipBLASLt's version API needs a handle; see header_version", "")
        elif probe_failure is not None:
            entry["api_version"] = dict(probe_failure)
        else:
            res = libs.get(key) or {}
            src = f"api:{res.get('api', 'version API')}"
            entry["api_version"] = (F.error(res["error"], src) if "error" in res
                                    else F.ok(res.get("version"), src))
        out[key] = entry
    return out
