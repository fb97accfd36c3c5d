"""A persistent bytecode cache for the Python processes the tool starts (``--bytecode-cache``).

Many GPU images never keep Python bytecode: uv does not compile it by default, and Dockerfiles
often set ``PYTHONDONTWRITEBYTECODE=1``. There every process compiles every module it imports
from source, and a trial that imports ``torch`` and ``torch._dynamo`` (any optimizer step does)
spends 9 s compiling on the H200 image, every trial. Upstream AORTA pays that once per sweep
because it runs trials in its own process; a tool that gives each trial a fresh process must
not pay it per trial.

``auto`` (the default) looks, without importing anything, at whether the packages the children
import (``torch``, else ``aorta_tui``) have cached bytecode where Python would look for it, and
whether Python could write it there. When neither holds, the children get
``PYTHONPYCACHEPREFIX=<user cache>/aorta-tui/pycache`` and lose ``PYTHONDONTWRITEBYTECODE``: with
a prefix set, Python reads and writes bytecode only under that directory, so the image's own
tree stays as clean as the variable meant it to be, and the second process onwards loads
compiled code. ``on`` does so always; ``off`` leaves the image's settings exactly as they are.

What this sets is recorded in every trial's result (``tool_env``), as variables the tool set,
not the recipe; the environment snapshot records the interpreter's bytecode settings.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

CHOICES = ("auto", "on", "off")
PREFIX_VAR = "PYTHONPYCACHEPREFIX"
DONT_WRITE_VAR = "PYTHONDONTWRITEBYTECODE"
# What the children import first and most: its bytecode decides the cost of a trial's start.
PACKAGES = ("torch", "aorta_tui")
# Modules whose cached bytecode we look for: a package's __init__ alone can be compiled by an
# image that compiled nothing else, so one module deep inside is asked too.
_PROBE_FILES = {"torch": ("__init__.py", "_tensor.py"), "aorta_tui": ("__init__.py", "core/events.py")}


def default_cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_CACHE_HOME/aorta-tui/pycache``, else ``~/.cache/aorta-tui/pycache``."""
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "aorta-tui" / "pycache"


