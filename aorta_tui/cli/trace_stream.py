"""`trace queue|memory --json`: the trace engine as one event stream on stdout.

The stream is what every long command's ``--json`` is (docs/cli.md): a ``RunStarted``
line first, then ``HistogramSnapshot``s as each interval ends, a ``Measurement`` named
``attached`` once the probes are in, ``phase`` measurements when the traced workload announces
its phases, ``RunWarning``s (``code`` ``target_exited`` when the target ended, ``error`` when the
trace failed), and a ``RunFinished`` last whose ``summary["result"]`` is the result document
(``-o``'s). Every line is an event ``event_from_dict`` accepts.

The TUI's trace monitor runs this through ``relay.engine_run.EngineRun``; it also replays a
recording of such a stream (``--replay FILE``) and feeds synthetic record lines through the
parser (``--synthetic N``, the benchmark). Stream mode stops -- detaching bpftrace -- when
stdout breaks or when its parent is gone (a TUI killed with its terminal), never tracing for
nobody.

A traced command gets ``$AORTA_TUI_PHASE_SOCKET`` (``aorta_tui.core.phases``): a workload that
announces its phases (``queue run`` does: warm-up, measure, detail, with pauses between) has
every interval that spans a phase boundary left out of the interval metrics.
"""

from __future__ import annotations

import _thread
import os
import threading
import time
from typing import TYPE_CHECKING, Any, TextIO

from aorta_tui.core.errors import AortaError, UsageError
from aorta_tui.core.events import (
    Event,
    HistogramSnapshot,
    Measurement,
    RunFinished,
    RunStarted,
    RunWarning,
    event_line,
)

if TYPE_CHECKING:  # the session is imported by the command that starts one, not at --help
    import numpy as np
    import numpy.typing as npt

    from aorta_tui.trace.session import TraceSession

RUN_ID = "trace"
REPLAY_LIMIT = 256 << 20  # a --json recording of hours is far below this
REPLAY_MAX_GAP_S = 1.0  # a replay never waits longer than this between recorded lines
RECORDING_HINT = "record one with `aorta-tui trace queue --json ... > FILE.jsonl`"


class StreamWriter:
    """Thread-safe JSON-lines writer on a private copy of stdout.

    The trace engine's threads, the phase listener and the main thread all write here. A
    broken pipe (the reader went away) sets ``gone`` and interrupts the main thread, which
    then stops the session as Ctrl-C would.
    """

    def __init__(self, stream: TextIO) -> None:
        self._lock = threading.Lock()
        self._stream = stream
        self.gone = threading.Event()

    def emit(self, event: Event) -> None:
        line = event_line(event)
        with self._lock:
            if self.gone.is_set():
                return
            try:
                self._stream.write(line + "\n")
                self._stream.flush()
            except (BrokenPipeError, ValueError, OSError):
                self.gone.set()
                if threading.current_thread() is not threading.main_thread():
                    _thread.interrupt_main()

    def close(self) -> None:
        """Nothing to do: each line is flushed as written, and the private copy of stdout
        stays open until the process exits (a late line after a close would be lost)."""
        return None


def open_stream() -> StreamWriter:
    """The event stream gets a private copy of stdout; fd 1 itself goes where stderr goes, so a
    traced command's (or a library's) own output can never mix into the JSON lines."""
    stream = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    return StreamWriter(stream)


def started(out: StreamWriter, output: str = "") -> None:
    out.emit(RunStarted(RUN_ID, source="trace", run_dir=output, total=0))


def failed(out: StreamWriter, exc: BaseException, *, run_id: str = RUN_ID) -> None:
    """A failure as the stream's last two events (the CLI also prints it on stderr)."""
    from aorta_tui.cli.stream_end import ending_events

    for event in ending_events(run_id, exc):
        out.emit(event)


