"""What the sweep uses from the layers above core, handed in by the front end.

``core`` imports nothing above it (the import-linter ``layers`` contract in pyproject.toml,
docs/architecture.md). A sweep still attaches a recipe's eBPF probes around each trial and hashes
environment snapshots, and those belong to ``trace`` and ``envsnap``: the front end that builds
the ``Sweep`` passes them in (``sweep/drive.sweep_services()``), as memray's TUI is handed
its reader.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from aorta_tui.core.errors import EnvironmentProblem


@dataclass(frozen=True)
class SweepServices:
    #: raises ``AortaError`` when tracing cannot attach here (no bpftrace, no privilege)
    require_tracing: Callable[[], None]
    #: a ``trace.session.TraceSession``: ``(probes, *, mode, on_event, run_id, calibrate,
    #: inject_children)`` -> an object with ``start()``, ``stop()``, ``result()``, ``child_env``
    trace_session: Callable[..., Any]
    #: envsnap's hash of a snapshot document (equal environments hash equal; None: not hashed)
    snapshot_hash: Callable[[dict[str, Any]], str | None]


def _no_tracing(*_args: object, **_kwargs: object) -> NoReturn:
    raise EnvironmentProblem("this front end runs sweeps without eBPF tracing",
                             hint="run the recipe with `aorta-tui --batch` or `aorta-tui sweep run`")


def _no_hash(_snapshot: dict[str, Any]) -> str | None:
    return None


#: A sweep built without services: tracing is refused with a reason, snapshots are not hashed.
NO_SERVICES = SweepServices(require_tracing=_no_tracing, trace_session=_no_tracing, snapshot_hash=_no_hash)
