"""The queue monitor's tracer, in its own process: a ``TraceSession`` streaming JSON lines.

The TUI never runs the trace engine in its own process: parsing 100k events/s costs a good
part of a core, and a tracer must outlive neither its user nor a lost terminal. This worker
prints one event per line on stdout (``HistogramSnapshot``s, a ``Measurement`` named
``attached``, ``Warning``s) and stops the session -- which detaches bpftrace -- on SIGINT or
SIGTERM, when stdout breaks, or when its parent (the TUI) is gone. No Textual here.

    python -m aorta_tui.tui.trace_worker --probes ioctl --interval 0.07 -- python work.py
    python -m aorta_tui.tui.trace_worker --pid 1234 --probes cuda
    python -m aorta_tui.tui.trace_worker --synthetic 100000   # benchmark: no bpftrace, same parser
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time

from aorta_tui.core.events import Event, HistogramSnapshot, Measurement, Warning

RUN_ID = "tui-queue"


class LineWriter:
    """Thread-safe JSON-lines writer; a broken pipe (the TUI went away) sets ``stop``."""

    def __init__(self, stop: threading.Event, stream) -> None:  # noqa: ANN001 - a text file
        self._lock = threading.Lock()
        self._stop = stop
        self._stream = stream

    def emit(self, event: Event) -> None:
        line = json.dumps(event.to_dict(), default=str)
        with self._lock:
            try:
                self._stream.write(line + "\n")
                self._stream.flush()
            except (BrokenPipeError, ValueError, OSError):
                self._stop.set()


def _render(exc: BaseException) -> str:
    render = getattr(exc, "render", None)
    return render() if callable(render) else f"{type(exc).__name__}: {exc}"


def run_trace(args: argparse.Namespace, out: LineWriter, stop: threading.Event) -> int:
    from aorta_tui.trace.session import TraceSession

    parent = os.getppid()
    session = TraceSession(args.probes.split(","), pid=args.pid, command=args.command or None,
                           mode=args.mode, interval_s=args.interval, on_event=out.emit, run_id=RUN_ID)
    try:
        session.start()
        out.emit(Measurement(RUN_ID, source="trace", name="attached",
                             values={"pid": args.pid if args.pid is not None else session.child_pid,
                                     "uprobes": session.program.uprobe_count,
                                     "tracepoints": session.program.tracepoint_count}))
        while not stop.wait(0.2):
            if os.getppid() != parent:
                break  # the TUI died (lost terminal): never keep tracing for nobody
            if session.command and session.wait(0) is not None:
                out.emit(Warning(RUN_ID, message=f"the traced command exited with {session.child_returncode}",
                                 code="target_exited"))
                break
            if args.pid is not None and not os.path.exists(f"/proc/{args.pid}"):
                out.emit(Warning(RUN_ID, message=f"process {args.pid} exited", code="target_exited"))
                break
    finally:
        session.stop()
    for warning in session.warnings:
        out.emit(Warning(RUN_ID, message=warning, code="trace"))
    return 0


def run_synthetic(args: argparse.Namespace, out: LineWriter, stop: threading.Event) -> int:
    """The same parser and statistics fed pre-generated record lines at ``--synthetic``/s."""
    import numpy as np

    from aorta_tui.trace.metrics import Metric
    from aorta_tui.trace.parser import RecordParser
    from aorta_tui.trace.stats import MetricStats, split_batch

    rate = args.synthetic
    per_batch = max(1, rate // 100)  # a batch every 10 ms, as a pipe reader sees them
    rng = np.random.default_rng(7)
    batches, ts = [], 1_000_000_000
    for _ in range(100):
        values = rng.lognormal(mean=8.0, sigma=0.6, size=per_batch).astype(np.int64).tolist()
        keys = rng.integers(0, 16, size=per_batch).tolist()
        lines = []
        for v, k in zip(values, keys, strict=True):
            ts += 10_000
            lines.append(f"@R 0 {ts} 4242 4243 {k} {v} 0 -\n")  # as read from the pipe
        batches.append(lines)
    metric = Metric("latency", "duration", "synthetic record lines through the trace engine (benchmark)",
                    key_name="stream", probe_type="tracepoint")
    stats, parser = {0: MetricStats(metric)}, RecordParser()
    t0 = last = time.perf_counter()
    k = done = 0
    while not stop.is_set():
        batch = parser.feed(batches[k % len(batches)])
        split_batch(batch, stats)
        done += len(batch)
        k += 1
        now = time.perf_counter()
        if now - last >= args.interval:
            s = stats[0].summary(now - t0)
            out.emit(HistogramSnapshot(
                RUN_ID, probe_set="synthetic.latency", measures=s["histogram_measures"], unit=s["unit"],
                count=s["count"], buckets=s["histogram"]["buckets"], percentiles=s["histogram"]["percentiles"],
                events_per_s=done / (now - t0), breakdown=s["breakdown"],
            ))
            last = now
        stop.wait(max(0.0, t0 + k / 100 - time.perf_counter()))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(prog="python -m aorta_tui.tui.trace_worker")
    parser.add_argument("--probes", default="cuda")
    parser.add_argument("--pid", type=int)
    parser.add_argument("--mode", default="events")
    parser.add_argument("--interval", type=float, default=0.07)
    parser.add_argument("--synthetic", type=int, default=0)
    args = parser.parse_args(argv)
    args.command = command
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    # The event stream gets a private copy of stdout; fd 1 itself goes where stderr goes, so
    # that a traced command's own output can never mix into the JSON lines.
    stream = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    out = LineWriter(stop, stream)
    try:
        return run_synthetic(args, out, stop) if args.synthetic else run_trace(args, out, stop)
    except Exception as exc:  # reported as an event the TUI shows, with a typed exit code
        out.emit(Warning(RUN_ID, message=_render(exc), code="error"))
        return int(getattr(exc, "exit_code", 1))


if __name__ == "__main__":
    sys.exit(main())
