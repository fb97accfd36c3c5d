"""Find rocprofiler-sdk and build the HIP collector (``rocprof_collector.c``), cached per version.

The ROCm twin of :mod:`aorta_tui.trace.device.build` (whose compiler search and cache folder it
reuses). Built on the machine that runs it, against the rocprofiler-sdk found there, because
rocprofiler-sdk's record structs and operation ids change between versions. Where it comes
from, in order:

1. ``$AORTA_ROCPROFILER_ROOT`` (an install prefix: ``include/rocprofiler-sdk/version.h``,
   ``include/hsa/hsa_amd_tool.h``, ``include/hsakmt/hsakmttypes.h``, ``lib*/librocprofiler-sdk.so*``);
2. ``$ROCM_PATH``, ``/opt/rocm``, ``/opt/rocm-*`` (newest first).

No package registry has these headers (not PyPI, not Debian: its ROCm 5.2 HSA headers predate
``hsa_amd_tool.h``), so they come with a ROCm installation (ROCm 6.2 or later) or nowhere.

The collector has never run on AMD hardware: :data:`NEVER_RUN` says so wherever it is offered.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from aorta_tui.core.errors import EnvironmentProblem
from aorta_tui.trace.device.build import cache_root, find_compiler, run_compiler

SOURCE = "rocprof_collector.c"
LIBRARY = "libaorta_rocprof.so"
NEVER_RUN = "never run on AMD hardware"
# beside each header: what it is, for messages
NEEDED_HEADERS = {
    "rocprofiler-sdk/version.h": "rocprofiler-sdk (an installed one: a source checkout has only version.h.in)",
    "rocprofiler-sdk/buffer_tracing.h": "rocprofiler-sdk",
    "rocprofiler-sdk/registration.h": "rocprofiler-sdk",
    "hsa/hsa_amd_tool.h": "the HSA runtime headers (ROCR-Runtime, ROCm 6.x)",
    "hsakmt/hsakmttypes.h": "the HSA thunk headers (libhsakmt)",
}
FIX = ("install ROCm 6.2 or later with rocprofiler-sdk (its headers are in /opt/rocm/include), or "
       "point AORTA_ROCPROFILER_ROOT at a prefix with include/ and lib/; no package registry ships "
       "them; `--device-timestamps off` traces launches only")


@dataclass(frozen=True)
class RocprofilerInstall:
    include: Path  # has rocprofiler-sdk/, hsa/, hsakmt/
    lib: Path | None  # librocprofiler-sdk.so*; None: headers only (compile checks, no build)
    version: int  # ROCPROFILER_VERSION of the headers: 10000*major + 100*minor + patch
    version_string: str
    origin: str

    def to_dict(self) -> dict[str, object]:
        return {"include": str(self.include), "lib": str(self.lib) if self.lib else None,
                "version": self.version, "version_string": self.version_string, "origin": self.origin}


@dataclass
class RocprofBuildResult:
    library: Path
    rocprofiler: RocprofilerInstall
    compiler: str
    cached: bool

    def to_dict(self) -> dict[str, object]:
        return {"library": str(self.library), "rocprofiler": self.rocprofiler.to_dict(),
                "compiler": self.compiler, "cached": self.cached, "hardware": NEVER_RUN}


def header_version(include: Path) -> tuple[int, str] | None:
    """(ROCPROFILER_VERSION, "M.m.p") from an installed version.h, or None."""
    try:
        text = (include / "rocprofiler-sdk" / "version.h").read_text(errors="replace")
    except OSError:
        return None
    parts = [re.search(rf"#define\s+ROCPROFILER_VERSION_{k}\s+(\d+)\b", text) for k in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        return None
    major, minor, patch = (int(m.group(1)) for m in parts if m)
    return 10000 * major + 100 * minor + patch, f"{major}.{minor}.{patch}"


def _library_in(prefix: Path) -> Path | None:
    for libdir in ("lib", "lib64"):
        names = sorted(glob.glob(str(prefix / libdir / "librocprofiler-sdk.so*")), key=len)
        real = [Path(n) for n in names if Path(n).is_file()]
        if real:
            return real[0]
    return None


def _prefixes() -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = []
    if root := os.environ.get("AORTA_ROCPROFILER_ROOT"):
        out.append((Path(root), f"$AORTA_ROCPROFILER_ROOT={root}"))
    if rocm := os.environ.get("ROCM_PATH"):
        out.append((Path(rocm), f"$ROCM_PATH={rocm}"))
    out.append((Path("/opt/rocm"), "/opt/rocm"))
    out += [(Path(p), p) for p in sorted(glob.glob("/opt/rocm-*"), reverse=True)]
    return out


def _missing(include: Path) -> list[str]:
    return [f"{rel} ({what})" for rel, what in NEEDED_HEADERS.items() if not (include / rel).is_file()]


def find_rocprofiler(*, need_library: bool = True) -> RocprofilerInstall:
    """The rocprofiler-sdk to build against, or :class:`EnvironmentProblem` (exit 3) saying what
    is missing where, and the fix. ``need_library=False``: headers suffice (compile checks)."""
    problems: list[str] = []
    for prefix, origin in _prefixes():
        include = prefix / "include"
        if not prefix.is_dir():
            if origin.startswith("$"):
                problems.append(f"{origin}: no such folder")
            continue
        missing = _missing(include)
        if missing:
            problems.append(f"{origin}: no {', '.join(missing)}")
            continue
        version = header_version(include)
        if version is None:
            problems.append(f"{origin}: {include / 'rocprofiler-sdk' / 'version.h'} defines no "
                            "ROCPROFILER_VERSION_MAJOR/MINOR/PATCH")
            continue
        lib = _library_in(prefix)
        if lib is None and need_library:
            problems.append(f"{origin}: headers of rocprofiler-sdk {version[1]} but no "
                            "lib/librocprofiler-sdk.so")
            continue
        return RocprofilerInstall(include, lib, version[0], version[1], origin)
    where = "; ".join(problems) if problems else "no ROCm installation (/opt/rocm) on this machine"
    raise EnvironmentProblem(f"no rocprofiler-sdk found, so HIP kernel start times cannot be collected: {where}",
                             hint=FIX)


def source_text() -> str:
    return resources.files("aorta_tui.trace.device").joinpath(SOURCE).read_text()


def compile_command(cc: str, install: RocprofilerInstall, src: Path, out: Path, *, link: bool = True) -> list[str]:
    """The one compile line: ``link=False`` makes an object file (no librocprofiler-sdk needed),
    which is what the compile test runs where only the headers exist."""
    cmd = [cc, "-O2", "-std=gnu11", "-fPIC", "-pthread", "-fvisibility=hidden", "-Wall", "-Wextra",
           f"-I{install.include}", str(src)]
    if not link:
        return [*cmd, "-c", "-o", str(out)]
    assert install.lib is not None
    return [*cmd, "-shared", "-o", str(out), f"-L{install.lib.parent}", f"-l:{install.lib.name}",
            f"-Wl,-rpath,{install.lib.parent}"]


def _run_compile(cmd: list[str], install: RocprofilerInstall) -> None:
    run_compiler(cmd, "the rocprofiler-sdk collector",
                 f"{install.origin} (rocprofiler-sdk {install.version_string})")


def build_rocprof_collector(*, cache: Path | None = None) -> RocprofBuildResult:
    """The collector library for this machine's rocprofiler-sdk, built once and cached (key: the
    source, the header version, the library file, the compiler)."""
    install = find_rocprofiler()
    cc = find_compiler()
    assert install.lib is not None
    src = source_text()
    key_material = "\n".join([src, str(install.version), str(install.lib.resolve()),
                              str(install.lib.stat().st_size), cc])
    key = hashlib.sha256(key_material.encode()).hexdigest()[:16]
    out_dir = (cache or cache_root().parent / "rocprof-collector") / f"rocprofiler{install.version}-{key}"
    lib = out_dir / LIBRARY
    if lib.is_file():
        return RocprofBuildResult(lib, install, cc, cached=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        src_path = Path(tmp) / SOURCE
        src_path.write_text(src)
        part = Path(tmp) / LIBRARY
        _run_compile(compile_command(cc, install, src_path, part), install)
        os.replace(part, lib)  # atomic: a concurrent build of the same key writes the same bytes
    return RocprofBuildResult(lib, install, cc, cached=False)


def describe_availability() -> dict[str, object]:
    """What ``trace info`` prints about the HIP device half: found or not, why, and that it has
    never run on AMD hardware."""
    info: dict[str, object] = {"name": "rocprofiler-sdk collector", "hardware": NEVER_RUN}
    try:
        install = find_rocprofiler()
        cc = find_compiler()
    except EnvironmentProblem as exc:
        info.update(available=False, reason=exc.message, fix=exc.hint,
                    status=f"not available: {exc.message}")
        return info
    info.update(available=True, rocprofiler=install.to_dict(), compiler=cc,
                status=f"built from source against rocprofiler-sdk {install.version_string}, {NEVER_RUN}",
                needs=("`--device-timestamps on` and a command to start (loaded through "
                       "ROCP_TOOL_LIBRARIES at the program's HIP start-up; auto never loads a "
                       "collector that has not run on hardware)"))
    return info
