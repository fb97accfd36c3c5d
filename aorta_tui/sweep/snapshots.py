"""Environment snapshots inside a sweep.

``host_env.json`` is captured once per run; each environment gets its own snapshot, captured by
a process started with that environment's variables, so the snapshot shows the environment the
trials really ran in. Captures run in the background while trials run: they never delay the
first trial. A resumed run captures again, and the report warns when one environment's
snapshot changed between the sessions of a run.

Off the critical path: a capture runs at ``SCHED_IDLE`` (it gets only CPU time no trial
wants, so it never slows the trial it overlaps, whose timings are the point of the run), and
a thread per capture reaps it with ``wait4`` the moment it ends, recording when it ran and its
CPU time, so each trial's timeline can say which captures ran beside it and what they cost.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aorta_tui.core import spawn_gate
from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import FieldReader, Json, clip_for_message
from aorta_tui.core.rundir_fs import RunDirFS

CAPTURE_TIMEOUT_S = 60.0
_STDERR_KEPT = 64 << 10
SNAPSHOT_LIMIT = 16 << 20  # an env.json is ~60 KiB
MINIMAL_KIND = "aorta-tui-minimal-snapshot"  # docker environments: their variables only


@dataclass
class PendingCapture:
    environment: str
    path: Path
    proc: subprocess.Popen[bytes] | None
    note: str = ""
    copy_of: Path | None = None  # same environment as another capture: copy it when done
    started_ns: int | None = None  # CLOCK_MONOTONIC, as trial timelines
    ended_ns: int | None = None
    cpu_s: float | None = None  # user + system of the capture and the children it waited for
    priority: str | None = None
    stderr: bytes = b""  # what the capture said (its first 64 KiB): why it failed
    _waiter: threading.Thread | None = field(default=None, repr=False)

    def start_waiter(self) -> None:
        proc = self.proc
        if proc is None:
            return

        def wait() -> None:
            if proc.stderr is not None:  # read to its end first: a full pipe never blocks it
                with contextlib.suppress(OSError, ValueError):
                    self.stderr = proc.stderr.read(_STDERR_KEPT)
                    while proc.stderr.read(_STDERR_KEPT):
                        pass
                    proc.stderr.close()
            while True:
                try:
                    _pid, status, usage = os.wait4(proc.pid, 0)
                except InterruptedError:
                    continue
                except ChildProcessError:
                    break
                self.cpu_s = round(usage.ru_utime + usage.ru_stime, 3)
                proc.returncode = os.waitstatus_to_exitcode(status)  # Popen stays consistent
                break
            self.ended_ns = time.monotonic_ns()

        self._waiter = threading.Thread(target=wait, name=f"snapshot-{self.environment}", daemon=True)
        self._waiter.start()

    def wait(self, timeout_s: float) -> bool:
        """True when the capture ended within ``timeout_s``."""
        if self._waiter is None:
            return True
        self._waiter.join(timeout_s)
        return not self._waiter.is_alive()

    def to_dict(self) -> dict[str, Any]:
        return {"environment": self.environment, "started_ns": self.started_ns,
                "ended_ns": self.ended_ns, "cpu_s": self.cpu_s, "priority": self.priority}


def snapshot_name(environment: str, session: int) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in environment)
    return f"{safe}.json" if session <= 1 else f"{safe}.resume-{session}.json"


def start_captures(
    fs: RunDirFS,
    environments: dict[str, dict[str, str]],
    base_env: dict[str, str],
    *,
    session: int,
    include_torch: bool,
    docker: dict[str, str | None],
) -> list[PendingCapture]:
    # env/ through the run's file layer: a link in its place is refused, and each capture writes
    # into the directory this descriptor holds (handed to it as /proc/self/fd/N), so a swap of
    # env/ after this point redirects nothing
    env_fd = fs.make_dirs("env")
    try:
        return _start(fs, env_fd, environments, base_env, session=session,
                      include_torch=include_torch, docker=docker)
    finally:
        os.close(env_fd)


def _start(fs: RunDirFS, env_fd: int, environments: dict[str, dict[str, str]],
           base_env: dict[str, str], *, session: int, include_torch: bool,
           docker: dict[str, str | None]) -> list[PendingCapture]:
    env_dir = fs.root / "env"
    pending: list[PendingCapture] = []
    targets: list[tuple[str, dict[str, str]]] = []
    if session <= 1 or not (env_dir / "host_env.json").is_file():
        # once per run; again on a resume when the first session could not write it (a full
        # disk: exit 3, then the resume once space is freed)
        targets.append(("host_env", {}))
    # An environment that sets no variables runs trials in the host's own environment: its
    # snapshot is the host snapshot, so one capture serves both (finish_captures copies it).
    same_as_host = [n for n, overlay in environments.items() if not overlay and not docker.get(n)]
    if session > 1 and same_as_host:
        targets.append((same_as_host[0], {}))
    targets.extend((n, o) for n, o in environments.items() if n not in same_as_host)
    for name, overlay in targets:
        path = env_dir / ("host_env.json" if name == "host_env" else snapshot_name(name, session))
        if name != "host_env" and docker.get(name):
            from aorta_tui.core.secrets import mask_env  # a file: never a token

            _write_minimal(fs, path, name, mask_env(overlay), note="not captured inside the container image "
                           f"{docker[name]}: only the variables the environment sets are recorded")
            pending.append(PendingCapture(name, path, None))
            continue
        argv = [sys.executable, "-m", "aorta_tui.envsnap", "--output", f"/proc/self/fd/{env_fd}/{path.name}"]
        if not include_torch:
            argv.append("--no-torch")
        started = time.monotonic_ns()
        proc = spawn_gate.popen(
            argv,
            env={**base_env, **overlay},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=(env_fd,),
        )
        capture = PendingCapture(name, path, proc, started_ns=started, priority=_lower_priority(proc.pid))
        capture.start_waiter()
        pending.append(capture)
    source = next((p for p in pending if p.environment in ("host_env", *same_as_host)), None)
    for name in same_as_host:
        if source is not None and source.environment != name:
            pending.append(PendingCapture(name, env_dir / snapshot_name(name, session), None,
                                          copy_of=source.path))
    return pending


def finish_captures(fs: RunDirFS, pending: list[PendingCapture],
                    timeout_s: float = CAPTURE_TIMEOUT_S) -> list[str]:
    """Wait for the captures; returns warnings for those that failed."""
    warnings: list[str] = []
    deadline = time.monotonic() + timeout_s
    for p in pending:
        if p.proc is None:
            continue
        if not p.wait(max(0.1, deadline - time.monotonic())):
            with contextlib.suppress(OSError):
                p.proc.kill()
            p.wait(5.0)
            warnings.append(f"snapshot of environment {p.environment!r} timed out after {timeout_s:.0f}s")
            continue
        if not fs.is_file(p.path):
            _raise_write_failure(p)
            warnings.append(f"snapshot of environment {p.environment!r} failed (exit {p.proc.returncode})")
    for p in pending:
        if p.copy_of is not None and fs.is_file(p.copy_of):
            fs.copy_file(p.copy_of, p.path, limit=SNAPSHOT_LIMIT)
    return warnings


def _raise_write_failure(p: PendingCapture) -> None:
    """A capture that could not write its snapshot (a full disk, an I/O error: the envsnap
    program's exit 3 with the errno) fails the run as every other write does: exit 3 naming the
    file and the free space (store/write_errors.write_failure), never a warning and exit 0."""
    from aorta_tui.core.errors import ExitCode

    if p.proc is None or p.proc.returncode != ExitCode.ENVIRONMENT:
        return
    found = re.search(rb"\[errno (\d+)\]", p.stderr)
    code = int(found.group(1)) if found else errno.EIO
    raise OSError(code, os.strerror(code), str(p.path))


def cancel_captures(pending: list[PendingCapture]) -> None:
    for p in pending:
        if p.proc is not None and p.ended_ns is None:
            with contextlib.suppress(OSError):
                p.proc.kill()
            p.wait(5.0)


def beside_trial(pending: list[PendingCapture], start_ns: int | None, end_ns: int | None) -> dict[str, Any]:
    """The captures that ran while a trial ran (``[start_ns, end_ns]``), for its timeline."""
    ran = [p for p in pending if p.started_ns is not None]
    if not ran:
        return {"ran": False, "reason": "no snapshot capture process in this run "
                "(--no-snapshots, a resumed run's host snapshot, or docker environments only)"}
    if start_ns is None or end_ns is None:
        overlapping = ran
    else:
        overlapping = [p for p in ran if p.started_ns is not None and p.started_ns <= end_ns
                       and (p.ended_ns is None or p.ended_ns >= start_ns)]
    if not overlapping:
        return {"ran": False, "reason": "no snapshot capture ran during this trial"}
    out: dict[str, Any] = {"captures": [p.to_dict() for p in overlapping]}
    if start_ns is not None and end_ns is not None:
        out["overlap_ms"] = round(sum(
            (min(end_ns, p.ended_ns or end_ns) - max(start_ns, p.started_ns or start_ns)) / 1e6
            for p in overlapping), 3)
    return out


def _lower_priority(pid: int) -> str:
    """SCHED_IDLE for the capture (its children inherit it), else nice 19; what was set."""
    try:
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
        return "SCHED_IDLE"
    except (AttributeError, OSError):
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, pid, 19)
        return "nice 19"
    except OSError as exc:
        return f"normal (could not lower it: {exc})"


def snapshot_hash(fs: RunDirFS, path: Path,
                  schema_hash: Callable[[dict[str, Any]], str | None]) -> str | None:
    """Hash of what matters in a snapshot file of the run; ``None`` when it cannot be read.

    ``schema_hash`` is envsnap's hash of a full snapshot, handed in from above core
    (``core/services.py``); a minimal snapshot is hashed here."""
    data = fs.read_json_or_none(path, limit=SNAPSHOT_LIMIT)
    if not isinstance(data, dict):
        return None
    if data.get("kind") == MINIMAL_KIND:
        try:
            minimal = MinimalSnapshot.from_dict(data, where=str(path))
        except UsageError:
            # Refused now: a damaged minimal snapshot (its env no object of strings) was hashed
            # as written, null for a missing part; it is a snapshot that cannot be read, as a
            # file that is no JSON always was.
            return None
        return minimal.hash()
    return schema_hash(data)


def _write_minimal(fs: RunDirFS, path: Path, name: str, overlay: dict[str, str], *, note: str) -> None:
    fs.atomic_write_json(path, MinimalSnapshot.of(name, overlay, note=note).to_json())


@dataclass(frozen=True)
class MinimalSnapshot:
    """The snapshot of a docker environment (``MINIMAL_KIND``): the variables the environment
    sets and the host it ran on, not captured inside the image. One serializer,
    :meth:`to_json` (the object it has always been, key order included), one reader,
    :meth:`from_dict` (a located UsageError for a damaged one); keys a newer writer added are
    kept in ``extra``."""

    environment: str
    env: dict[str, str]  # sorted by name (the writer sorts them)
    note: str
    host: dict[str, str]  # kernel, machine, python
    schema_version: int = 0
    extra: dict[str, Json] = field(default_factory=dict)

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    @classmethod
    def of(cls, name: str, overlay: dict[str, str], *, note: str) -> MinimalSnapshot:
        """The minimal snapshot of environment ``name`` on this host."""
        host = {"kernel": platform.release(), "machine": platform.machine(),
                "python": platform.python_version()}
        return cls(environment=name, env=dict(sorted(overlay.items())), note=note, host=host)

    def to_json(self) -> dict[str, Json]:
        return {"schema_version": self.schema_version, "kind": MINIMAL_KIND, "note": self.note,
                "environment": self.environment, "env": dict(self.env), "host": dict(self.host),
                **self.extra}

    def hash(self) -> str:
        """What matters in it, hashed. envsnap's hash reads only its own schema's fields: it
        would give every minimal snapshot the same (empty) hash, hiding a changed variable."""
        blob = json.dumps({"env": self.env, "host": self.host}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: object, *, where: str) -> MinimalSnapshot:
        """A parsed minimal snapshot, typed; a damaged one is a located UsageError (exit 2)."""
        f = FieldReader(where, "minimal snapshot")
        d = f.obj(data, "(top level)")
        if d.get("kind") != MINIMAL_KIND:
            raise UsageError(f"{where}: kind: expected {MINIMAL_KIND!r}, found "
                             f"{clip_for_message(d.get('kind'), 40)}",
                             hint="this is not a minimal snapshot aorta-tui wrote")
        return cls(environment=f.text(d, "environment", "", required=True),
                   env=_strings(f, d, "env"), note=f.text(d, "note", "", required=True),
                   host=_strings(f, d, "host"),
                   schema_version=f.integer(d, "schema_version", "", required=True),
                   extra={k: v for k, v in d.items() if k not in _MINIMAL_KEYS})


_MINIMAL_KEYS = frozenset(("schema_version", "kind", "note", "environment", "env", "host"))


def _strings(f: FieldReader, d: dict[str, Any], key: str) -> dict[str, str]:
    """``d[key]``, an object of strings (required: the writer always writes it)."""
    obj = f.obj_at(d, key, "", required=True)
    return {k: f.check(v, "string", f"{key}.{k}") for k, v in obj.items()}
