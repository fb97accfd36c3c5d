"""`aorta-tui trace ...`: eBPF tracing with bpftrace (capability check, queue and memory traces)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from aorta_tui.cli.common import check_output_file, cli_command, count, err, new_app, seconds
from aorta_tui.cli.metrics_opts import (
    METRICS_LINGER_OPT,
    METRICS_OPT,
    METRICS_PUBLIC_OPT,
    MetricsRequest,
)
from aorta_tui.core.numerals import MAX_PID

if TYPE_CHECKING:
    from aorta_tui.cli.trace_stream import PhaseReporter, StreamWriter
    from aorta_tui.core.events import HistogramSnapshot
    from aorta_tui.metrics.trace_metrics import TraceMetrics
    from aorta_tui.trace.result_doc import ProbeSetResult, TraceResult
    from aorta_tui.trace.session import TraceSession

app = new_app(
    "eBPF tracing with bpftrace: launch/submit -> dispatch histograms and GPU memory events.\n\n"
    "Examples:\n\n"
    "  aorta-tui trace info --json\n\n"
    "  sudo aorta-tui trace queue --probes cuda -- python train.py\n\n"
    "  sudo aorta-tui trace queue --probes cuda --pid 4242 --duration 30 -o q.json\n\n"
    "  sudo aorta-tui trace memory --pid 4242 --duration 10"
)

QUEUE_DEFAULT = ("cuda", "hip", "amdgpu", "drm_sched")

_BPFTRACE_OPT = typer.Option(None, "--bpftrace", metavar="PATH",
                             help="bpftrace binary (default: $AORTA_TUI_BPFTRACE, then PATH).")


def _libs(values: list[str]) -> dict[str, Path]:
    from aorta_tui.core.errors import UsageError

    out: dict[str, Path] = {}
    for v in values or []:
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--lib {v!r} is not NAME=PATH", hint="e.g. --lib cuda=/usr/lib/x86_64-linux-gnu/libcuda.so.1")
        out[name.strip()] = Path(path.strip())
    return out


@app.command("info")
@cli_command
def info(
    json_out: bool = typer.Option(False, "--json", help="Print the capability report as JSON."),
    bpftrace: str | None = _BPFTRACE_OPT,
    pid: int | None = typer.Option(None, "--pid", parser=count(at_most=MAX_PID), metavar="PID", help="Resolve uprobe libraries from this process's maps."),
    lib: list[str] = typer.Option([], "--lib", metavar="NAME=PATH", help="Library for a probe set (cuda, hip, hsa)."),
) -> None:
    """What this machine can trace: kernel, bpftrace, privileges, tracefs, every probe set.

    Example: aorta-tui trace info --json
    """
    from aorta_tui.trace.capability import trace_info

    data = trace_info(bpftrace, pid=pid, library_paths=_libs(lib))
    if json_out:
        print(json.dumps(data, indent=2))
        return
    b = data["bpftrace"]
    print(f"kernel        {data['kernel']} ({data['machine']})")
    print(f"bpftrace      {b['path'] or 'not found'}" + (f" v{b['version']}" if b["version"] else "")
          + (f"  (found by {b['found_by']})" if b["path"] else f"  fix: {b['fix']}"))
    p = data["privileges"]
    print(f"privileges    root={p['root']} CAP_BPF={p['cap_bpf']} CAP_PERFMON={p['cap_perfmon']}"
          + ("" if p["sufficient"] else "  -> not enough: run as root (sudo)"))
    t = data["tracefs"]
    print(f"tracefs       {t['mounted_at'] or 'not mounted; fix: ' + t['fix']}")
    print(f"kprobes       {'yes' if data['kprobes']['available'] else 'no'} ({data['kprobes']['reason']})")
    seeing = [n for n, s in data["probe_sets"].items() if s["sees_anything"]]
    print(f"can see anything here: {', '.join(seeing) or 'none'}")
    for name, s in data["probe_sets"].items():
        if s["available"] and not s["sees_anything"]:
            print(f"  {name:<11} attaches, but sees nothing here: {s['sees_why']}")
    print("probe sets:")
    for name, s in data["probe_sets"].items():
        state = ("available" if s["sees_anything"] else "attaches, sees nothing here") if s["available"] \
            else "not available"
        print(f"  {name:<11} {state}: {s['description']}")
        if s["library"]:
            print(f"              library {s['library']} ({s['library_found_by']})")
        if s["found"]:
            print(f"              found   {', '.join(s['found'])}")
        if not s["available"] and s["reason"]:
            print(f"              reason  {s['reason']}")
            if s["fix"]:
                print(f"              fix     {s['fix']}")
    print("GPU start times (launch_to_start, with a command to start):")
    for vendor, d in data["device_timestamps"].items():
        if d["available"] and "cupti" not in d:  # hip: its status says what it is built from
            print(f"  {vendor:<11} available: {d['name']}, {d['status']}")
        elif d["available"]:
            c = d["cupti"]
            print(f"  {vendor:<11} available: {d['name']}, CUPTI {c['version']} from {c['origin']}, "
                  f"built with {d['compiler']}")
        else:
            print(f"  {vendor:<11} not available: {d['reason']}")
            if d.get("fix"):
                print(f"              fix     {d['fix']}")
            if d.get("hardware"):
                print(f"              note    {d['hardware']}")


def _check_request(pid: int | None, command: list[str], *, output: Path | None,
                   raw: Path | None, perfetto: Path | None) -> None:
    """One target, and every file the trace writes a file to replace, said before tracing, not
    after it: each is written atomically, a rename over its name, and ``--raw /dev/null`` as root
    replaced the device node with a regular file (check_output_file refuses it, exit 2)."""
    from aorta_tui.core.errors import UsageError

    if (pid is None) == (not command):
        raise UsageError("give exactly one target: --pid N, or a command after --",
                         hint="e.g. aorta-tui trace queue --probes cuda -- python train.py")
    check_output_file(output)
    check_output_file(raw, option="--raw")
    check_output_file(perfetto, option="--perfetto")


def _run_trace(*, probes: list[str], pid: int | None, command: list[str], duration: float | None,
               mode: str, output: Path | None, raw: Path | None, perfetto: Path | None,
               libs: dict[str, Path], bpftrace: str | None, interval: float, json_out: bool,
               auto: bool, calibrate: bool = True,
               device_timestamps: str = "auto", launch_source: str = "auto", cross_check: bool = False,
               metrics: MetricsRequest | None = None) -> None:
    """One trace; with ``json_out`` its events on stdout, one per line, as every long command's
    ``--json`` (docs/cli.md), the result document last in ``run_finished``'s summary."""
    if not json_out:
        _check_request(pid, command, output=output, raw=raw, perfetto=perfetto)
        _trace(probes=probes, pid=pid, command=command, duration=duration, mode=mode, output=output,
               raw=raw, perfetto=perfetto, libs=libs, bpftrace=bpftrace, interval=interval,
               auto=auto, calibrate=calibrate, device_timestamps=device_timestamps,
               launch_source=launch_source, cross_check=cross_check, metrics=metrics)
        return
    from aorta_tui.cli import trace_stream

    out = trace_stream.open_stream()
    trace_stream.started(out, str(output) if output is not None else "")
    phases = trace_stream.PhaseReporter(out) if command else None
    try:
        _check_request(pid, command, output=output, raw=raw, perfetto=perfetto)
        _trace(probes=probes, pid=pid, command=command, duration=duration, mode=mode, output=output,
               raw=raw, perfetto=perfetto, libs=libs, bpftrace=bpftrace, interval=interval,
               auto=auto, calibrate=calibrate, device_timestamps=device_timestamps,
               out=out, phases=phases, launch_source=launch_source, cross_check=cross_check,
               metrics=metrics)
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # the stream ends with a typed result event whatever happened
        trace_stream.failed(out, exc)
        raise
    finally:
        if phases is not None:
            phases.close()


