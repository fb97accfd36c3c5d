"""``retain`` and ``collect_paths``: what a finished trial's directory keeps.

Upstream AORTA's ``retain: {on_fail, on_pass, on_error}`` picks, by the trial's verdict, one
level of a ladder; each keeps what the one below keeps, plus its own class of file:

==========  =================================================================================
``none``    the trial's record only (``result.json``, ``trial_spec.json``,
            ``workload_result*.json``: the bookkeeping resume and the matrix read)
``log``     + ``stdout.log``, ``stderr.log``, ``probe.env``
``summary`` + summaries: ``*.summary.*``, ``trace.json``, the ``artifacts.json`` manifest
``full``    + everything else (collected files, traces, dumps); the default: nothing is deleted
==========  =================================================================================

A trial may declare its files' classes in ``artifacts.json`` (``{"artifacts": [{"path":
"dump.bin", "class": "heavy"}]}``, classes ``log``/``summary``/``heavy``), as upstream's
collectors do; the record can never be declared deletable. A malformed manifest is a note and
the names above decide.

Pruning runs after classification and before ``result.json`` is written, so a kill in between
leaves a trial without a result, which a resume runs again. It walks the directory through
file descriptors and never follows a symlink (a link is kept, never unlinked), so a trial that
planted ``x -> /`` cannot make it delete anything outside its directory.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

LEVELS = ("none", "log", "summary", "full")
_LEVEL_RANK = {name: i for i, name in enumerate(LEVELS)}
RECORD, LOG, SUMMARY, HEAVY = "record", "log", "summary", "heavy"
_CLASS_RANK = {RECORD: 0, LOG: 1, SUMMARY: 2, HEAVY: 3}
MANIFEST = "artifacts.json"
MAX_MANIFEST_BYTES = 1 << 20
_RECORD_NAMES = frozenset({"result.json", "trial_spec.json"})
_LOG_NAMES = frozenset({"stdout.log", "stderr.log", "probe.env"})
_SUMMARY_NAMES = frozenset({MANIFEST, "trace.json"})
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def finish_trial_files(recipe: object, trial_dir: Path, env: Mapping[str, str], verdict: str
                       ) -> dict[str, Any]:
    """Collect the recipe's ``collect_paths``, then prune by ``retain``; the ``result.json``
    fields that say what happened (empty when the recipe asks for neither)."""
    out: dict[str, Any] = {}
    paths = getattr(recipe, "collect_paths", ())  # a Recipe, or a stand-in without the field
    if paths:
        from aorta_tui.collect.probe_paths import collect_trial_paths

        out["collected"] = collect_trial_paths(paths, trial_dir, env)
    retain = getattr(recipe, "retain", None)
    if retain is not None:
        out["retention"] = apply_retention(trial_dir, retain.level_for(verdict))
    return out


def classify_file(rel: str, manifest: Mapping[str, str]) -> str:
    """The class of ``rel`` (a path relative to the trial directory)."""
    name = rel.rsplit("/", 1)[-1]
    if "/" not in rel and (name in _RECORD_NAMES or
                           (name.startswith("workload_result") and name.endswith(".json"))):
        return RECORD  # decided before the manifest: a trial cannot make its record deletable
    if rel in manifest:
        return manifest[rel]
    if "/" not in rel and name in _LOG_NAMES:
        return LOG
    if name in _SUMMARY_NAMES or ".summary." in name:
        return SUMMARY
    return HEAVY


def apply_retention(trial_dir: Path, level: str) -> dict[str, Any]:
    """Delete the files of ``trial_dir`` that ``level`` does not keep; what was done."""
    outcome: dict[str, Any] = {"level": level, "deleted": [], "freed_bytes": 0, "notes": []}
    if level == "full":  # the default keeps everything: nothing to look at
        return outcome
    rank = _LEVEL_RANK[level]
    try:
        fd = os.open(trial_dir, _DIR_FLAGS)
    except OSError as exc:
        outcome["notes"].append(f"not pruned: {exc.strerror or exc}")
        return outcome
    try:
        manifest = _read_manifest(fd, outcome["notes"])
        _prune(fd, "", rank, manifest, outcome)
    finally:
        os.close(fd)
    return outcome


def _prune(dir_fd: int, prefix: str, rank: int, manifest: Mapping[str, str],
           outcome: dict[str, Any]) -> bool:
    """Prune one directory (by fd); True when it is left empty."""
    empty = True
    with os.scandir(dir_fd) as entries:
        items = sorted(entries, key=lambda e: e.name)
    for entry in items:
        rel = f"{prefix}{entry.name}"
        if entry.is_symlink():
            outcome["notes"].append(f"{rel}: a symlink, kept (never followed)")
            empty = False
        elif entry.is_dir(follow_symlinks=False):
            try:
                sub = os.open(entry.name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError as exc:
                outcome["notes"].append(f"{rel}/: not pruned ({exc.strerror or exc})")
                empty = False
                continue
            try:
                sub_empty = _prune(sub, f"{rel}/", rank, manifest, outcome)
            finally:
                os.close(sub)
            if sub_empty and any(d.startswith(f"{rel}/") for d in outcome["deleted"]):
                with contextlib.suppress(OSError):
                    os.rmdir(entry.name, dir_fd=dir_fd)
                    continue
            empty = False
        elif entry.is_file(follow_symlinks=False) and \
                _CLASS_RANK[classify_file(rel, manifest)] > rank:
            size = entry.stat(follow_symlinks=False).st_size
            try:
                os.unlink(entry.name, dir_fd=dir_fd)
            except OSError as exc:
                outcome["notes"].append(f"{rel}: not deleted ({exc.strerror or exc})")
                empty = False
                continue
            outcome["deleted"].append(rel)
            outcome["freed_bytes"] += size
        else:
            empty = False
    return empty


def _read_manifest(dir_fd: int, notes: list[str]) -> dict[str, str]:
    """``artifacts.json`` as ``{relative path: class}``; {} (and a note) when it is unusable."""
    try:
        fd = os.open(MANIFEST, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        notes.append(f"{MANIFEST}: not read ({exc.strerror or exc}); file names decide")
        return {}
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_MANIFEST_BYTES:
            notes.append(f"{MANIFEST}: not a regular file under {MAX_MANIFEST_BYTES} bytes; "
                         "file names decide")
            return {}
        data = os.read(fd, MAX_MANIFEST_BYTES + 1)
    finally:
        os.close(fd)
    from aorta_tui.core.errors import AortaError
    from aorta_tui.core.inputs import parse_json_text

    try:
        raw = parse_json_text(data.decode("utf-8", "replace"), where=MANIFEST, what="manifest")
    except AortaError as exc:
        notes.append(f"{exc.message}; file names decide")
        return {}
    entries = raw.get("artifacts") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        notes.append(f"{MANIFEST}: expected {{\"artifacts\": [...]}}; file names decide")
        return {}
    out: dict[str, str] = {}
    for e in entries:
        if isinstance(e, dict) and isinstance(e.get("path"), str):
            cls = e.get("class")
            out[e["path"]] = cls if cls in (LOG, SUMMARY, HEAVY) else HEAVY
    return out


__all__ = ["LEVELS", "apply_retention", "classify_file", "finish_trial_files"]
