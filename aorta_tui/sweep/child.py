"""A recipe sweep in a process of its own: ``python -m aorta_tui.sweep.child REQUEST.json``.

The engine entry point the agent starts for each iteration (it ran the command line, `sweep
run --json`, before). The caller writes a :class:`~aorta_tui.sweep.way_in.SweepRequest` with
:func:`~aorta_tui.sweep.way_in.write_request`; the sweep's events come out on stdout as JSON
lines (the objects journal.jsonl holds), run_started first and run_finished last; the exit
status is the CLI's (0, 1 when a trial failed, 2, 3, 70, 130: ``core/engine_entry.py``).
Ctrl-C, SIGTERM and SIGHUP stop the running trial and leave the run resumable, as for the CLI.
"""

from __future__ import annotations

import os
import signal
import sys


def _leave_while_starting(_signum: int, _frame: object) -> None:
    # Ctrl-C, SIGTERM or SIGHUP before the sweep runs: nothing exists that needs cleaning up,
    # so leave at once with the one line and exit 130 (the agent's "interrupted"), as the
    # command line's start-up does (cli/quiet_start.py), never a traceback or a death by signal
    os.write(2, b"interrupted\n")
    os._exit(130)


def main(argv: list[str]) -> int:
    # the first thing it does; drive.run_until_done puts the sweep's own clean stop in place
    # (a signal ignored by whoever started us stays ignored)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _leave_while_starting)
    from aorta_tui.core.engine_entry import run_entry

    def body() -> int:
        from aorta_tui.core.errors import UsageError
        from aorta_tui.core.events import EventBus, JsonSink
        from aorta_tui.sweep.drive import run_until_done, sweep_for_request
        from aorta_tui.sweep.way_in import read_request

        if len(argv) != 1:
            raise UsageError("usage: python -m aorta_tui.sweep.child REQUEST.json")
        bus = EventBus()
        sweep = sweep_for_request(read_request(argv[0]), bus)
        bus.add(JsonSink())
        return int(run_until_done(sweep, bus).exit_code)

    return run_entry(body)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