def _trace(*, probes: list[str], pid: int | None, command: list[str], duration: float | None,
           mode: str, output: Path | None, raw: Path | None, perfetto: Path | None,
           libs: dict[str, Path], bpftrace: str | None, interval: float,
           auto: bool, calibrate: bool, device_timestamps: str, out: StreamWriter | None = None,
           phases: PhaseReporter | None = None, launch_source: str = "auto", cross_check: bool = False,
           metrics: MetricsRequest | None = None) -> None:
    """One trace; with ``out`` (a ``trace_stream.StreamWriter``) every event goes there; with
    ``metrics.addr`` its figures are served for Prometheus too (aorta_tui.metrics)."""
    from aorta_tui.cli.metrics_opts import serving

    exporter = None
    if metrics is not None and metrics.addr is not None:
        from aorta_tui.metrics.trace_metrics import TraceMetrics

        exporter = TraceMetrics(mode=mode, probe_sets=probes)
    req = metrics or MetricsRequest()
    # bound before tracing starts: a port in use is exit 2 before anything is attached
    with serving(req.addr, req.public, req.linger_s, [exporter] if exporter else []):
        _trace_body(probes=probes, pid=pid, command=command, duration=duration, mode=mode,
                    output=output, raw=raw, perfetto=perfetto, libs=libs, bpftrace=bpftrace,
                    interval=interval, auto=auto, calibrate=calibrate,
                    device_timestamps=device_timestamps, out=out, phases=phases,
                    launch_source=launch_source, cross_check=cross_check, exporter=exporter)


