"""Where tracefs is, which events exist, and what fields an event's ``format`` file declares."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from aorta_tui.core.errors import EnvironmentProblem
from aorta_tui.privsep import client as privsep

MOUNT_COMMAND = "mount -t tracefs nodev /sys/kernel/tracing"


class TracefsDenied(EnvironmentProblem):
    """tracefs is mounted but this user may not read it (mode 0700 root: the usual default)."""


def _denied(path: Path) -> TracefsDenied:
    return TracefsDenied(
        f"{path} is readable by root only (uid {os.geteuid()} got 'Permission denied'): "
        "finding tracepoints, attaching probes and `trace info` all need root",
        hint="run it as root: sudo aorta-tui trace ...")


def _has_events(p: Path) -> bool:
    """``p/events`` is a directory; a tracefs this user may not enter raises TracefsDenied."""
    try:
        return (p / "events").is_dir()
    except PermissionError:  # pathlib's is_dir ignores ENOENT but not EACCES
        raise _denied(p / "events") from None
_FIELD_RE = re.compile(r"^\s*field:(?P<decl>[^;]+);\s*offset:\d+;\s*size:(?P<size>\d+);")


@dataclass(frozen=True)
class Field:
    name: str
    ctype: str
    size: int

    @property
    def is_string(self) -> bool:
        return "__data_loc" in self.ctype or ("char" in self.ctype and "[" in self.ctype)


def find_tracefs(mounts_file: Path = Path("/proc/mounts")) -> Path | None:
    """The tracefs mount point (``/sys/kernel/tracing`` or the one under debugfs), or None."""
    try:
        lines = mounts_file.read_text().splitlines()
    except OSError:
        lines = []
    found: list[Path] = []
    for ln in lines:
        parts = ln.split()
        if len(parts) >= 3 and parts[2] == "tracefs":
            found.append(Path(parts[1]))
    try:
        for p in (*found, Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing")):
            if _has_events(p):
                return p
    except TracefsDenied:
        # under sudo the tool runs as the user: the privileged helper reads tracefs for it
        conn = privsep.current()
        if conn is None:
            raise
        root = conn.call("tracefs_root").get("root")
        return Path(root) if isinstance(root, str) else None
    return None


def event_format(root: Path, group: str, event: str) -> dict[str, Field] | None:
    """Fields of ``group:event`` (without the ``common_`` ones), or None if the event is absent."""
    path = root / "events" / group / event / "format"
    try:
        text = path.read_text()
    except PermissionError:
        conn = privsep.current()
        if conn is None:
            return None
        answer = conn.call("tracefs_format", group=group, event=event).get("text")
        if not isinstance(answer, str):
            return None
        text = answer
    except OSError:
        return None
    return parse_format(text)


def parse_format(text: str) -> dict[str, Field]:
    fields: dict[str, Field] = {}
    for ln in text.splitlines():
        m = _FIELD_RE.match(ln)
        if not m:
            continue
        decl = m.group("decl").strip()
        name = decl.split()[-1]
        ctype = decl[: len(decl) - len(name)].strip()
        if "[" in name:
            ctype += name[name.index("[") :]
            name = name[: name.index("[")]
        if name.startswith("common_"):
            continue
        fields[name] = Field(name=name, ctype=ctype, size=int(m.group("size")))
    return fields


def kprobes_supported(root: Path | None) -> tuple[bool, str]:
    """Kprobes need the kprobe PMU or ``kprobe_events``; bpftrace --info claims them regardless."""
    try:
        if Path("/sys/bus/event_source/devices/kprobe").exists():
            return True, "kprobe PMU present"
        if root is not None and (root / "kprobe_events").exists():
            return True, "tracefs kprobe_events present"
    except PermissionError:
        conn = privsep.current()
        if conn is not None and conn.call("tracefs_has", name="kprobe_events").get("exists") is True:
            return True, "tracefs kprobe_events present (read by the privileged helper)"
        if conn is None:
            return False, "cannot tell without root (tracefs is not readable)"
    return False, "this kernel has no kprobe PMU and no kprobe_events (CONFIG_KPROBE_EVENTS off)"