def finished(out: StreamWriter, result: dict[str, Any] | None, *, interrupted: bool, exit_code: int,
             run_id: str = RUN_ID) -> None:
    """The stream's last event; ``summary["result"]`` is the command's result document."""
    status = "interrupted" if interrupted else "completed"
    out.emit(RunFinished(run_id, status=status, exit_code=exit_code,
                         summary={"result": result} if result is not None else {}))


# --- phases ---------------------------------------------------------------------------------


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

    def keep(self, ts: npt.NDArray[np.int64], gaps: npt.NDArray[np.int64]
             ) -> npt.NDArray[np.bool_] | None:
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


class PhaseReporter:
    """Listens for a traced command's phase announcements and streams each as a measurement."""

    def __init__(self, out: StreamWriter) -> None:
        from aorta_tui.core.phases import PhaseListener

        self.out = out
        self.breaks = PhaseBreaks()
        self._reported = -1
        self.listener = PhaseListener(self._on_phase)
        os.environ.update(self.listener.env)  # the traced command inherits our environment

    def _on_phase(self, name: str, t_ns: int) -> None:
        self.breaks.add(name, t_ns)
        self.report()

    def report(self) -> None:
        b = self.breaks
        self._reported = b.left_out
        self.out.emit(Measurement(RUN_ID, source="trace", name="phase", values={
            "phase": b.current, "phases": list(b.phases), "intervals_left_out": b.left_out}))

    def report_if_changed(self) -> None:
        if self.breaks.current and self.breaks.left_out != self._reported:
            self.report()

    def attach_to(self, session: TraceSession) -> None:
        """Filter every interval metric of ``session`` (``TraceSession.set_interval_filter``)."""
        setter = getattr(session, "set_interval_filter", None)
        if callable(setter):
            setter(self.breaks.keep)
            return
        self.out.emit(RunWarning(RUN_ID, code="trace", message=(
            "this trace engine cannot leave pauses between a workload's phases out of its "
            "intervals: they are included")))

    def close(self) -> None:
        self.listener.close()


def attached(out: StreamWriter, session: TraceSession, pid: int | None) -> None:
    src = session.device.launch_source_info() if session.device is not None else None
    out.emit(Measurement(RUN_ID, source="trace", name="attached",
                         values={"pid": pid if pid is not None else session.child_pid,
                                 "uprobes": session.rendered_program().uprobe_count,
                                 "tracepoints": session.rendered_program().tracepoint_count},
                         # where launches come from (issue 24): "collector: ..." or "ebpf: ..."
                         reasons={"launch_source": f"{src['mode']}: {src['why']}"} if src else {}))


def wait_streaming(session: TraceSession, out: StreamWriter, *, pid: int | None, duration: float | None,
                   phases: PhaseReporter | None) -> bool:
    """Until the target ends (True), ``duration`` passes, the reader or our parent is gone."""
    parent = os.getppid()
    deadline = None if duration is None else time.monotonic() + duration
    while True:
        left = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
        if left <= 0:
            return False
        if session.wait_target(timeout=left):
            if pid is not None:
                out.emit(RunWarning(RUN_ID, message=f"process {pid} exited", code="target_exited"))
            else:
                out.emit(RunWarning(RUN_ID, message=f"the traced command exited with {session.child_returncode}",
                                 code="target_exited"))
            return True
        if phases is not None:
            phases.report_if_changed()
        if out.gone.is_set() or os.getppid() != parent:
            raise KeyboardInterrupt  # the reader (the TUI) is gone: never trace for nobody


# --- replay of a recording --------------------------------------------------------------------