def _trace_body(*, probes: list[str], pid: int | None, command: list[str], duration: float | None,
                mode: str, output: Path | None, raw: Path | None, perfetto: Path | None,
                libs: dict[str, Path], bpftrace: str | None, interval: float,
                auto: bool, calibrate: bool, device_timestamps: str, out: StreamWriter | None,
                phases: PhaseReporter | None, launch_source: str, cross_check: bool,
                exporter: TraceMetrics | None) -> None:
    from aorta_tui.trace.session import TraceSession

    stream = out is not None
    if auto:
        probes = _available(probes, pid=pid, libs=libs)
    raw_path = raw
    tmp_raw = None
    if perfetto is not None and raw_path is None:
        import tempfile

        fd, name = tempfile.mkstemp(prefix="aorta-trace-", suffix=".jsonl.gz")
        os.close(fd)
        tmp_raw = raw_path = Path(name)
    live = sys.stderr.isatty() and not stream

    streamed: set[str] = set()
    on_event = _event_sink(exporter=exporter, out=out, live=live, streamed=streamed)
    session = TraceSession(probes, pid=pid, command=command or None, mode=mode, interval_s=interval,
                           bpftrace=bpftrace, on_event=on_event, raw_path=raw_path,
                           library_paths=libs, calibrate=calibrate,
                           command_stdout_to_stderr=stream,
                           device_timestamps=device_timestamps, launch_source=launch_source,
                           cross_check=cross_check)
    interrupted, target_ended = _trace_until_done(
        session, probes=probes, pid=pid, command=command, duration=duration, mode=mode,
        out=out, phases=phases, exporter=exporter)
    result = replace(session.result(), probes=tuple(probes))
    if perfetto is not None and raw_path is not None and raw_path.exists():
        from aorta_tui.trace.export import export_perfetto

        result = replace(result, perfetto={"path": str(perfetto), **export_perfetto(raw_path, perfetto)})
    if tmp_raw is not None:
        tmp_raw.unlink(missing_ok=True)
        result = replace(result, raw_events=None)
    if output is not None:
        from aorta_tui.core.atomic import atomic_write_json
        from aorta_tui.store.write_errors import output_write_error

        try:
            atomic_write_json(output, result.to_json())
        except OSError as exc:  # a full disk: exit 3 naming the file and the free space; else 2
            raise output_write_error(exc, output) from None
    # A traced command's status is ours, as with `time`, `strace` and `perf stat`; when
    # --duration ended it, the trace finished as asked (0).
    status = command_exit_status(session.child_returncode) if command and target_ended else 0
    _report_trace(session, result, status=status, interrupted=interrupted, output=output,
                  out=out, phases=phases, streamed=streamed)


