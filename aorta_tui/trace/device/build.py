"""Find CUPTI and a C compiler, build the collector, cache it per CUPTI version.

The collector is compiled on the machine that runs it, against the CUPTI headers and library
found there, because CUPTI's activity records change layout between versions: a build against
one CUPTI must never read another's records. Where CUPTI comes from, in order:

1. ``$AORTA_CUPTI_ROOT`` (a folder with ``include/cupti.h`` and ``lib*/libcupti.so*``);
2. the ``nvidia`` wheels of the Python that runs the traced program, then of our own Python
   (``nvidia/cu13``, ``nvidia/cuda_cupti`` + ``nvidia/cuda_runtime``): every CUDA build of
   PyTorch installs them;
3. a CUDA toolkit: ``$CUDA_HOME``, ``/usr/local/cuda``, ``/usr/local/cuda-*``
   (``extras/CUPTI``, or ``include/`` and ``lib64/``: core/cuda_paths.py, as ``env probe``).

Nothing here imports torch: finding the wheels reads files only.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from aorta_tui.core import spawn_gate
from aorta_tui.core.errors import EnvironmentProblem

SOURCE = "cupti_collector.c"
LIBRARY = "libaorta_cupti.so"


@dataclass(frozen=True)
class CuptiInstall:
    include: Path  # has cupti.h
    lib: Path  # the libcupti shared object to link and load
    extra_includes: tuple[Path, ...]  # cuda.h, crt/host_defines.h when they live elsewhere
    version: int  # CUPTI_API_VERSION of the headers
    origin: str  # how it was found, for messages

    def to_dict(self) -> dict[str, object]:
        return {"include": str(self.include), "lib": str(self.lib), "version": self.version,
                "origin": self.origin, "extra_includes": [str(p) for p in self.extra_includes]}


@dataclass
class BuildResult:
    library: Path
    cupti: CuptiInstall
    compiler: str
    cached: bool
    defines: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"library": str(self.library), "cupti": self.cupti.to_dict(), "compiler": self.compiler,
                "cached": self.cached, "defines": self.defines}


def _libcupti_in(folder: Path) -> Path | None:
    names = sorted(glob.glob(str(folder / "libcupti.so*")), key=len)
    real = [Path(n) for n in names if Path(n).is_file()]
    return real[0] if real else None


def _header_version(include: Path) -> int:
    try:
        text = (include / "cupti_version.h").read_text(errors="replace")
    except OSError:
        return 0
    m = re.search(r"#define\s+CUPTI_API_VERSION\s+(\d+)", text)
    return int(m.group(1)) if m else 0


def _has(include_dirs: list[Path], rel: str) -> bool:
    return any((d / rel).is_file() for d in include_dirs)


def _candidate(include: Path, libdir: Path, extras: list[Path], origin: str,
               fallback_includes: list[Path]) -> CuptiInstall | None:
    """CUPTI from one place; cuda.h and crt/ from the same place when it has them, else from
    another installation (a CUPTI wheel beside a toolkit that has crt/, say)."""
    if not (include / "cupti.h").is_file():
        return None
    lib = _libcupti_in(libdir)
    if lib is None:
        return None
    dirs = [include, *extras]
    for rel in ("cuda.h", "crt/host_defines.h"):
        if not _has(dirs, rel):
            more = [d for d in fallback_includes if (d / rel).is_file()]
            if not more:
                return None
            dirs.append(more[0])
    return CuptiInstall(include, lib, tuple(dict.fromkeys(e for e in dirs[1:] if e != include)),
                        _header_version(include), origin)


def _wheel_roots(site_dirs: list[str]) -> list[tuple[Path, Path, list[Path], str]]:
    out = []
    for sp in site_dirs:
        nv = Path(sp) / "nvidia"
        if not nv.is_dir():
            continue
        # CUDA 13 wheels share one tree; CUDA 12 wheels have one folder per component.
        for sub in sorted(nv.glob("cu1[3-9]")):
            out.append((sub / "include", sub / "lib", [sub / "include"], f"wheel {sub}"))
        cupti = nv / "cuda_cupti"
        if cupti.is_dir():
            extras = [nv / "cuda_runtime" / "include", nv / "cuda_nvcc" / "include",
                      nv / "cuda_crt" / "include"]
            out.append((cupti / "include", cupti / "lib", extras, f"wheel {cupti}"))
    return out


def _toolkit_roots() -> list[tuple[Path, Path, list[Path], str]]:
    from aorta_tui.core.cuda_paths import cuda_homes, cupti_places

    out = []
    for home in cuda_homes():
        extras = [home / "include", home / "targets" / "x86_64-linux" / "include",
                  home / "targets" / "sbsa-linux" / "include"]
        for include, libdir in cupti_places(home):
            out.append((include, libdir, extras, f"CUDA toolkit {home}"))
    return out


def site_dirs_of(python: str) -> list[str]:
    """The site-packages folders of another interpreter (the traced program's), or []."""
    try:
        out = spawn_gate.run(
            [python, "-c", "import site,sys;print('\\n'.join(site.getsitepackages()+[site.getusersitepackages()]+sys.path))"],
            capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [ln for ln in out.stdout.splitlines() if ln.strip()] if out.returncode == 0 else []


def find_cupti(target_python: str | None = None) -> CuptiInstall:
    """The CUPTI to build against, or :class:`EnvironmentProblem` (exit 3) naming what to install."""
    tried: list[str] = []
    roots: list[tuple[Path, Path, list[Path], str]] = []
    env_root = os.environ.get("AORTA_CUPTI_ROOT")
    if env_root:
        r = Path(env_root)
        for libname in ("lib", "lib64"):
            roots.append((r / "include", r / libname, [r / "include"], f"$AORTA_CUPTI_ROOT={r}"))
    if target_python:
        roots += _wheel_roots(site_dirs_of(target_python))
    roots += _wheel_roots(list(sys.path))
    roots += _toolkit_roots()
    fallback = [d for _i, _l, extras, _o in roots for d in extras if d.is_dir()]
    for include, libdir, extras, origin in roots:
        if include.parent.is_dir():  # name only places that exist
            tried.append(origin)
        found = _candidate(include, libdir, extras, origin, fallback)
        if found is not None:
            return found
    raise EnvironmentProblem(
        "no CUPTI found (cupti.h, cuda.h, crt/host_defines.h and libcupti.so), so GPU start times "
        "cannot be collected; looked in: " + ", ".join(dict.fromkeys(tried)) if tried else
        "no CUPTI found: no nvidia wheels and no CUDA toolkit on this machine",
        hint="install a CUDA build of PyTorch (it brings the nvidia-cuda-cupti wheel), or a CUDA "
             "toolkit, or point AORTA_CUPTI_ROOT at a folder with include/ and lib/; "
             "`--device-timestamps off` traces launches only")


def find_compiler() -> str:
    for cand in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cand and shutil.which(cand):
            return shutil.which(cand) or cand
    raise EnvironmentProblem(
        "no C compiler (cc, gcc or clang) to build the CUPTI collector",
        hint="install one (`apt-get install gcc`), or set CC; `--device-timestamps off` traces "
             "launches only")


def _newest_struct(include: Path, base: str) -> str:
    """The newest ``CUpti_Activity<base>N`` the headers define: the layout this CUPTI emits."""
    best = -1
    for name in ("cupti_activity.h", "cupti_activity_deprecated.h"):
        with contextlib.suppress(OSError):
            for m in re.finditer(rf"}}\s*CUpti_Activity{base}(\d+)\s*;", (include / name).read_text(errors="replace")):
                best = max(best, int(m.group(1)))
    if best < 0:
        raise EnvironmentProblem(f"{include}: the CUPTI headers define no CUpti_Activity{base}N record",
                                 hint="point AORTA_CUPTI_ROOT at a complete CUPTI installation")
    return f"CUpti_Activity{base}{best}"


def defines_for(cupti: CuptiInstall) -> dict[str, str]:
    cupti_h = (cupti.include / "cupti.h").read_text(errors="replace")
    act_h = (cupti.include / "cupti_activity.h").read_text(errors="replace")
    cb_h = ""
    with contextlib.suppress(OSError):
        cb_h = (cupti.include / "cupti_callbacks.h").read_text(errors="replace")
    return {
        "AORTA_KERNEL_T": _newest_struct(cupti.include, "Kernel"),
        "AORTA_MEMCPY_T": _newest_struct(cupti.include, "Memcpy"),
        "AORTA_MEMSET_T": _newest_struct(cupti.include, "Memset"),
        "AORTA_INCLUDE_META": "0" if "generated_cuda_meta.h" in cupti_h else "1",
        "AORTA_HAS_TS_CALLBACK": "1" if "cuptiActivityRegisterTimestampCallback" in act_h else "0",
        # queued/submitted per kernel record (issue 34's default mode)
        "AORTA_HAS_LATENCY_TS": "1" if "cuptiActivityEnableLatencyTimestamps" in act_h else "0",
        # AORTA_CUPTI_FLUSH=cupti (CUPTI's worker flushes): absent from the oldest CUPTI 11 headers
        "AORTA_HAS_FLUSH_PERIOD": "1" if "cuptiActivityFlushPeriod" in act_h else "0",
        # CUPTI 13.3+: several subscribers per process where the driver (r610+) allows it
        "AORTA_HAS_SUBSCRIBE_V2": "1" if "allowMultipleSubscribers" in cb_h else "0",
    }


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "aorta-tui" / "cupti-collector"


def source_text() -> str:
    return resources.files("aorta_tui.trace.device").joinpath(SOURCE).read_text()


def build_collector(*, target_python: str | None = None, cache: Path | None = None) -> BuildResult:
    """The collector library for this machine's CUPTI, built once and cached.

    The cache key covers the source, the compile flags, the CUPTI header version and the
    library file, so a CUPTI upgrade or a changed collector rebuilds and nothing stale loads.
    """
    cupti = find_cupti(target_python)
    cc = find_compiler()
    defines = defines_for(cupti)
    src = source_text()
    lib_stat = cupti.lib.stat()
    key_material = "\n".join([src, repr(sorted(defines.items())), str(cupti.version), str(cupti.lib.resolve()),
                              str(lib_stat.st_size), cc])
    key = hashlib.sha256(key_material.encode()).hexdigest()[:16]
    out_dir = (cache or cache_root()) / f"cupti{cupti.version}-{key}"
    lib = out_dir / LIBRARY
    if lib.is_file():
        return BuildResult(lib, cupti, cc, cached=True, defines=defines)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        src_path = Path(tmp) / SOURCE
        src_path.write_text(src)
        part = Path(tmp) / LIBRARY
        cmd = [cc, "-O2", "-std=gnu11", "-shared", "-fPIC", "-pthread", "-fvisibility=hidden",
               *(f"-D{k}={v}" for k, v in defines.items()),
               f"-I{cupti.include}", *(f"-I{d}" for d in cupti.extra_includes),
               str(src_path), "-o", str(part),
               f"-L{cupti.lib.parent}", f"-l:{cupti.lib.name}", f"-Wl,-rpath,{cupti.lib.parent}"]
        run_compiler(cmd, "the CUPTI collector", f"{cupti.origin} (CUPTI {cupti.version})")
        os.replace(part, lib)  # atomic: a concurrent build of the same key writes the same bytes
    return BuildResult(lib, cupti, cc, cached=False, defines=defines)


def describe_availability(target_python: str | None = None) -> dict[str, object]:
    """What ``trace info`` prints about the device half: found or not, and why."""
    info: dict[str, object] = {"name": "cupti collector"}
    try:
        cupti = find_cupti(target_python)
        info["cupti"] = cupti.to_dict()
    except EnvironmentProblem as exc:
        info.update(available=False, reason=exc.message, fix=exc.hint)
        return info
    try:
        info["compiler"] = find_compiler()
    except EnvironmentProblem as exc:
        info.update(available=False, reason=exc.message, fix=exc.hint)
        return info
    info["available"] = True
    info["needs"] = ("a command to start (the collector is loaded at the program's CUDA start-up "
                     "through CUDA_INJECTION64_PATH; a running --pid cannot be given one)")
    return info


def run_compiler(cmd: list[str], what: str, against: str) -> None:
    """Run one compile of a collector; its failure is exit 3 with the compiler's first lines."""
    try:
        proc = spawn_gate.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(f"building {what} failed: {exc}",
                                 hint="check the C compiler; `--device-timestamps off` traces launches only") from None
    if proc.returncode != 0:
        first = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[:8])
        raise EnvironmentProblem(
            f"building {what} against {against} failed:\n{first}",
            hint="report it with the lines above; `--device-timestamps off` traces launches only")
