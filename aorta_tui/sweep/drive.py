"""Driving a recipe sweep to its end: the services it is handed and the signals that stop it.

Every caller that runs a :class:`~aorta_tui.sweep.orchestrator.Sweep` (``sweep run`` and ``run``
on the command line, the engine entry ``sweep/child.py`` the agent starts) builds its services
with :func:`sweep_services` and runs it with :func:`run_until_done`.
"""

from __future__ import annotations

import contextlib
import os
import signal
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aorta_tui.core.events import EventBus
    from aorta_tui.core.services import SweepServices
    from aorta_tui.sweep.orchestrator import Sweep, SweepOutcome
    from aorta_tui.sweep.way_in import SweepRequest
    from aorta_tui.trace.session import TraceSession


def sweep_for_request(req: SweepRequest, bus: EventBus) -> Sweep:
    """The sweep a request asks for, on ``bus``: a resumed run's trust checked before any of it
    is read (its recipe names the command), the mitigations (and the agent's secret values, held
    in memory only) registered, the recipe made once (``way_in``)."""
    from aorta_tui.registry.registry import Registry
    from aorta_tui.sweep.orchestrator import Sweep, SweepOptions
    from aorta_tui.sweep.way_in import recipe_for_request

    if req.resume is not None:
        from aorta_tui.store.trust_guard import guard_run_dir

        guard_run_dir(req.resume, ["sweep", "run", "--resume", str(req.resume)],
                      trusted=req.trust_run_dir)
    registry = Registry(req.mitigation_files)
    if req.secret_values_fd is not None:  # `agent --env-candidate HF_TOKEN=...`: never a file
        from aorta_tui.core.secrets import receive_secret_values

        registry.fill_masked(receive_secret_values(req.secret_values_fd))
    recipe = recipe_for_request(req, registry)
    options = SweepOptions(
        output=req.output, resume=req.resume, order=req.order, seed=req.seed, strict=req.strict,
        snapshots=req.snapshots, ticket=req.ticket,
        steps=req.steps if req.recipe is not None else None, services=sweep_services(),
    )
    return Sweep(recipe, registry, options, bus)


def sweep_services() -> SweepServices:
    """The tracing and snapshot hashing a sweep uses, from above core (core/services.py).

    Imported when a sweep needs them, so `--help` and a dry run of an untraced recipe never pay
    for the trace engine."""
    from aorta_tui.core.services import SweepServices

    def require_tracing() -> None:
        from aorta_tui.trace import capability

        capability.require_bpftrace(None)
        capability.require_privilege()

    def trace_session(*args: Any, **kwargs: Any) -> TraceSession:
        from aorta_tui.trace.session import TraceSession

        return TraceSession(*args, **kwargs)

    def snapshot_hash(snapshot: dict[str, Any]) -> str:
        from aorta_tui.envsnap import snapshot_hash as envsnap_hash

        return envsnap_hash(snapshot)

    return SweepServices(require_tracing=require_tracing, trace_session=trace_session,
                         snapshot_hash=snapshot_hash)


def run_until_done(sweep: Sweep, bus: EventBus) -> SweepOutcome:
    """Run the sweep with Ctrl-C, SIGTERM and SIGHUP stopping the running trial cleanly.

    A second signal (of any of them) SIGKILLs the running trial instead of giving it its
    grace; the clean-up itself (the matrix, ``run_finished``) is never cut short by a signal,
    however many arrive: a run stopped half-way through writing its last word is one that says
    nothing (issue 37 item 10). The run stays resumable either way.
    """

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        # os.write, not print: a signal arriving inside another print to stderr would make
        # print re-enter the stream's buffer (RuntimeError: reentrant call)
        name = signal.Signals(signum).name
        if sweep.cancel.is_set():
            if not sweep.cancel.now:
                sweep.cancel.hurry()
                _say(f"\n{name} again: ending the running trial now (SIGKILL); the run still "
                     "writes its matrix and stays resumable\n")
            return
        sweep.cancel.set()
        _say(f"\n{name}: stopping the running trial; the run stays resumable\n")

    # A signal ignored by whoever started us stays ignored, as the CLI's first lines and
    # cli/common.stop_signals_interrupt keep it: `nohup aorta-tui --batch ...` must outlive the
    # hangup (this took SIGHUP over, so a logout stopped the sweep once its trials had begun).
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
                if signal.getsignal(s) is not signal.SIG_IGN}

    def after_the_run(signum: int, frame: FrameType | None) -> None:
        # A run that finished without a stop: a signal now does what it did before the run
        handler = previous.get(signal.Signals(signum))
        if callable(handler):
            handler(signum, frame)
        elif handler == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    try:
        return sweep.run()
    finally:
        # Stopped by a signal: more of them change nothing, and they are ignored in the kernel
        # (SIG_IGN), because Python puts SIG_DFL back for its own handlers as it exits: a press
        # landing then would kill the finished run by the signal instead of its exit 130.
        stopped = sweep.cancel.is_set()
        for s in previous:
            signal.signal(s, signal.SIG_IGN if stopped else after_the_run)
        bus.close()


def _say(text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, text.encode())