def _event_sink(*, exporter: TraceMetrics | None, out: StreamWriter | None, live: bool, streamed: set[str]) -> Callable[[Any], None]:
    """The session's event callback: warnings and histogram snapshots, streamed or shown live."""

    def on_event(ev: Any) -> None:
        if exporter is not None:
            exporter.on_event(ev)
        if getattr(ev, "kind", "") == "warning":  # said while tracing (a CUPTI conflict, ...)
            streamed.add(ev.message)
            if out is not None:
                out.emit(ev)
            elif live:
                err(f"warning: {ev.message}")
            return
        if getattr(ev, "kind", "") != "histogram_snapshot":
            return
        if out is not None:  # the journal's event format, one per line, as each snapshot arrives
            out.emit(ev)
        elif live:
            _live_line(ev)

    return on_event


def _trace_until_done(session: TraceSession, *, probes: list[str], pid: int | None, command: list[str],
                      duration: float | None, mode: str, out: StreamWriter | None,
                      phases: PhaseReporter | None, exporter: TraceMetrics | None) -> tuple[bool, bool]:
    """Trace until the command or pid exits, --duration passes, or Ctrl-C; the session is
    stopped on the way out. Returns (interrupted, target_ended)."""
    from aorta_tui.cli import trace_stream

    interrupted = target_ended = False
    try:
        session.start()
        if exporter is not None:
            exporter.attach(session)
        if out is not None:
            if phases is not None:
                phases.attach_to(session)
            trace_stream.attached(out, session, pid)
        err(f"tracing {', '.join(probes)} ({mode} mode, {session.rendered_program().uprobe_count} uprobes, "
            f"{session.rendered_program().tracepoint_count} tracepoints) on "
            + (f"pid {pid}" if pid is not None else f"pid {session.child_pid}: {' '.join(command)}")
            + (f" for {duration:g} s" if duration else "") + "; Ctrl-C stops")
        # until the command or pid exits, --duration passes, or Ctrl-C
        if out is not None:
            target_ended = trace_stream.wait_streaming(session, out, pid=pid, duration=duration, phases=phases)
        else:
            target_ended = session.wait_target(timeout=duration)
        if target_ended and pid is not None:
            err(f"pid {pid} exited")
    except KeyboardInterrupt:
        interrupted = True
    finally:
        session.stop()
        if exporter is not None:
            exporter.finished()
    return interrupted, target_ended


def _report_trace(session: TraceSession, result: TraceResult, *, status: int, interrupted: bool,
                  output: Path | None, out: StreamWriter | None,
                  phases: PhaseReporter | None,
                  streamed: set[str]) -> None:
    """Print or stream the result, then end as the trace did (Ctrl-C, nothing traced, the
    traced command's status)."""
    from aorta_tui.cli import trace_stream
    from aorta_tui.core.errors import EnvironmentProblem

    if out is not None:
        if phases is not None:
            phases.report_if_changed()
        for warning in session.warnings:
            if warning in streamed:
                continue
            out.emit(trace_stream.RunWarning(trace_stream.RUN_ID, message=warning, code="trace"))
        if not result.probe_sets and not interrupted:
            raise EnvironmentProblem("nothing was traced")
        trace_stream.finished(out, result.to_json(), interrupted=interrupted, exit_code=130 if interrupted else status)
    else:
        _print_summary(result)
        if output is not None:
            print(f"result written to {output}")
    if interrupted:
        raise KeyboardInterrupt
    if not result.probe_sets:
        raise EnvironmentProblem("nothing was traced")
    if status:
        raise typer.Exit(status)


def _offline(ctx: typer.Context, stream: bool, replay: str | None, synthetic: int, interval: float) -> None:
    """``--replay`` / ``--synthetic``: the ``--json`` event stream of a trace without bpftrace."""
    from aorta_tui.cli import trace_stream
    from aorta_tui.core.errors import UsageError

    if not stream or ctx.args or (replay is not None and synthetic):
        raise UsageError("--replay FILE or --synthetic N goes with --json, without a target",
                         hint="e.g. aorta-tui trace queue --json --replay rec.jsonl")
    if synthetic < 0:
        raise UsageError("--synthetic must be a positive rate (record lines per second)")
    out = trace_stream.open_stream()
    trace_stream.started(out)
    trace_stream.run_offline(out, replay_path=replay, rate=synthetic, interval=interval)


