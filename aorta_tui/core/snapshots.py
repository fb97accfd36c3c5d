"""Environment snapshots inside a sweep.

``host_env.json`` is captured once per run; each environment gets its own snapshot, captured by
a process started with that environment's variables, so the snapshot shows the environment the
trials really ran in. Captures run in the background while trials run: they never delay the
first trial. A resumed run captures again, and the report warns when one environment's
snapshot changed between the sessions of a run.
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aorta_tui.core.atomic import atomic_write_json

CAPTURE_TIMEOUT_S = 60.0
MINIMAL_KIND = "aorta-tui-minimal-snapshot"  # docker environments: their variables only


@dataclass
class PendingCapture:
    environment: str
    path: Path
    proc: subprocess.Popen[bytes] | None
    note: str = ""
    copy_of: Path | None = None  # same environment as another capture: copy it when done


def snapshot_name(environment: str, session: int) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in environment)
    return f"{safe}.json" if session <= 1 else f"{safe}.resume-{session}.json"


def start_captures(
    run_dir: Path,
    environments: dict[str, dict[str, str]],
    base_env: dict[str, str],
    *,
    session: int,
    include_torch: bool,
    docker: dict[str, str | None],
) -> list[PendingCapture]:
    env_dir = run_dir / "env"
    env_dir.mkdir(exist_ok=True)
    pending: list[PendingCapture] = []
    targets: list[tuple[str, dict[str, str]]] = []
    if session <= 1:
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

            _write_minimal(path, name, mask_env(overlay), note="not captured inside the container image "
                           f"{docker[name]}: only the variables the environment sets are recorded")
            pending.append(PendingCapture(name, path, None))
            continue
        argv = [sys.executable, "-m", "aorta_tui.envsnap", "--output", str(path)]
        if not include_torch:
            argv.append("--no-torch")
        proc = subprocess.Popen(
            argv,
            env={**base_env, **overlay},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        pending.append(PendingCapture(name, path, proc))
    source = next((p for p in pending if p.environment in ("host_env", *same_as_host)), None)
    for name in same_as_host:
        if source is not None and source.environment != name:
            pending.append(PendingCapture(name, env_dir / snapshot_name(name, session), None,
                                          copy_of=source.path))
    return pending


def finish_captures(pending: list[PendingCapture], timeout_s: float = CAPTURE_TIMEOUT_S) -> list[str]:
    """Wait for the captures; returns warnings for those that failed."""
    warnings: list[str] = []
    deadline = time.monotonic() + timeout_s
    for p in pending:
        if p.proc is None:
            continue
        try:
            p.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.proc.kill()
            p.proc.wait()
            warnings.append(f"snapshot of environment {p.environment!r} timed out after {timeout_s:.0f}s")
            continue
        if not p.path.is_file():
            warnings.append(f"snapshot of environment {p.environment!r} failed (exit {p.proc.returncode})")
    for p in pending:
        if p.copy_of is not None and p.copy_of.is_file():
            shutil.copyfile(p.copy_of, p.path)
    return warnings


def cancel_captures(pending: list[PendingCapture]) -> None:
    for p in pending:
        if p.proc is not None and p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()


def snapshot_hash(path: Path) -> str | None:
    """Hash of what matters in a snapshot file; ``None`` when it cannot be read."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if data.get("kind") == MINIMAL_KIND:
        # envsnap's hash reads only its own schema's fields: it would give every minimal
        # snapshot the same (empty) hash, hiding a changed variable.
        blob = json.dumps({"env": data.get("env"), "host": data.get("host")}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]
    from aorta_tui.envsnap import snapshot_hash as envsnap_hash

    return envsnap_hash(data)


def _write_minimal(path: Path, name: str, overlay: dict[str, str], *, note: str) -> None:
    snap: dict[str, Any] = {
        "schema_version": 0,
        "kind": MINIMAL_KIND,
        "note": note,
        "environment": name,
        "env": dict(sorted(overlay.items())),
        "host": {
            "kernel": platform.release(),
            "machine": platform.machine(),
            "python": platform.python_version(),
        },
    }
    atomic_write_json(path, snap)
