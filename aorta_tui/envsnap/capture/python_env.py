"""Python section: interpreter, virtual environment / conda, and versions of a fixed list of
packages that change numerics or scheduling (read from metadata, never imported)."""

from __future__ import annotations

import os
import platform
import re
import sys

from aorta_tui.envsnap import fields as F
from aorta_tui.envsnap.fields import Leaf

PACKAGES = (
    "torch", "numpy", "scipy", "triton", "pytorch-triton", "pytorch-triton-rocm", "jax", "jaxlib",
    "tensorflow", "transformers", "accelerate", "deepspeed", "flash-attn", "xformers", "apex",
    "vllm", "sglang", "megatron-core", "fbgemm-gpu", "torchrec", "aiter", "onnxruntime",
    "onnxruntime-gpu", "cupy", "cuda-python", "rocm-sdk-core", "transformer-engine",
    "nvidia-cublas-cu12", "nvidia-cudnn-cu12", "nvidia-nccl-cu12", "nvidia-cuda-runtime-cu12",
    "nvidia-cublas", "nvidia-cudnn-cu13", "nvidia-nccl-cu13", "nvidia-cuda-runtime",
    "mkl", "intel-openmp",
)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class DistIndex:
    """The installed distributions, listed once per probe: ``{normalised name: metadata file}``.

    ``importlib.metadata`` parses every distribution's METADATA to learn its name, and again
    for its version (two reads per installed distribution: 642 on a machine with 321). The
    name is in the ``.dist-info`` / ``.egg-info`` directory's own name, so one ``scandir`` per
    ``sys.path`` entry finds them all, and only the distributions asked about have their
    METADATA read (its header, up to the first blank line). The first one on ``sys.path``
    wins, as with ``importlib.metadata.version``. A path entry that is not a directory (a zip,
    an egg file) is asked through ``importlib.metadata`` for that entry alone.
    """

    def __init__(self, paths: list[str] | None = None) -> None:
        self.files: dict[str, str] = {}
        self.versions: dict[str, str] = {}  # from importlib.metadata, for non-directory entries
        for entry in sys.path if paths is None else paths:
            self._add(entry or ".")

    def _add(self, entry: str) -> None:
        if os.path.isdir(entry):
            try:
                names = os.listdir(entry)
            except OSError:
                return
            for child in names:  # importlib.metadata's order: the listing's, both suffixes alike
                name = _dist_name(child)
                if name is None:
                    continue
                path = os.path.join(entry, child)
                # importlib.metadata's order: METADATA, then PKG-INFO, then an .egg-info file itself
                for meta in (os.path.join(path, "METADATA"), os.path.join(path, "PKG-INFO"), path):
                    if os.path.isfile(meta):
                        self.files.setdefault(name, meta)
                        break
        elif os.path.isfile(entry):
            from importlib import metadata

            for dist in metadata.distributions(path=[entry]):
                # get_all, not get: PackageMetadata promises get only from Python 3.12
                names = (dist.metadata.get_all("Name") if dist.metadata else None) or []
                dname = names[0] if names else None
                if dname and _norm(dname) not in self.files:
                    self.versions.setdefault(_norm(dname), dist.version)

    def version(self, name: str) -> str | None:
        key = _norm(name)
        if key in self.files:
            return _header(self.files[key], "Version")
        return self.versions.get(key)


def _dist_name(child: str) -> str | None:
    """``torch-2.5.1.dist-info`` -> ``torch``; ``foo-1.0-py3.11.egg-info`` -> ``foo``."""
    low = child.lower()  # importlib.metadata matches the suffixes in any case
    for suffix in (".dist-info", ".egg-info"):
        if low.endswith(suffix) and len(child) > len(suffix):
            return _norm(child[: -len(suffix)].split("-", 1)[0])
    return None


def _header(path: str, field: str) -> str | None:
    """One header of a METADATA / PKG-INFO file (RFC 822 style: headers end at a blank line)."""
    want = field.lower() + ":"
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    return None
                if line.lower().startswith(want):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def capture_python(index: DistIndex | None = None) -> dict[str, object]:
    packages_failure: Leaf | None = None
    versions: dict[str, str | None] = {}
    try:
        index = index or DistIndex()
        versions = {name: index.version(name) for name in PACKAGES}
    except Exception as exc:  # a corrupt dist-info must not cost the section
        packages_failure = F.error(f"reading package metadata failed: {exc}", "api:importlib.metadata")
    packages: dict[str, Leaf] = {}
    for name in PACKAGES:
        if packages_failure is not None:
            packages[name] = dict(packages_failure)
        elif versions.get(name) is not None:
            packages[name] = F.ok(versions[name], "api:importlib.metadata")
        else:
            packages[name] = F.ok(None, "api:importlib.metadata (not installed)")
    in_venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
    conda = os.environ.get("CONDA_DEFAULT_ENV")
    return {
        "version": F.ok(platform.python_version(), "api:platform.python_version"),
        "implementation": F.ok(platform.python_implementation(), "api:platform.python_implementation"),
        "executable": F.ok(sys.executable, "api:sys.executable"),
        "venv": F.ok(sys.prefix if in_venv else None, "api:sys.prefix != sys.base_prefix"),
        "conda_env": F.ok(conda, "env:CONDA_DEFAULT_ENV"),
        "packages": packages,
    }