def command_exit_status(returncode: int | None) -> int:
    """A child's status as a shell reports it: its exit code, or 128+N when signal N killed it."""
    if returncode is None:
        return 0
    return 128 - returncode if returncode < 0 else returncode


def _available(wanted: list[str], *, pid: int | None, libs: dict[str, Path]) -> list[str]:
    from aorta_tui.core.errors import EnvironmentProblem
    from aorta_tui.trace.capability import detect_sets
    from aorta_tui.trace.visibility import find_devices, sees

    found = detect_sets(wanted, pid=pid, library_paths=libs)
    ok = [n for n in wanted if found[n].available]
    if not ok:
        reasons = "; ".join(f"{n}: {found[n].reason}" for n in wanted)
        raise EnvironmentProblem(f"none of the probe sets {', '.join(wanted)} can attach here ({reasons})",
                                 hint="run `aorta-tui trace info` and pick --probes, or pass --lib NAME=PATH")
    # of those that attach, the ones that can see anything here (an installed HIP runtime on a
    # box without an AMD GPU attaches and sees nothing); all that attach when none can
    devices = find_devices()
    seeing = [n for n in ok if sees(n, True, "", devices)[0]]
    return seeing or ok


def _live_line(ev: HistogramSnapshot) -> None:
    p = ev.percentiles or {}
    def f(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.1f}"
    err(f"  {ev.probe_set:<22} n={ev.count:<9} {ev.events_per_s:9.0f}/s  p50={f(p.get('p50'))} "
        f"p99={f(p.get('p99'))} max={f(p.get('max'))} {ev.unit}  lost={'?' if ev.lost_events is None else ev.lost_events}")


