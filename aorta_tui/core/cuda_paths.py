"""Where a CUDA toolkit keeps CUPTI: the one list, read by ``env probe`` (envsnap) and by the
trace engine's collector build, so that one never finds what the other misses.

A toolkit from NVIDIA's runfile keeps CUPTI in ``extras/CUPTI``; the distribution packages
(and NVIDIA's containers) put ``cupti.h`` in ``include/`` and ``libcupti.so*`` in ``lib64/``
(or ``targets/<arch>/``) beside the rest of the toolkit.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

_TARGETS = ("x86_64-linux", "sbsa-linux")


def cuda_homes() -> list[Path]:
    """``$CUDA_HOME``, ``$CUDA_PATH``, ``/usr/local/cuda``, then ``/usr/local/cuda-*`` (newest
    first): those that exist, each once."""
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda",
             *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]
    return [Path(h) for h in dict.fromkeys(x for x in homes if x) if os.path.isdir(h)]


def cupti_places(home: Path) -> list[tuple[Path, Path]]:
    """(include folder, library folder) pairs where ``home`` may keep CUPTI, in order."""
    extras = home / "extras" / "CUPTI"
    places = [(extras / "include", extras / "lib64"), (extras / "include", extras / "lib"),
              (home / "include", home / "lib64"), (home / "include", home / "lib")]
    places += [(home / "targets" / t / "include", home / "targets" / t / "lib") for t in _TARGETS]
    return places


def toolkit_lib_dirs(home: Path) -> list[str]:
    """Every library folder of ``home`` (CUPTI's among them), for a library search."""
    dirs = [str(home / "lib64"), str(home / "lib")]
    dirs += [str(home / "targets" / t / "lib") for t in _TARGETS]
    dirs += [str(lib) for _inc, lib in cupti_places(home)]
    return list(dict.fromkeys(dirs))
