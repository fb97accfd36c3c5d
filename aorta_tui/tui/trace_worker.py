"""The queue monitor's tracer, in its own process: a ``TraceSession`` streaming JSON lines.

The TUI never runs the trace engine in its own process: parsing 100k events/s costs a good
part of a core, and a tracer must outlive neither its user nor a lost terminal. This worker
prints one event per line on stdout (``HistogramSnapshot``s, a ``Measurement`` named
``attached``, ``Warning``s) and stops the session -- which detaches bpftrace -- on SIGINT or
SIGTERM, when stdout breaks, or when its parent (the TUI) is gone. No Textual here.

    python -m aorta_tui.tui.trace_worker --probes ioctl --interval 0.07 -- python work.py
    python -m aorta_tui.tui.trace_worker --pid 1234 --probes cuda
    python -m aorta_tui.tui.trace_worker --replay q.jsonl     # a `trace queue --json-stream` recording
    python -m aorta_tui.tui.trace_worker --synthetic 100000   # benchmark: no bpftrace, same parser

A traced command gets ``$AORTA_TUI_PHASE_SOCKET`` (``aorta_tui.core.phases``): a workload that
announces its phases (``queue run`` does: warm-up, measure, detail, with pauses between) has
every interval that spans a phase boundary left out of the interval metrics, and the worker
reports each phase as a ``Measurement`` named ``phase``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from aorta_tui.core.events import Event, HistogramSnapshot, Measurement, Warning

RUN_ID = "tui-queue"
REPLAY_LIMIT = 256 << 20  # a --json-stream recording of hours is far below this
REPLAY_MAX_GAP_S = 1.0  # a replay never waits longer than this between recorded lines


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


class PhaseBreaks:
    """Phase boundaries a traced workload announced, and the interval filter they make.

    An interval (the gap between consecutive events on one key) that spans a boundary --
    ``prev < boundary <= ts`` -- measures the pause between two phases, not the workload:
    it is left out and counted. Boundaries are CLOCK_MONOTONIC ns, as record timestamps are.
    """

    def __init__(self) -> None:
        import numpy as np

        self._np = np
        self.boundaries = np.zeros(0, dtype=np.int64)
        self.left_out = 0
        self.phases: list[str] = []  # the phases seen, pauses not included
        self.current = ""

    def add(self, name: str, t_ns: int) -> None:
        self.current = name
        if name != "pause" and (not self.phases or self.phases[-1] != name):
            self.phases.append(name)
        # a new array, swapped in whole: the parser thread never sees one half-written
        self.boundaries = self._np.sort(self._np.append(self.boundaries, self._np.int64(t_ns)))

    def keep(self, ts: Any, gaps: Any) -> Any:
        """Boolean mask of the intervals ending at ``ts`` that lie within one phase."""
        np, bounds = self._np, self.boundaries
        if len(bounds) == 0 or len(ts) == 0:
            return None
        first_after_prev = np.searchsorted(bounds, ts - gaps, side="right")
        nearest = bounds[np.minimum(first_after_prev, len(bounds) - 1)]
        spans = (first_after_prev < len(bounds)) & (nearest <= ts)
        if not spans.any():
            return None
        self.left_out += int(spans.sum())
        return ~spans



def leave_out_phase_pauses(session: Any, breaks: PhaseBreaks) -> bool:
    """Filter every interval ("point") metric of ``session`` through ``breaks``.

    Uses the session's public hook (``TraceSession.set_interval_filter``). False when the
    session has none; the caller then says pauses are included.
    """
    setter = getattr(session, "set_interval_filter", None)
    if not callable(setter):
        return False
    setter(breaks.keep)
    return True


def _libs(values: list[str]) -> dict[str, Path]:
    from aorta_tui.core.errors import UsageError

    out: dict[str, Path] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--lib {value!r} is not NAME=PATH", hint="e.g. --lib cuda=/usr/lib/x86_64-linux-gnu/libcuda.so.1")
        out[name] = Path(path)
    return out


def run_trace(args: argparse.Namespace, out: LineWriter, stop: threading.Event) -> int:
    from aorta_tui.core.phases import PhaseListener
    from aorta_tui.trace.session import TraceSession

    parent = os.getppid()
    breaks = PhaseBreaks()
    reported = [-1]

    def report_phase() -> None:
        reported[0] = breaks.left_out
        out.emit(Measurement(RUN_ID, source="trace", name="phase", values={
            "phase": breaks.current, "phases": list(breaks.phases), "intervals_left_out": breaks.left_out}))

    def on_phase(name: str, t_ns: int) -> None:
        breaks.add(name, t_ns)
        report_phase()

    listener = PhaseListener(on_phase) if args.command else None
    if listener is not None:
        os.environ.update(listener.env)  # the traced command inherits the worker's environment
    session = TraceSession(args.probes.split(","), pid=args.pid, command=args.command or None,
                           mode=args.mode, interval_s=args.interval, on_event=out.emit, run_id=RUN_ID,
                           library_paths=_libs(args.lib) or None)
    try:
        session.start()
        if listener is not None and not leave_out_phase_pauses(session, breaks):
            out.emit(Warning(RUN_ID, code="trace", message=(
                "this trace engine cannot leave pauses between a workload's phases out of its "
                "intervals: they are included")))
        out.emit(Measurement(RUN_ID, source="trace", name="attached",
                             values={"pid": args.pid if args.pid is not None else session.child_pid,
                                     "uprobes": session.program.uprobe_count,
                                     "tracepoints": session.program.tracepoint_count}))
        while not stop.wait(0.2):
            if breaks.current and breaks.left_out != reported[0]:
                report_phase()
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
        if listener is not None:
            listener.close()
    if breaks.current and breaks.left_out != reported[0]:
        report_phase()
    for warning in session.warnings:
        out.emit(Warning(RUN_ID, message=warning, code="trace"))
    return 0


def read_recording(path: str) -> list[Event]:
    """The events of a ``trace queue --json-stream`` recording (its last ``trace_result`` line,
    blank lines and event types the monitor does not show are skipped). A line that is not
    JSON, not an object, or not an event is a located error (exit 2)."""
    from aorta_tui.core.errors import UsageError
    from aorta_tui.core.events import event_from_dict
    from aorta_tui.core.inputs import (
        clip_for_message,
        parse_json_text,
        read_input_text,
        require_object,
    )

    hint = "record one with `aorta-tui trace queue --json-stream ... > FILE.jsonl`"
    text = read_input_text(path, what="trace recording", limit=REPLAY_LIMIT, hint=hint)
    events: list[Event] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            value = parse_json_text(line, where=path, what="trace recording", hint=hint)
        except UsageError as exc:  # one line parsed alone says line 1: name the file's line
            first = f"{path}:1:"
            message = where + ":" + exc.message[len(first):] if exc.message.startswith(first) else exc.message
            raise UsageError(message, hint=hint) from None
        data = require_object(value, where=where, what="trace recording line", hint=hint)
        if data.get("event") == "trace_result":
            continue
        try:
            event = event_from_dict(data)
        except (ValueError, TypeError) as exc:
            raise UsageError(f"{where}: not an event of the journal's format: {clip_for_message(str(exc))}",
                             hint=hint) from None
        if isinstance(event, HistogramSnapshot) and not _snapshot_is_sound(event):
            raise UsageError(f"{where}: histogram_snapshot {clip_for_message(event.probe_set)} has "
                             "malformed fields (buckets must be [low, high, count] numbers, count an "
                             "integer, percentiles numbers or null)", hint=hint)
        if isinstance(event, (HistogramSnapshot, Measurement, Warning)):
            events.append(event)
    if not any(isinstance(e, HistogramSnapshot) for e in events):
        raise UsageError(f"{path}: the recording holds no histogram_snapshot line", hint=hint)
    return events


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _snapshot_is_sound(snap: HistogramSnapshot) -> bool:
    """The fields the monitor draws have the types it draws them with."""
    return (
        isinstance(snap.probe_set, str) and isinstance(snap.measures, str) and isinstance(snap.unit, str)
        and isinstance(snap.count, int) and not isinstance(snap.count, bool)
        and isinstance(snap.buckets, list)
        and all(isinstance(b, list) and len(b) == 3 and all(map(_number, b)) for b in snap.buckets)
        and isinstance(snap.percentiles, dict)
        and all(v is None or _number(v) for v in snap.percentiles.values())
        and _number(snap.events_per_s)
        and (snap.lost_events is None or isinstance(snap.lost_events, int))
        and isinstance(snap.malformed_lines, int)
        and isinstance(snap.breakdown, dict)
        and all(isinstance(v, dict) and all(x is None or _number(x) for x in v.values())
                for v in snap.breakdown.values())
        and isinstance(snap.observer_cost, dict)
        and all(snap.observer_cost.get(k) is None or _number(snap.observer_cost[k])
                for k in ("per_hit_us", "cpu_fraction"))
        and isinstance(snap.clock, dict)
    )


def run_replay(args: argparse.Namespace, out: LineWriter, stop: threading.Event) -> int:
    """Send a recording's events as a live trace would, paced by their recorded times."""
    events = read_recording(args.replay)
    out.emit(Measurement(RUN_ID, source="trace", name="attached",
                         values={"pid": None, "replayed_from": args.replay, "uprobes": 0, "tracepoints": 0}))
    previous: float | None = None
    for event in events:
        ts = event.ts if _number(event.ts) else None
        if previous is not None and ts is not None and stop.wait(min(max(0.0, ts - previous), REPLAY_MAX_GAP_S)):
            return 0
        previous = ts if ts is not None else previous
        out.emit(event)
        if stop.is_set():
            return 0
    out.emit(Warning(RUN_ID, code="target_exited",
                     message=f"the recording ends here ({len(events)} events replayed)"))
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
    parser.add_argument("--replay", metavar="FILE.jsonl")
    parser.add_argument("--lib", action="append", default=[], metavar="NAME=PATH")
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
        if args.synthetic:
            return run_synthetic(args, out, stop)
        return run_replay(args, out, stop) if args.replay else run_trace(args, out, stop)
    except Exception as exc:  # reported as an event the TUI shows, with a typed exit code
        out.emit(Warning(RUN_ID, message=_render(exc), code="error"))
        return int(getattr(exc, "exit_code", 1))


if __name__ == "__main__":
    sys.exit(main())