@dataclass(frozen=True)
class BytecodePlan:
    """What the tool does about bytecode for one run, and why."""

    mode: str  # as asked: auto, on, off
    active: bool  # the children get the cache
    reason: str  # why active or not, in words a user can check
    prefix: str | None = None
    # The variables the tool sets in its children: value, or None where it unsets one.
    tool_vars: dict[str, str | None] = field(default_factory=dict)
    # Why the image compiles every import (None: it does not); said once per run.
    problem: str | None = None

    def apply(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` as the children get it."""
        out = dict(env)
        for name, value in self.tool_vars.items():
            if value is None:
                out.pop(name, None)
            else:
                out[name] = value
        return out

    def to_dict(self) -> dict[str, object]:
        return {"mode": self.mode, "active": self.active, "reason": self.reason,
                "prefix": self.prefix, "tool_vars": dict(self.tool_vars), "problem": self.problem}

    def note(self) -> str | None:
        """The once-per-run message, or None when the image keeps bytecode."""
        if self.problem is None:
            return None
        if self.active:
            return (f"{self.problem}: every Python process would compile it from source. "
                    f"The tool's children (trials, zygotes, snapshots) use the bytecode cache "
                    f"{self.prefix} ({PREFIX_VAR} set, {DONT_WRITE_VAR} unset for them; "
                    "--bytecode-cache off keeps the image's settings)")
        return (f"{self.problem}: every trial compiles it from source "
                f"({self.reason}; --bytecode-cache auto gives the children a persistent cache)")


def _package_dir(name: str) -> Path | None:
    try:  # a top-level name: find_spec locates it without importing anything
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _cached_path(source: Path, prefix: str | None) -> Path:
    """Where Python looks for the bytecode of ``source`` (importlib's cache_from_source rule,
    for a given prefix rather than this process's own)."""
    tag = sys.implementation.cache_tag
    name = f"{source.stem}.{tag}.pyc"
    if prefix:
        # CPython joins the prefix with the absolute (not resolved) directory
        return Path(prefix) / os.path.abspath(source.parent).lstrip(os.sep) / name
    return source.parent / "__pycache__" / name


def _writable(directory: Path) -> bool:
    pycache = directory / "__pycache__"
    return os.access(pycache if pycache.is_dir() else directory, os.W_OK | os.X_OK)


def inspect_image(environ: Mapping[str, str]) -> tuple[str | None, str]:
    """(why the children would compile on every start, or None; what was looked at)."""
    dont_write = bool(environ.get(DONT_WRITE_VAR))
    prefix = environ.get(PREFIX_VAR) or None
    for pkg in PACKAGES:
        directory = _package_dir(pkg)
        if directory is None:
            continue
        files = [directory / f for f in _PROBE_FILES[pkg] if (directory / f).is_file()]
        cached = all(_cached_path(f, prefix).is_file() for f in files) if files else True
        where = f"{pkg} at {directory}"
        if cached:
            return None, f"{where} has cached bytecode" + (f" under {prefix}" if prefix else "")
        if dont_write:
            return (f"bytecode writing is off ({DONT_WRITE_VAR}={environ.get(DONT_WRITE_VAR)}) and "
                    f"{where} has no cached bytecode", where)
        if not prefix and not _writable(directory):
            return (f"{where} has no cached bytecode and its directory is not writable by this "
                    "user", where)
        return None, f"{where} has no cached bytecode yet; Python writes it on the first import"
    return None, "neither torch nor aorta_tui found on sys.path"


def plan_bytecode(mode: str = "auto", environ: Mapping[str, str] | None = None,
                  cache_dir: Path | None = None) -> BytecodePlan:
    """The plan for a run's children. Never raises: a cache that cannot be made is inactive,
    with the reason."""
    environ = os.environ if environ is None else environ
    if mode not in CHOICES:
        raise ValueError(f"bytecode cache mode {mode!r} (expected one of {', '.join(CHOICES)})")
    problem, looked = inspect_image(environ)
    if mode == "off":
        return BytecodePlan(mode, False, "--bytecode-cache off: the image's settings as they are",
                            problem=problem)
    if mode == "auto" and problem is None:
        return BytecodePlan(mode, False, f"not needed: {looked}")
    cache = cache_dir or default_cache_dir(environ)
    try:
        cache.mkdir(parents=True, exist_ok=True, mode=0o755)
    except OSError as exc:
        return BytecodePlan(mode, False, f"cannot create the cache {cache}: {exc.strerror or exc}",
                            problem=problem)
    if not os.access(cache, os.W_OK | os.X_OK):
        return BytecodePlan(mode, False, f"the cache {cache} is not writable by this user",
                            problem=problem)
    tool_vars: dict[str, str | None] = {PREFIX_VAR: str(cache)}
    if DONT_WRITE_VAR in environ:
        tool_vars[DONT_WRITE_VAR] = None
    reason = "asked for (--bytecode-cache on)" if mode == "on" else f"needed: {problem}"
    return BytecodePlan(mode, True, reason, prefix=str(cache), tool_vars=tool_vars, problem=problem)


def interpreter_settings(cache_dir: Path | None = None) -> dict[str, object]:
    """This interpreter's bytecode settings, for the environment snapshot."""
    prefix = sys.pycache_prefix
    ours = str(cache_dir or default_cache_dir())
    return {
        "dont_write_bytecode": bool(sys.flags.dont_write_bytecode),
        "pycache_prefix": prefix,
        "tool_cache": prefix is not None and bool(prefix)
                      and os.path.realpath(prefix) == os.path.realpath(ours),
    }


def import_cost_note(plan: BytecodePlan, torch_import_ms: list[float]) -> str | None:
    """The run's measured cost of ``import torch`` in its trials, said where the image keeps no
    bytecode (None elsewhere, or when no trial imported torch in its own process)."""
    if plan.problem is None or not torch_import_ms:
        return None
    ms = sorted(torch_import_ms)
    mid = ms[len(ms) // 2] if len(ms) % 2 else (ms[len(ms) // 2 - 1] + ms[len(ms) // 2]) / 2
    how = (f"with the bytecode cache {plan.prefix} (the first process to import a module compiles "
           "it into the cache)" if plan.active else f"compiled from source each time ({plan.reason})")
    return (f"import torch in the trials took a median {mid / 1000:.2f} s (n={len(ms)}, "
            f"{ms[0] / 1000:.2f}-{ms[-1] / 1000:.2f} s), {how}")