def read_recording(path: str) -> list[Event]:
    """The events of a ``--json`` recording that the monitor shows (snapshots,
    measurements, warnings; run_started / run_finished and the older last line
    ``trace_result`` are skipped). A line that is not JSON, not an object, or not an event is
    a located error (exit 2)."""
    from aorta_tui.core.events import event_from_dict
    from aorta_tui.core.inputs import (
        clip_for_message,
        parse_json_text,
        read_input_text,
        require_object,
    )

    text = read_input_text(path, what="trace recording", limit=REPLAY_LIMIT, hint=RECORDING_HINT)
    events: list[Event] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            value = parse_json_text(line, where=path, what="trace recording", hint=RECORDING_HINT)
        except UsageError as exc:  # one line parsed alone says line 1: name the file's line
            first = f"{path}:1:"
            message = where + ":" + exc.message[len(first):] if exc.message.startswith(first) else exc.message
            raise UsageError(message, hint=RECORDING_HINT) from None
        data = require_object(value, where=where, what="trace recording line", hint=RECORDING_HINT)
        if data.get("event") == "trace_result":
            continue
        try:
            event = event_from_dict(data)
        except (ValueError, TypeError) as exc:
            raise UsageError(f"{where}: not an event of the journal's format: {clip_for_message(str(exc))}",
                             hint=RECORDING_HINT) from None
        if isinstance(event, HistogramSnapshot) and not _snapshot_is_sound(event):
            raise UsageError(f"{where}: histogram_snapshot {clip_for_message(event.probe_set)} has "
                             "malformed fields (buckets must be [low, high, count] numbers, count an "
                             "integer, percentiles numbers or null)", hint=RECORDING_HINT)
        if isinstance(event, (HistogramSnapshot, Measurement, RunWarning)):
            events.append(event)
    if not any(isinstance(e, HistogramSnapshot) for e in events):
        raise UsageError(f"{path}: the recording holds no histogram_snapshot line", hint=RECORDING_HINT)
    return events


def _number(value: object) -> bool:
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


def replay(path: str, out: StreamWriter) -> None:
    """Send a recording's events as a live trace would, paced by their recorded times."""
    events = read_recording(path)
    out.emit(Measurement(RUN_ID, source="trace", name="attached",
                         values={"pid": None, "replayed_from": path, "uprobes": 0, "tracepoints": 0}))
    pause = threading.Event()  # never set: a wait that Ctrl-C interrupts, not a sleep loop
    previous: float | None = None
    for event in events:
        ts = event.ts if _number(event.ts) else None
        if previous is not None and ts is not None:
            pause.wait(min(max(0.0, ts - previous), REPLAY_MAX_GAP_S))
        previous = ts if ts is not None else previous
        out.emit(event)
        if out.gone.is_set():
            raise KeyboardInterrupt
    out.emit(RunWarning(RUN_ID, code="target_exited",
                     message=f"the recording ends here ({len(events)} events replayed)"))


# --- synthetic load (the benchmark) -----------------------------------------------------------


def synthetic(rate: int, interval: float, out: StreamWriter) -> None:
    """The same parser and statistics fed pre-generated record lines at ``rate``/s, until
    stopped (Ctrl-C, SIGINT to the group, or the reader gone)."""
    import numpy as np

    from aorta_tui.trace.metrics import Metric
    from aorta_tui.trace.parser import RecordParser
    from aorta_tui.trace.stream_stats import MetricStats, split_batch

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
    pause = threading.Event()
    t0 = last = time.perf_counter()
    k = done = 0
    while not out.gone.is_set():
        batch = parser.feed(batches[k % len(batches)])
        split_batch(batch, stats)
        done += len(batch)
        k += 1
        now = time.perf_counter()
        if now - last >= interval:
            s = stats[0].summary(now - t0)
            out.emit(s.snapshot(RUN_ID, "synthetic.latency", events_per_s=done / (now - t0)))
            last = now
        pause.wait(max(0.0, t0 + k / 100 - time.perf_counter()))
    raise KeyboardInterrupt


def run_offline(out: StreamWriter, *, replay_path: str | None, rate: int, interval: float) -> None:
    """``--replay`` / ``--synthetic``: the stream without bpftrace. Ctrl-C ends it cleanly."""
    try:
        if replay_path is not None:
            replay(replay_path, out)
        else:
            synthetic(rate, interval, out)
    except KeyboardInterrupt:
        finished(out, None, interrupted=True, exit_code=0)
        return
    except AortaError as exc:
        failed(out, exc)
        raise
    finished(out, None, interrupted=False, exit_code=0)
