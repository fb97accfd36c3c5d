"""The leaf of every snapshot: a value with its state and where it came from.

A leaf is a plain dict so a snapshot stays JSON all the way down::

    {"value": ..., "state": "ok" | "not_applicable" | "unknown" | "error",
     "source": "file:/proc/cpuinfo" | "cmd:nvidia-smi ..." | "api:torch..." | "env:NAME",
     "reason": "..."}            # present whenever state is not "ok"
     "needs_root": true          # present only when a permission error hid the value

The helpers here read files and run commands so that nothing can raise or hang: a missing
file, a denied read, a command that is absent, fails or outlives its timeout all become a
leaf with a state and a reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from typing import Any

from aorta_tui.core import spawn_gate
from aorta_tui.envsnap.doc import LEAF_KEYS, STATES
from aorta_tui.envsnap.doc import is_leaf_object as is_leaf

__all__ = ["LEAF_KEYS", "STATES", "is_leaf"]  # the leaf's shape is doc.py's; the capture builds it

# A leaf as the capture builds it, before the snapshot is typed (doc.Field reads it)
Leaf = dict[str, Any]


def ok(value: object, source: str) -> Leaf:
    """A leaf with the value found (JSON-typed: the snapshot's writer writes it)."""
    return {"value": value, "state": "ok", "source": source}


def not_applicable(reason: str, source: str = "") -> Leaf:
    return {"value": None, "state": "not_applicable", "source": source, "reason": reason}


def unknown(reason: str, source: str = "") -> Leaf:
    return {"value": None, "state": "unknown", "source": source, "reason": reason}


def error(reason: str, source: str = "", *, needs_root: bool = False) -> Leaf:
    leaf: Leaf = {"value": None, "state": "error", "source": source, "reason": reason}
    if needs_root:
        leaf["needs_root"] = True
    return leaf


def derive(leaf: Leaf, value: object) -> Leaf:
    """A new ok leaf computed from ``leaf`` (same source), or ``leaf``'s failure unchanged."""
    if leaf["state"] != "ok":
        return dict(leaf)
    return ok(value, leaf["source"])


# -- files -------------------------------------------------------------------------------


def read_file(path: str, *, max_bytes: int = 1 << 20, absent_state: str = "not_applicable") -> Leaf:
    """Read a small text file (sysfs, procfs, version files) into a leaf; never raises."""
    source = f"file:{path}"
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes)
    except FileNotFoundError:
        return _absent(absent_state, f"{path} does not exist", source)
    except NotADirectoryError:
        return _absent(absent_state, f"{path} does not exist", source)
    except PermissionError:
        return _denied(path, source)
    except OSError as exc:  # EIO from a sysfs attribute the driver refuses, EINVAL, ...
        return error(f"reading {path} failed: {exc.strerror or exc}", source)
    return ok(data.decode("utf-8", "replace").strip(), source)


def list_dir(path: str) -> Leaf:
    source = f"file:{path}"
    try:
        return ok(sorted(os.listdir(path)), source)
    except (FileNotFoundError, NotADirectoryError):
        return not_applicable(f"{path} does not exist", source)
    except PermissionError:
        return _denied(path, source)
    except OSError as exc:
        return error(f"listing {path} failed: {exc.strerror or exc}", source)


def _absent(state: str, reason: str, source: str) -> Leaf:
    return unknown(reason, source) if state == "unknown" else not_applicable(reason, source)


def _denied(path: str, source: str) -> Leaf:
    if os.geteuid() == 0:
        return error(f"permission denied reading {path} even as root", source)
    return error(f"permission denied reading {path}; needs root", source, needs_root=True)


# -- commands ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandResult:
    leaf: Leaf  # ok with stdout as value, or the failure
    returncode: int | None = None
    stderr: str = ""
    output: str = ""  # stdout, kept even when the command failed

    @property
    def ok(self) -> bool:
        return self.leaf["state"] == "ok"

    @property
    def stdout(self) -> str:
        return self.leaf["value"] if self.ok else ""


def run_command(argv: list[str], *, timeout_s: float, env: dict[str, str] | None = None) -> CommandResult:
    """Run ``argv`` with a hard timeout; kill its whole process group when it overstays."""
    source = "cmd:" + " ".join(argv)
    exe = shutil.which(argv[0])
    if exe is None:
        return CommandResult(not_applicable(f"{argv[0]} is not on PATH", source))
    try:
        proc = spawn_gate.popen(
            [exe, *argv[1:]],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # own process group: a timeout kills helpers it forked
            env=env,
        )
    except OSError as exc:
        return CommandResult(error(f"could not start {argv[0]}: {exc.strerror or exc}", source))
    try:
        out, err = proc.communicate(timeout=max(timeout_s, 0.01))
    except subprocess.TimeoutExpired:
        kill_group(proc)
        return CommandResult(error(f"{argv[0]} did not finish within {timeout_s:.1f} s", source))
    text_err = err.decode("utf-8", "replace").strip()
    text_out = out.decode("utf-8", "replace")
    if proc.returncode != 0:
        first = (text_err or out.decode("utf-8", "replace").strip()).splitlines()[:1]
        detail = f": {first[0][:200]}" if first else ""
        if proc.returncode in (126, 127) or "ermission" in detail:
            needs_root = os.geteuid() != 0 and "ermission" in detail
            return CommandResult(
                error(f"{argv[0]} exited {proc.returncode}{detail}", source, needs_root=needs_root),
                proc.returncode,
                text_err,
                text_out,
            )
        return CommandResult(
            error(f"{argv[0]} exited {proc.returncode}{detail}", source),
            proc.returncode,
            text_err,
            text_out,
        )
    return CommandResult(ok(text_out, source), 0, text_err, text_out)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired, ValueError, OSError):
        proc.communicate(timeout=2)


def short_hash(text: str, length: int = 12) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]
