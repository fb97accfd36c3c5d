"""``TraceSession``: attach probe sets to a pid or a command, stream statistics, stop cleanly.

Usable from any thread and as a context manager::

    with TraceSession(["cuda"], pid=os.getpid(), on_event=bus.emit) as s:
        run_workload()
    result = s.result()

Every ``interval_s`` one :class:`~aorta_tui.core.events.HistogramSnapshot` per metric is
emitted through ``on_event`` (cumulative histogram, rate over the last interval).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from aorta_tui.core import spawn_gate
from aorta_tui.core.errors import EnvironmentProblem, UsageError
from aorta_tui.core.events import Event
from aorta_tui.privsep import client as privsep
from aorta_tui.trace import capability, program, tracefs
from aorta_tui.trace.launcher import ProgramSpec
from aorta_tui.trace.parser import Batch, RecordParser
from aorta_tui.trace.result_doc import (
    CollectorLaunches,
    DeviceRecords,
    KernelRecords,
    LaunchSource,
    MetricResult,
    MetricSummary,
    ProbeSetResult,
    Records,
    TraceResult,
    TraceTarget,
)
from aorta_tui.trace.runner import BpftraceRunner
from aorta_tui.trace.stream_stats import MetricStats, split_batch

if TYPE_CHECKING:  # imported where they run (calibrate's and the collector's imports stay off a
    # trace's start-up)
    import numpy as np
    from numpy.typing import NDArray

    from aorta_tui.trace.calibrate import Calibration
    from aorta_tui.trace.device.attach import DeviceSide
    from aorta_tui.trace.probes import ProbeDetection, ProbeSet

# The command waits on this pipe until every probe is attached, then execs.
# It runs the command only on the go byte: if tracing fails to start, the pipe closes and the
# command never runs untraced.
_GATE = (
    "import os,sys\n"
    "fd=int(sys.argv[1]); go=os.read(fd,1); os.close(fd)\n"
    "if go != b'g': sys.exit(125)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])"
)


def raw_lines(names: Mapping[int, tuple[str, str, str]], metric: Sequence[int], ts: Sequence[int],
              pid: Sequence[int], tid: Sequence[int | None], key: Sequence[int], value: Sequence[int],
              aux: Sequence[int | None], labels: Sequence[str | None]) -> str:
    """Raw records as JSON lines, exactly what ``json.dumps(record, separators=(",", ":"))`` writes,
    at a quarter or less of its cost (json.dumps of one dict per record, measured on the 2-core
    box): the reader thread writes them while bpftrace waits on the pipe. Only labels (any
    text) and the names go through json."""
    prefix = {mid: '{"set":' + json.dumps(ps) + ',"metric":' + json.dumps(mn) + ',"kind":' + json.dumps(kind)
                   + ',"ts_ns":' for mid, (ps, mn, kind) in names.items()}
    unknown = '{"set":"?","metric":"?","kind":"point","ts_ns":'
    out = [f'{prefix.get(m, unknown)}{t},"pid":{p},"tid":{"null" if d is None else d},"key":{k},"value":{v},'
           f'"aux":{"null" if a is None else a},"label":{"null" if lb is None else json.dumps(lb)}}}'
           for m, t, p, d, k, v, a, lb in zip(metric, ts, pid, tid, key, value, aux, labels, strict=True)]
    return "\n".join(out) + "\n" if out else ""


class TraceSession:
    def __init__(
        self,
        probes: list[str],
        *,
        pid: int | None = None,
        command: list[str] | None = None,
        mode: str = "events",
        interval_s: float = 1.0,
        bpftrace: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        raw_path: Path | None = None,
        library_paths: dict[str, Path] | None = None,
        tracefs_root: Path | None = None,
        calibrate: bool = True,
        heartbeat_ms: int = 200,
        run_id: str = "trace",
        attach_timeout_s: float = 60.0,
        command_stdout_to_stderr: bool = False,
        device_timestamps: str = "auto",
        device_side: DeviceSide | None = None,
        inject_children: bool = False,
        launch_source: str = "auto",
        cross_check: bool = False,
    ) -> None:
        _check_arguments(probes, pid, command, mode, interval_s)
        self.probe_names = list(dict.fromkeys(probes))
        self.pid = pid
        self.command = list(command) if command else None
        self._command_stdout_to_stderr = command_stdout_to_stderr
        self.mode = mode
        self.interval_s = interval_s
        self.bpftrace_arg = bpftrace
        self.on_event = on_event
        self.raw_path = Path(raw_path) if raw_path else None
        self.library_paths = {k: Path(v) for k, v in (library_paths or {}).items()}
        self.tracefs_root = tracefs_root
        self.do_calibrate = calibrate
        self.heartbeat_ms = heartbeat_ms
        self.run_id = run_id
        self.attach_timeout_s = attach_timeout_s
        self.device_timestamps = device_timestamps
        # where launches come from when the collector is loaded (device/attach.py LAUNCH_SOURCES)
        self.launch_source = launch_source
        self.cross_check = cross_check
        # DeviceSide of the cuda set, when it is traced; given when the caller loaded the
        # collector itself (into this process: device.attach.prepare_this_process)
        self.device = device_side
        # with inject_children, a session with no command of its own prepares the collector for
        # the programs its caller starts, which must get ``child_env`` (a sweep's trials)
        self.inject_children = inject_children
        self.child_env: dict[str, str] = {}

        self._init_run_state()

    def _init_run_state(self) -> None:
        """What the session gathers while it runs (all empty until start)."""
        self._lock = threading.Lock()
        self._parser = RecordParser()
        self._stats: dict[int, MetricStats] = {}
        self._sets: list[tuple[ProbeSet, ProbeDetection]] = []
        self.program: program.Program | None = None
        self._runner: BpftraceRunner | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._gate_w: int | None = None
        self._ticker: threading.Thread | None = None
        self._stop_evt = threading.Event()
        self._raw: TextIO | None = None  # raw_path's .part, open while the session runs
        self._raw_count = 0
        self.sent: dict[int, int] = {}
        self.received: dict[int, int] = {}
        self.lost_reported = 0
        self._agg: dict[str, Any] = {}
        self.started_ns: int | None = None
        self.stopped_ns: int | None = None
        self.drained: bool | None = None
        self.calibration: Calibration | None = None
        self.warnings: list[str] = []
        self._last_tick: tuple[int, dict[int, int]] = (0, {})  # (monotonic ns, count per metric)
        self.started = False
        self.stopped = False
        self.child_returncode: int | None = None

    # -- context manager ---------------------------------------------------------------------
    def __enter__(self) -> TraceSession:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- start -------------------------------------------------------------------------------
    def start(self) -> None:
        if self.started:
            return
        bpftrace = capability.require_bpftrace(self.bpftrace_arg)
        capability.require_privilege()
        from aorta_tui.trace import probes

        root = self.tracefs_root or tracefs.find_tracefs()
        kp, kp_reason = tracefs.kprobes_supported(root)
        sets = [probes.get(n) for n in self.probe_names]
        self._sets = []
        child_env = self._prepare_device(sets)
        try:
            if self.command:  # not found, or not startable: the device side's FIFO goes too
                self._spawn_gated(self.command, child_env)
            self._prepare_and_attach(bpftrace, root, kp, kp_reason, sets)
        except BaseException:
            # never leave the gated command waiting, nor let it run untraced
            self._kill_child()
            self._close_raw(keep=False)
            if self.device is not None:
                self.device.stop()
            if self._runner is not None:
                self._runner.cleanup()
            raise
        self.started_ns = time.monotonic_ns()
        self.started = True
        self._release_gate()
        self._ticker = threading.Thread(target=self._tick_loop, name="trace-ticker", daemon=True)
        self._ticker.start()

    def _prepare_and_attach(self, bpftrace: str, root: Path | None, kp: bool, kp_reason: str,
                            sets: list[ProbeSet]) -> None:
        target_pid = self.pid if self.pid is not None else (self._child.pid if self._child else None)
        self._detect_sets(sets, root, kp, kp_reason)
        self.program = program.render(self._sets, mode=self.mode, pid=target_pid,
                                      heartbeat_ms=self.heartbeat_ms, interval_s=self.interval_s)
        for mid, (_ps, metric) in self.program.metric_ids.items():
            self._stats[mid] = MetricStats(metric)
        if self.device is not None:
            self._bind_device(self.device, self.program, target_pid)
        if self.do_calibrate and self.program.uprobe_count:
            from aorta_tui.trace.calibrate import calibrate

            extra = {ps.name: (Path(det.library), ps.calibration_function)
                     for ps, det in self._sets if ps.calibration_function and det.library}
            self.calibration = calibrate(bpftrace, extra=extra, maps_pid=self.pid)
        if self.raw_path is not None:
            self.raw_path.parent.mkdir(parents=True, exist_ok=True)
            self._raw = gzip.open(  # noqa: SIM115 - stays open for the session, closed in stop()
                self.raw_path.with_name(self.raw_path.name + ".part"), "wt", compresslevel=3)
        self._runner = BpftraceRunner(self.program.text, bpftrace=bpftrace,
                                      on_lines=self._on_lines, json_output=self.mode == "aggregate",
                                      block_buffered=self.mode == "events", spec=self._program_spec(target_pid))
        self._runner.start()
        self.warnings.extend(self._runner.notes)
        self._runner.wait_attached(self.attach_timeout_s)

    def _detect_sets(self, sets: list[ProbeSet], root: Path | None, kp: bool, kp_reason: str) -> None:
        """Each set's probes on this machine, into ``_sets``; a set that cannot attach here is an
        error naming every such set (nothing is attached then)."""
        from aorta_tui.trace import probes

        ctx = probes.ProbeContext(tracefs=root, pid=self.pid, library_paths=self.library_paths,
                                  kprobes=kp, kprobes_reason=kp_reason)
        problems = []
        for ps in sets:
            det = ps.detect(ctx)
            if not det.available:
                problems.append((ps.name, det))
            elif (self.device is not None and self.device.launch_source in ("collector", "activity")
                  and ps.name == self.device.probe_set):
                # the collector sees every launch (its callback, or the kernel records themselves):
                # no uprobe on the launch path
                launch_block = getattr(ps, "launch_block", "launch")
                det.instances = [i for i in det.instances if i.block != launch_block]
                det.notes.append(f"launches from the CUPTI collector ({self.device.launch_source}); no launch "
                                 "uprobe attached")
            self._sets.append((ps, det))
        if problems:
            name, det = problems[0]
            others = "; ".join(f"{n}: {d.reason}" for n, d in problems[1:])
            raise EnvironmentProblem(
                f"probe set {name!r} cannot attach here: {det.reason}"
                + (f" (also {others})" if others else ""),
                hint=det.fix or "run `aorta-tui trace info` to see which probe sets this machine supports",
            )

    def _bind_device(self, device: DeviceSide, prog: program.Program, target_pid: int | None) -> None:
        """Hook the device side's metrics and raw records to the rendered program, and add its
        watch on the traced program's own libcupti calls."""
        device.bind(prog, self._stats, self._lock, MetricStats)
        if self.raw_path is not None:
            device.raw_sink = self._write_device_raw
        if self.mode == "events" and privsep.current() is not None:
            # the helper renders programs from the catalogue and takes no path: the watch
            # needs the collector's libcupti, which only this side knows
            device.watch_reason = ("not watched under sudo: the privileged helper attaches only "
                                   "catalogue probes, and libcupti's path is the collector's")
        elif self.mode == "events":
            pred = f"pid == {int(target_pid)}" if target_pid is not None else "1"
            watch = device.watch_program(pred, max([*prog.metric_ids, 0]) + 100)
            if watch:
                prog.text += watch
                prog.uprobe_count += watch.count("uretprobe:")

    def _program_spec(self, target_pid: int | None) -> ProgramSpec:
        """What the program was rendered from, by name: the privileged helper (under sudo)
        renders it again from this, as it takes no program text."""
        # the same sets whose launch uprobe _detect_sets left out: the collector's
        # callbacks or the kernel records (the default) count those launches
        collector = (self.device.probe_set,) if (self.device is not None and self.device.launch_source
                                                 in ("collector", "activity")) else ()
        return ProgramSpec(sets=tuple(self.probe_names), mode=self.mode, pid=target_pid, maps_pid=self.pid,
                           heartbeat_ms=self.heartbeat_ms, interval_s=self.interval_s,
                           collector_launch_sets=collector, lib_overrides=tuple(self.library_paths))

    def _prepare_device(self, sets: list[ProbeSet]) -> dict[str, str]:
        """The device half (GPU start times) of the first set that has one, before the command
        starts: the collector must be in its environment when CUDA initialises."""
        from aorta_tui.trace.device.attach import DeviceSide

        if self.device is not None:  # loaded by the caller before CUDA started
            if self.device.reason:
                self.warnings.append(f"{self.device.probe_set}: launches only, no GPU start times: "
                                     f"{self.device.reason}{_fix(self.device.fix)}")
            return {}
        for ps in sets:
            if ps.device_metrics:
                self.device = DeviceSide(self.device_timestamps, probe_set=ps.name,
                                         device_metrics=ps.device_metrics, launch_source=self.launch_source,
                                         cross_check=self.cross_check, trace_mode=self.mode)
                env = self.device.prepare(self.command, children=self.inject_children and not self.command)
                self.device.refuse_collector_without_it()
                if self.inject_children and not self.command:
                    self.child_env = env
                if self.device.reason and self.device_timestamps != "off":
                    self.warnings.append(f"{ps.name}: launches only, no GPU start times: "
                                         f"{self.device.reason}{_fix(self.device.fix)}")
                return env
        if self.launch_source in ("collector", "activity") or self.cross_check:
            raise UsageError("--launch-source collector and --cross-check are about the cuda set's launches, "
                             f"and none of {', '.join(self.probe_names)} has them", hint="add --probes cuda")
        return {}

    def _spawn_gated(self, command: list[str], extra_env: dict[str, str] | None = None) -> None:
        import shutil

        exe = command[0]
        if (os.sep in exe and not os.access(exe, os.X_OK)) or (os.sep not in exe and shutil.which(exe) is None):
            raise UsageError(f"command not found or not executable: {exe}",
                             hint="give the full path of the program after --")
        r, w = os.pipe()
        try:
            # with a machine-readable stdout (--json) the command's own output goes to stderr
            self._child = spawn_gate.popen([sys.executable, "-c", _GATE, str(r), *command],
                                           pass_fds=(r,), start_new_session=True,
                                           env={**os.environ, **extra_env} if extra_env else None,
                                           stdout=2 if self._command_stdout_to_stderr else None)
        except OSError as exc:
            os.close(r)
            os.close(w)
            raise UsageError(f"cannot start {exe}: {exc.strerror}") from None
        os.close(r)
        self._gate_w = w

    def _release_gate(self) -> None:
        if self._gate_w is not None:
            os.write(self._gate_w, b"g")
            os.close(self._gate_w)
            self._gate_w = None

    def _kill_child(self) -> None:
        if self._gate_w is not None:
            os.close(self._gate_w)  # EOF: the gate's read returns and it execs nothing useful
            self._gate_w = None
        if self._child is not None and self._child.poll() is None:
            try:
                os.killpg(self._child.pid, signal.SIGTERM)
                self._child.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._child.pid, signal.SIGKILL)

    def set_interval_filter(self, keep: Callable[[np.ndarray, np.ndarray], np.ndarray | None]) -> None:
        """``keep(ts, gaps) -> mask | None`` for every interval ("point") metric: e.g. leave out
        the gaps that span a pause the traced program announced (see cli/trace_stream.py)."""
        with self._lock:
            for st in self._stats.values():
                if st.metric.kind == "point":
                    st.interval_filter = keep

    # -- running -----------------------------------------------------------------------------
    @property
    def child_pid(self) -> int | None:
        return self._child.pid if self._child else None

    def wait_target(self, timeout: float | None = None) -> bool:
        """Wait until the traced command or pid has exited (True) or ``timeout`` passed (False)."""
        if self._child is not None:
            return self.wait(timeout) is not None or self._child.poll() is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.pid is not None and Path(f"/proc/{self.pid}").exists():
            left = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
            if left <= 0:
                return False
            if self._stop_evt.wait(left):
                return False
        return True

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the traced command to exit (returns its exit code; None without command)."""
        if self._child is None:
            return None
        try:
            self.child_returncode = self._child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        return self.child_returncode

    def _on_lines(self, lines: list[str]) -> None:
        if self.mode == "aggregate":
            self._on_json_lines(lines)
            return
        batch = self._parser.feed(lines)
        with self._lock:
            got = split_batch(batch, self._stats)
            for mid, n in got.items():
                self.received[mid] = self.received.get(mid, 0) + n
            self.sent.update(batch.sent)
            self.lost_reported += batch.lost
            if self.device is not None:
                self.device.on_batch(batch)
        if self._raw is not None and len(batch):
            with self._lock:  # the device reader writes joined records into the same file
                self._write_raw(batch)

    def _on_json_lines(self, lines: list[str]) -> None:
        from aorta_tui.trace.parser import parse_aggregate_line

        with self._lock:
            for ln in lines:
                parse_aggregate_line(ln, self._agg, self._parser)
            self.sent.update(self._agg.get("sent", {}))
            self.lost_reported = self._agg.get("lost", 0)
            for mid, st in self._stats.items():
                st.set_aggregate(
                    sent=self._agg.get("sent", {}).get(mid, 0),
                    buckets=self._agg.get("lh", {}).get(mid, {}),
                    per_key_count={**self._agg.get("n", {}).get(mid, {}), **self._agg.get("nl", {}).get(mid, {})},
                    per_key_sum={**self._agg.get("sum", {}).get(mid, {}), **self._agg.get("suml", {}).get(mid, {})},
                    maximum=self._agg.get("mx", {}).get(mid),
                )
                self.received[mid] = st.count

    def rendered_program(self) -> program.Program:
        """The program start() rendered: no record, tick or cost comes before it."""
        assert self.program is not None, "used before start() rendered the program"
        return self.program

    def _write_raw(self, batch: Batch) -> None:
        raw = self._raw
        if raw is None:  # closed by stop() since the reader looked
            return
        names = {mid: (ps, m.name, m.kind) for mid, (ps, m) in self.rendered_program().metric_ids.items()}
        device = self.device
        if device is not None and device.watch_mid is not None:
            # the traced program's libcupti calls (key: what CUPTI returned)
            names[device.watch_mid] = (device.probe_set, "program_cupti_call", "point")
        labels: Sequence[str | None] = batch.labels or [None] * len(batch)
        lines = raw_lines(names, batch.metric.tolist(), batch.ts.tolist(), batch.pid.tolist(), batch.tid.tolist(),
                          batch.key.tolist(), batch.value.tolist(), batch.aux.tolist(), labels)
        raw.write(lines)
        self._raw_count += len(batch)

    def _write_device_raw(self, name: str, ts: NDArray[np.int64], pid: NDArray[np.int64], key: NDArray[np.int64],
                          value: NDArray[np.int64], tid: NDArray[np.int64] | None = None) -> None:
        """Joined device values as raw records (called with the session lock held); launches
        from the collector carry their thread, as eBPF launches do (Perfetto draws from it)."""
        if self._raw is None:
            return
        assert self.device is not None  # the device side calls this: it is its raw_sink
        kind = {"queued": "count", "launch": "point"}.get(name, "duration")
        n = len(ts)
        lines = raw_lines({0: (self.device.probe_set, name, kind)}, [0] * n, ts.tolist(), pid.tolist(),
                          [None] * n if tid is None else tid.tolist(),
                          key.tolist(), value.tolist(), [None] * n, [None] * n)
        self._raw.write(lines)
        self._raw_count += n

    def _close_raw(self, keep: bool) -> None:
        if self._raw is None or self.raw_path is None:  # _raw is opened only for a raw_path
            return
        self._raw.close()
        self._raw = None
        part = self.raw_path.with_name(self.raw_path.name + ".part")
        if keep:
            os.replace(part, self.raw_path)
        else:
            part.unlink(missing_ok=True)

    def _tick_loop(self) -> None:
        while not self._stop_evt.wait(self.interval_s):
            self._emit_snapshots()

    def _emit_snapshots(self) -> None:
        if self.device is not None:
            # said live, once per process: e.g. the program's own profiler refused CUPTI
            for msg in self.device.take_warnings():
                self.warnings.append(msg)
                if self.on_event is not None:
                    from aorta_tui.core.events import RunWarning

                    with contextlib.suppress(Exception):
                        self.on_event(RunWarning(self.run_id, message=msg, code="cupti_conflict"))
        if self.on_event is None:
            return
        now = time.monotonic_ns()
        prev_t, prev_counts = self._last_tick
        with self._lock:
            summaries = {}
            for mid, st in self._stats.items():
                wall = (now - (self.started_ns or now)) / 1e9
                # snapshots use exact percentiles only while that stays cheap
                summaries[mid] = (st, st.summary(wall, exact_up_to=1_000_000))
        counts = {mid: s.count for mid, (_st, s) in summaries.items()}
        dt = (now - prev_t) / 1e9 if prev_t else (now - (self.started_ns or now)) / 1e9
        self._last_tick = (now, counts)
        cost = self._observer_cost()  # every set at once: computed once per tick, not per metric
        for mid, (st, s) in summaries.items():
            ps_name = self.rendered_program().metric_ids[mid][0]
            if s.count == 0 and self.stopped is False and not prev_counts.get(mid):
                continue
            rate = (s.count - prev_counts.get(mid, 0)) / dt if dt > 0 else 0.0
            try:
                self.on_event(s.snapshot(
                    self.run_id, f"{ps_name}.{st.metric.name}", events_per_s=rate,
                    lost_events=self._lost_for(mid), malformed_lines=self._parser.malformed_total,
                    observer_cost=cost.get(ps_name, {}), clock=self._clock_for(st.metric.name)))
            except Exception as exc:  # a sink's bug must not stop tracing
                self.warnings.append(f"on_event failed: {exc}")

    def histograms_by_key(self, name: str) -> tuple[str, list[tuple[str, int, dict[int, int], int]]]:
        """Metric ``name`` ("set.metric"): its kind and, per key, (key as the result names it,
        events, log-linear bucket counts, sum of the histogrammed values), in the recorded unit
        (ns, bytes) -- for an exporter (aorta_tui.metrics) that needs per-key histograms, which
        snapshots do not carry. Aggregate mode keeps no per-key histogram in the kernel: one
        row, key "all", holds the metric's. ("", []) for a name this session does not trace."""
        if self.program is None:
            return "", []
        with self._lock:
            for mid, (ps_name, metric) in self.program.metric_ids.items():
                if f"{ps_name}.{metric.name}" != name or mid not in self._stats:
                    continue
                st = self._stats[mid]
                rows = [(st.key_text(k), ks.count, dict(ks.hist.counts), ks.total)
                        for k, ks in st.by_key.items()]
                if st.hist.total and not any(counts for _k, _n, counts, _t in rows):
                    rows = [("all", st.count, dict(st.hist.counts), sum(t for *_r, t in rows))]
                return metric.kind, rows
        return "", []

    # -- stop --------------------------------------------------------------------------------
    def stop(self) -> None:
        if self.stopped or not self.started:
            if self._runner is not None and not self.stopped:
                self._runner.cleanup()
            return
        self.stopped_ns = time.monotonic_ns()
        runner = self._runner
        assert runner is not None
        # Records emitted before now are read once a later heartbeat has been read.
        hb_ns = self.heartbeat_ms * 1_000_000 if self.mode == "events" else int(self.interval_s * 1e9)
        self.drained = runner.drain(self.stopped_ns + hb_ns, timeout_s=max(5.0, 3 * hb_ns / 1e9))
        if not self.drained:
            self.warnings.append("bpftrace did not send a heartbeat after the end: records may be unread")
        self._stop_evt.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        if self._child is not None and self._child.poll() is None:
            self._kill_child()
        if self._child is not None:
            self.child_returncode = self._child.returncode
        if self.device is not None:
            self.device.stop()  # the program has exited: its collector wrote its last records
        runner.stop()
        if runner.returncode not in (0, None, -signal.SIGINT, -signal.SIGKILL):
            err = runner.stderr_text()
            if err:
                self.warnings.append(f"bpftrace exited with {runner.returncode}: {err[:300]}")
        for e in runner.callback_errors:
            self.warnings.append(f"record handler failed: {e}")
        if runner.returncode in (0, -signal.SIGINT) or self.sent:
            # END printed @sent; metrics that never fired are absent from it: they sent 0.
            for mid in self._stats:
                self.sent.setdefault(mid, 0)
        self._close_raw(keep=True)
        self.stopped = True
        self._emit_snapshots()
        runner.cleanup()

    # -- results -----------------------------------------------------------------------------
    def _lost_for(self, mid: int) -> int | None:
        """Records the kernel sent that never reached us; None until its count has arrived.
        For device metrics: records the collector or CUPTI dropped (they count them)."""
        if self.device is not None and self.device.is_device_metric(mid):
            return self.device.dropped()
        if self.device is not None and self.device.is_collector_launch_metric(mid):
            return self.device.collector_launch_lost()
        sent = self.sent.get(mid)
        if sent is None:
            return None
        return max(0, sent - self.received.get(mid, 0))

    def _records_fired(self, mid: int) -> int:
        """Records the probes produced: the kernel's count where known, since a record lost on
        the way to us still cost its probe hits; what we received otherwise."""
        return max(self.sent.get(mid, 0), self._stats[mid].count)

    def _observer_cost(self) -> dict[str, dict[str, Any]]:
        """Estimated CPU the probes take: records x measured cost of their probe(s) per record."""
        out: dict[str, dict[str, Any]] = {}
        wall = ((self.stopped_ns or time.monotonic_ns()) - (self.started_ns or 0)) / 1e9
        cal = self.calibration
        for ps, det in self._sets:
            mids = [mid for mid, (n, _m) in self.rendered_program().metric_ids.items() if n == ps.name]
            hits = sum(self._records_fired(m) * self._stats[m].metric.probe_hits for m in mids)
            entry: dict[str, Any] = {"probe_hits": hits,
                                     "probe_hits_per_s": hits / wall if wall > 0 else None}
            uprobe_mids = [m for m in mids if self._stats[m].metric.probe_type == "uprobe"
                           and not (self.device is not None and self.device.is_collector_launch_metric(m))]
            if not uprobe_mids:
                entry.update(per_hit_us=None, cpu_fraction=None,
                             reason="calibration covers uprobes only; tracepoint hit cost is not measured here")
                out[ps.name] = entry
                continue
            if cal is None:
                entry.update(per_hit_us=None, cpu_fraction=None, reason="calibration was not run")
                out[ps.name] = entry
                continue
            classes = list((det.prologues or {}).values())
            target = "push" if classes and all(c == "push" for c in classes) else "other"
            if cal.cost(ps.name) is not None:
                target = ps.name  # measured on a function of the probed library itself
            per_hit = cal.cost(target)
            if per_hit is None:
                entry.update(per_hit_us=None, cpu_fraction=None,
                             reason=cal.reasons.get(target, "not measured"))
                out[ps.name] = entry
                continue
            per_pair = cal.cost(f"{target}+ret")
            busy_ns = 0.0
            for m in uprobe_mids:
                st = self._stats[m]
                n = self._records_fired(m)
                if st.metric.probe_hits == 2:
                    busy_ns += n * (per_pair if per_pair is not None else 2 * per_hit)
                else:
                    busy_ns += n * per_hit
            entry["per_hit_us"] = per_hit / 1000.0
            entry["entry_and_return_us"] = None if per_pair is None else per_pair / 1000.0
            entry["calibration_target"] = target
            entry["cpu_fraction"] = busy_ns / 1e9 / wall if wall > 0 else None
            entry["calibrated_launch_ns"] = per_hit
            entry["method"] = cal.method
            entry["calibrated_on"] = cal.functions.get(target)
            if per_pair is None and any(self._stats[m].metric.probe_hits == 2 for m in uprobe_mids):
                why = cal.reasons.get(f"{target}+ret", "not calibrated separately")
                entry["note"] = f"return probes counted as one more entry probe ({why})"
            out[ps.name] = entry
        self._program_cost(out)
        return out

    def _program_cost(self, costs: dict[str, dict[str, Any]]) -> None:
        """Beside each set's probe figures: what the traced program pays (trace/cost.py), from
        the launches the set saw and the mode they came from."""
        from aorta_tui.trace.cost import program_cost

        wall = ((self.stopped_ns or time.monotonic_ns()) - (self.started_ns or 0)) / 1e9
        for ps, _det in self._sets:
            launch = [mid for mid, (n, m) in self.rendered_program().metric_ids.items()
                      if n == ps.name and m.name in ("launch", "launch_call")]
            if not launch or ps.name not in costs:
                continue
            source = (self.device.launch_source if self.device is not None and self.device.active
                      and ps.name == self.device.probe_set else "ebpf-only")
            calibrated = costs[ps.name].get("calibrated_launch_ns") if source == "ebpf-only" else None
            costs[ps.name]["program_cost"] = program_cost(source, sum(self._records_fired(m) for m in launch),
                                                          wall, calibrated)

    def result(self) -> TraceResult:
        if self.program is None:
            raise UsageError("the trace session was never started")
        end = self.stopped_ns or time.monotonic_ns()
        wall = (end - (self.started_ns or end)) / 1e9
        cost = self._observer_cost()
        warnings = list(self.warnings)
        with self._lock:
            metrics: dict[str, dict[str, MetricResult]] = {}
            for mid, (ps_name, metric) in self.program.metric_ids.items():
                metrics.setdefault(ps_name, {})[metric.name] = self._metric_result(
                    mid, ps_name, metric.name, wall, mid in self.program.attached, warnings)
            sets = self._set_results(metrics, cost, warnings)
        return TraceResult(
            mode=self.mode, launch_source=self._launch_source(),
            target=TraceTarget(pid=self.pid, command=None if self.command is None else tuple(self.command),
                               command_pid=self.child_pid, command_exit_code=self.child_returncode),
            wall_s=wall, probe_sets=sets,
            lost_events_reported_by_bpftrace=self.lost_reported,
            malformed_lines=self._parser.malformed_total,
            malformed_examples=tuple(self._parser.examples),
            drained_before_stop=self.drained,
            uprobes=self.program.uprobe_count, tracepoints=self.program.tracepoint_count,
            raw_events=str(self.raw_path) if self.raw_path else None,
            raw_event_count=self._raw_count if self.raw_path else None,
            warnings=tuple(warnings),
            calibration=None if self.calibration is None else self.calibration.to_json())

    def _launch_source(self) -> LaunchSource:
        if self.device is None:
            return LaunchSource(mode="ebpf", why="no probe set with a device half",
                                launch_timestamp="eBPF uprobes", device_timestamp=None)
        info = self.device.launch_source_info()
        return LaunchSource(mode=info["mode"], why=info["why"], launch_timestamp=info["launch_timestamp"],
                            device_timestamp=info["device_timestamp"])

    def _metric_result(self, mid: int, ps_name: str, name: str, wall: float, attached: bool,
                       warnings: list[str]) -> MetricResult:
        """One metric's summary and where its records came from (under the lock)."""
        summary = self._stats[mid].summary(wall)
        why_not = None if attached else "none of its events or symbols exist here (see detection.missing)"
        records: Records
        if self.device is not None and self.device.is_device_metric(mid):
            records = self._device_records(mid, name, summary)
        elif self.device is not None and self.device.is_collector_launch_metric(mid):
            records = self._collector_launches(mid, ps_name, name, warnings)
        else:
            device_set = self.device is not None and ps_name == self.device.probe_set
            records = KernelRecords(
                timestamp_source=self.device.timestamp_source(name) if self.device is not None and device_set else None,
                records_sent_by_kernel=self.sent.get(mid), records_received=self.received.get(mid, 0),
                lost_events=self._lost_for(mid) if mid in self.sent else None,
                lost_events_reason=None if mid in self.sent else
                "bpftrace did not print its in-kernel count (stopped abnormally)")
        return MetricResult(summary=summary, attached=attached, records=records, not_attached_reason=why_not)

    def _device_records(self, mid: int, name: str, summary: MetricSummary) -> DeviceRecords:
        """A device metric's records: CUPTI's, joined with launches from where they came."""
        assert self.device is not None
        source = {"collector": "CUPTI activity records joined with the collector's launch callbacks",
                  "activity": "CUPTI activity records alone (latency timestamps)"}.get(
            self.device.launch_source, "CUPTI activity records joined with eBPF launches")
        return DeviceRecords(
            source=source, timestamp_source=self.device.timestamp_source(name),
            lost_events=self._lost_for(mid),
            lost_events_reason="records dropped by the collector or CUPTI (dropped_by_collector)",
            clock=self._clock_for(name),
            includes=self._launch_to_start_includes(summary) if name == "launch_to_start" else None)

    def _collector_launches(self, mid: int, ps_name: str, name: str, warnings: list[str]) -> CollectorLaunches:
        """A launch metric counted by the CUPTI collector (no launch uprobe): its counts."""
        assert self.device is not None
        seen, read, why = self.device.collector_launch_counts()
        if why and "were not seen" in why:  # a count of 0 must not read as "no launches"
            # (a collector without a launch callback, or one that never spoke)
            warnings.append(f"{ps_name}.{name}: {why}")
        return CollectorLaunches(
            source=("the kernel activity records (one launch per kernel; no callback or uprobe)"
                    if self.device.launch_source == "activity" else
                    "the CUPTI collector's launch callbacks (no launch uprobe attached)"),
            timestamp_source=self.device.timestamp_source(name), records_sent_by_collector=seen,
            records_received=read, lost_events=self._lost_for(mid),
            lost_events_reason=why or None)

    def _set_results(self, metrics: dict[str, dict[str, MetricResult]], cost: dict[str, Any],
                     warnings: list[str]) -> dict[str, ProbeSetResult]:
        """Each probe set's metrics, description, detection, observer cost and device timestamps."""
        out: dict[str, ProbeSetResult] = {}
        for ps, det in self._sets:
            device_timestamps = None
            if self.device is not None and ps.name == self.device.probe_set:
                device_timestamps = dt = self.device.to_dict()
                # a collector that ran but lost its records to another CUPTI client says so
                # where a user looks first (launches-only cases are warned at start)
                if dt.get("available") and dt["status"] != "available":
                    warnings.append(f"{ps.name}: GPU start times {dt['status']}")
            out[ps.name] = ProbeSetResult(
                metrics=metrics.get(ps.name, {}), description=ps.description,
                detection=det.to_dict(), observer_cost=cost.get(ps.name),
                device_timestamps=device_timestamps)
        return out

    def _clock_for(self, metric_name: str) -> dict[str, Any]:
        """A two-clock metric's clock alignment, plus (launch_to_start) the launch uprobe's
        calibrated cost that the figure includes, shown beside it live."""
        if self.device is None:
            return {}
        clock = self.device.clock_for(metric_name)
        if clock and metric_name == "launch_to_start" and self.device.launch_source not in ("collector", "activity"):
            cal = self.calibration
            if cal is not None and cal.functions.get(self.device.probe_set):
                clock["probe_cost_ns"] = cal.cost(self.device.probe_set)
        return clock

    def _launch_to_start_includes(self, summary: MetricSummary) -> dict[str, Any]:
        """What the launch -> start figure includes besides the launch's own path, and what may be
        taken off: with an eBPF launch time, the uprobe fires first and its cost (calibrated on the
        probed library's own function) delays the call whose kernel is timed; a calibration on
        another library or none at all allows no subtraction."""
        assert self.device is not None
        if self.device.launch_source == "activity":
            return {"probe_cost_ns": None, "subtracted": False,
                    "why": ("no callback or uprobe on the launch path: the figure runs from CUPTI's "
                            "`queued` timestamp, so it holds push + GPU queue and none of the host part")}
        if self.device.launch_source == "collector":
            return {"probe_cost_ns": None, "subtracted": False,
                    "why": ("no uprobe on the launch path: the launch time is the CUPTI callback at API "
                            "entry; what the callback costs after its clock reading (CUPTI's dispatch, the "
                            "ring, the exit callback) is inside the figure and not calibrated")}
        cal = self.calibration
        per_hit = (cal.cost(self.device.probe_set)
                   if cal is not None and cal.functions.get(self.device.probe_set) else None)
        if per_hit is None:
            why = ("calibration was not run (--no-calibrate)" if cal is None else
                   cal.reasons.get(self.device.probe_set, "the probed library was not calibrated"))
            return {"probe_cost_ns": None, "subtracted": False,
                    "why": f"the launch uprobe's own cost is inside the figure, not measured here: {why}"}
        pct = summary.histogram.percentiles
        per_hit_us = per_hit / 1000.0
        adjusted = {k: (None if v is None else max(0.0, v - per_hit_us)) for k, v in pct.items()}
        return {"probe_cost_ns": per_hit, "subtracted": True, "adjusted_percentiles": adjusted,
                "calibrated_on": cal.functions.get(self.device.probe_set) if cal else None,
                "why": ("the eBPF uprobe fires at the launch call's entry, before the driver's work, so "
                        "its own cost delays the kernel it times; adjusted_percentiles take off the cost "
                        "calibrated on this very library (percentiles shift by a constant; the histogram "
                        "is left as measured)")}


def _fix(fix: str | None) -> str:
    """A warning's fix, as errors give theirs: the user reads how to get what is missing."""
    return f" (fix: {fix})" if fix else ""


def _check_arguments(probes: list[str], pid: int | None, command: list[str] | None, mode: str,
                     interval_s: float) -> None:
    """A session's arguments, refused (exit 2) before anything starts."""
    if not probes:
        raise UsageError("no probe set given", hint="e.g. --probes cuda")
    if pid is not None and command:
        raise UsageError("give either a pid or a command, not both")
    if mode not in program.MODES:
        raise UsageError(f"mode {mode!r} is not one of {', '.join(program.MODES)}")
    if interval_s <= 0:
        raise UsageError("interval must be positive")
    if pid is not None and not Path(f"/proc/{pid}").exists():
        raise UsageError(f"no process with pid {pid}")