def _bar_rows(buckets: list[list[float]], width: int = 40, rows: int = 12) -> list[str]:
    if not buckets:
        return []
    # merge adjacent buckets into at most `rows` rows so the plot stays short
    step = max(1, -(-len(buckets) // rows))
    merged = []
    for i in range(0, len(buckets), step):
        chunk = buckets[i : i + step]
        merged.append((chunk[0][0], chunk[-1][1], sum(c[2] for c in chunk)))
    top = max(c for _, _, c in merged) or 1
    return [f"    [{lo:>10.3f}, {hi:>10.3f}) {int(c):>9} {'#' * max(1 if c else 0, int(width * c / top))}"
            for lo, hi, c in merged]


def _print_summary(result: TraceResult) -> None:
    print(f"mode {result.mode}, {result.wall_s:.2f} s, {result.uprobes} uprobes, "
          f"{result.tracepoints} tracepoints, lost events reported by bpftrace: "
          f"{result.lost_events_reported_by_bpftrace}, malformed lines: {result.malformed_lines}")
    src = result.launch_source
    if src is not None and src.mode:
        print(f"launches from: {src.mode} ({src.why})")
    t = result.target
    if t.command:
        code = t.command_exit_code
        killed = f" (killed by signal {-code})" if isinstance(code, int) and code < 0 else ""
        print(f"command exit code: {code}{killed}")
    for name, s in result.probe_sets.items():
        _print_set(name, s)
    for w in result.warnings:
        print(f"warning: {w}")


def _print_set(name: str, s: ProbeSetResult) -> None:
    """One probe set: what the program paid, then each metric's counts, histogram and keys."""
    from aorta_tui.trace.cost import share_text

    cost = s.observer_cost if isinstance(s.observer_cost, dict) else {}
    program_cost = s.program_cost()
    # what the traced program pays (issue 34), not a CPU fraction of the probes
    cost_txt = (share_text(program_cost) if program_cost else
                f"not estimated ({cost.get('reason') or 'this set has no launches'})")
    print(f"\n[{name}] {s.description}\n  cost to the program: {cost_txt}")
    for mname, metric in s.metrics.items():
        m = metric.summary
        if not metric.attached:
            print(f"  {mname}: not attached here ({metric.not_attached_reason or ''})")
            continue
        if not m.count:
            print(f"  {mname}: no events")
            continue
        lost = metric.records.lost_events
        lost_txt = f"not available ({metric.records.lost_events_reason or ''})" if lost is None else str(lost)
        # no wall time (a trace stopped before it began): the rate is not known, never 0/s
        rate = "rate n/a" if m.events_per_s is None else f"{m.events_per_s:.0f}/s"
        print(f"  {mname}: {m.count} events ({rate}), lost {lost_txt}")
        h = m.histogram
        if h.count:
            pct_txt = " ".join(f"{k}={'n/a' if v is None else f'{v:.3f}'}" for k, v in h.percentiles.items())
            print(f"  histogram: {m.histogram_measures}\n    {pct_txt} {m.unit} ({h.percentile_method})")
            for row in _bar_rows(h.bucket_rows()):
                print(row)
        if m.breakdown:
            print(f"    by {m.breakdown_by}: " + ", ".join(
                f"{k}: {v.count}" for k, v in list(m.breakdown.items())[:8]))


def _common(
    ctx: typer.Context, probes: str | None, pid: int | None, duration: float | None, mode: str,
    output: Path | None, raw: Path | None, perfetto: Path | None, lib: list[str],
    bpftrace: str | None, interval: float, json_out: bool, default: tuple[str, ...],
    calibrate: bool = True, device_timestamps: str = "auto",
    launch_source: str = "auto", cross_check: bool = False, metrics: MetricsRequest | None = None,
) -> None:
    from aorta_tui.core.errors import UsageError

    command = list(ctx.args)
    if duration is not None and duration <= 0:
        raise UsageError("--duration must be positive")
    names = [p.strip() for p in probes.split(",") if p.strip()] if probes else list(default)
    _run_trace(probes=names, pid=pid, command=command, duration=duration, mode=mode, output=output,
               raw=raw, perfetto=perfetto, libs=_libs(lib), bpftrace=bpftrace, interval=interval,
               json_out=json_out, auto=probes is None and len(default) > 1, calibrate=calibrate,
               device_timestamps=device_timestamps, launch_source=launch_source,
               cross_check=cross_check, metrics=metrics)


_CTX = {"allow_extra_args": True, "ignore_unknown_options": False}
# `--json` of a command that runs something is its event stream (docs/cli.md); the document is -o's
_STREAM_OPT = typer.Option(
    False, "--json", help="One event per line on stdout while tracing (run_started, attached, histogram "
    "snapshots, warnings), then run_finished with the result document in summary.result; -o FILE "
    "writes the document alone.")
_OUTPUT_HELP = "Write the result document (JSON) to this file (atomically)."


@app.command("queue", context_settings=_CTX)
@cli_command
def queue(
    ctx: typer.Context,
    probes: str | None = typer.Option(None, "--probes", help="Comma-separated probe sets (default: those of cuda,hip,amdgpu,drm_sched available here)."),
    pid: int | None = typer.Option(None, "--pid", parser=count(at_most=MAX_PID), metavar="PID", help="Attach to this running process."),
    duration: float | None = typer.Option(None, "--duration", parser=seconds(), metavar="S", help="Seconds to trace (default: until the command exits or Ctrl-C)."),
    mode: str = typer.Option("events", "--mode", help="events (a record per event, exact percentiles) or aggregate (in-kernel histograms, exact counts at any rate)."),
    output: Path | None = typer.Option(None, "-o", "--output", help=_OUTPUT_HELP),
    raw: Path | None = typer.Option(None, "--raw", help="Write every record to this .jsonl.gz (events mode)."),
    perfetto: Path | None = typer.Option(None, "--perfetto", help="Write a Chrome/Perfetto trace JSON (events mode)."),
    lib: list[str] = typer.Option([], "--lib", metavar="NAME=PATH", help="Library for a probe set, e.g. cuda=/usr/lib/x86_64-linux-gnu/libcuda.so.1."),
    bpftrace: str | None = _BPFTRACE_OPT,
    interval: float = typer.Option(1.0, "--interval", parser=seconds(), metavar="S", help="Seconds between histogram snapshots."),
    json_out: bool = _STREAM_OPT,
    calibrate: bool = typer.Option(True, "--calibrate/--no-calibrate", help="Measure the per-hit uprobe cost first (cached for a day) for the observer-cost estimate."),
    device_timestamps: str = typer.Option("auto", "--device-timestamps", help="GPU start/end of every launch from a CUPTI collector loaded into the command (cuda set): auto (when it can be built and loaded, else launches only, with the reason), on (required: exit 3 if it cannot), off."),
    launch_source: str = typer.Option("auto", "--launch-source", help="Where launches come from (cuda set): auto = activity (the kernel activity records alone, with CUPTI's latency timestamps: no per-launch callback or uprobe, the cheapest; exit 3 if the collector cannot load when asked by name), collector (the CUPTI launch callback: adds the host part, entry -> queued), ebpf (the launch uprobe, as with --pid)."),
    cross_check: bool = typer.Option(False, "--cross-check", help="Count launches with both the eBPF uprobe and the collector and compare them per stream (device_timestamps.cross_check); the join goes through eBPF."),
    replay: str | None = typer.Option(None, "--replay", metavar="FILE.jsonl", hidden=True, help="With --json: send a recorded --json stream's events at their recorded pace (no bpftrace)."),
    synthetic: int = typer.Option(0, "--synthetic", parser=count(at_least=0), metavar="N", hidden=True, help="With --json: N synthetic record lines/s through the parser (benchmark; no bpftrace)."),
    metrics: str | None = METRICS_OPT,
    metrics_public: bool = METRICS_PUBLIC_OPT,
    metrics_linger: float = METRICS_LINGER_OPT,
) -> None:
    """Trace launch/submit -> dispatch latency of a command (after --) or a running --pid.

    Exit status: with a command, the command's own (128+N when signal N killed it; 0 when
    --duration stopped it), as `time` and `strace` do; 130 on Ctrl-C; 2 bad usage; 3 when
    nothing can be traced here.

    Example: sudo aorta-tui trace queue --probes cuda -o q.json -- python train.py

    Example: sudo aorta-tui trace queue --probes cuda --json --pid 4242 | jq .event
    """
    if replay is not None or synthetic:
        if metrics is not None:
            from aorta_tui.core.errors import UsageError

            raise UsageError("--metrics serves a live trace's figures; --replay and --synthetic have none",
                             hint="drop --metrics, or trace a --pid or a command")
        _offline(ctx, json_out, replay, synthetic, interval)
        return
    _common(ctx, probes, pid, duration, mode, output, raw, perfetto, lib, bpftrace, interval,
            json_out, QUEUE_DEFAULT, calibrate, device_timestamps, launch_source, cross_check,
            MetricsRequest(metrics, metrics_public, metrics_linger))


@app.command("memory", context_settings=_CTX)
@cli_command
def memory(
    ctx: typer.Context,
    pid: int | None = typer.Option(None, "--pid", parser=count(at_most=MAX_PID), metavar="PID", help="Attach to this running process."),
    duration: float | None = typer.Option(None, "--duration", parser=seconds(), metavar="S", help="Seconds to trace (default: until the command exits or Ctrl-C)."),
    mode: str = typer.Option("events", "--mode", help="events or aggregate."),
    output: Path | None = typer.Option(None, "-o", "--output", help=_OUTPUT_HELP),
    raw: Path | None = typer.Option(None, "--raw", help="Write every record to this .jsonl.gz."),
    perfetto: Path | None = typer.Option(None, "--perfetto", help="Write a Chrome/Perfetto trace JSON."),
    lib: list[str] = typer.Option([], "--lib", metavar="NAME=PATH", help="Library, e.g. cuda=/path/libcuda.so.1."),
    bpftrace: str | None = _BPFTRACE_OPT,
    interval: float = typer.Option(1.0, "--interval", parser=seconds(), metavar="S", help="Seconds between snapshots."),
    json_out: bool = _STREAM_OPT,
    calibrate: bool = typer.Option(True, "--calibrate/--no-calibrate", help="Measure the per-hit uprobe cost first (cached for a day)."),
) -> None:
    """Trace GPU memory events: CUDA allocations/frees, amdgpu BO moves/maps, amdkfd evictions.

    Exit status: as for `trace queue` (a traced command's own status, 130 on Ctrl-C).

    Example: sudo aorta-tui trace memory --pid 4242 --duration 10
    """
    _common(ctx, "memory", pid, duration, mode, output, raw, perfetto, lib, bpftrace, interval,
            json_out, ("memory",), calibrate)
