"""`aorta-tui queue ...`: hardware-queue stress runs, stream sweeps and result comparison.

Only typer and the stdlib at import time; the engine (and torch) load inside the commands.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from aorta_tui.cli.common import (
    check_output_file,
    cli_command,
    count,
    err,
    new_app,
    number,
    stop_signals_interrupt,
)
from aorta_tui.cli.metrics_opts import (
    METRICS_LINGER_OPT,
    METRICS_OPT,
    METRICS_PUBLIC_OPT,
    MetricsRequest,
    metered,
)
from aorta_tui.cli.trust_opts import TRUST_OPT
from aorta_tui.store.trust_guard import guard_run_dir

if TYPE_CHECKING:
    from aorta_tui.core.events import Event
    from aorta_tui.core.inputs import Json
    from aorta_tui.hwqueue.harness import QueueRunConfig
    from aorta_tui.hwqueue.result_doc import QueueResult, QueueSweepDoc

app = new_app(
    "Stress GPU hardware queues with 1..64 concurrent streams and measure what the device did.\n\n"
    "Examples:\n\n"
    "  aorta-tui queue list\n\n"
    "  aorta-tui queue run hetero_kernels --streams 8 -o result.json\n\n"
    "  aorta-tui queue sweep tiny_kernel_stress --streams 1,2,4,8,16,32,64 -o sweep.json\n\n"
    "  aorta-tui queue resume aorta-queue/tiny_kernel_stress-q-20261201-101500-ab12\n\n"
    "  aorta-tui queue compare base.json test.json"
)

_DEVICE_HELP = ("cpu (emulated, streams run in order), cuda, cuda:N (ROCm builds use cuda too). "
                "Plain cuda is cuda:$LOCAL_RANK under torchrun (one GPU per rank), else cuda:0.")
_PRIORITY_HELP = ("default (every stream at the default priority) or lc: the workload's "
                  "latency-critical streams get the highest CUDA/HIP stream priority, the rest "
                  "stay default (no effect on --device cpu; the result says so).")
_TIMING_HELP = ("auto (a measure pass for throughput and latency, then a detail pass timing every "
                "launch: profiler kernel timestamps on a GPU, events where unavailable), events "
                "(one pass, CUDA/HIP events per launch: stream occupancy, not kernel execution) "
                "or cupti (one pass under the profiler).")
_DEVICES_HELP = ("Spread streams over these, e.g. cuda:0,cuda:1, or 'all' (every GPU this process "
                 "sees; under torchrun every rank uses all of them).")


# options `queue run` and `queue sweep` share: one definition, so their help cannot drift apart
_WORKLOAD_ARG = typer.Argument(..., help="Workload name (see `queue list`).")
_DEVICE_OPT = typer.Option("cuda", "--device", "-d", help=_DEVICE_HELP)
_DEVICES_OPT = typer.Option(None, "--devices", help=_DEVICES_HELP)
_SYNC_OPT = typer.Option("per_iteration", "--sync-mode", help="per_iteration, end_only or none.")
_DTYPE_OPT = typer.Option("float32", "--dtype", help="float32, float16 or bfloat16.")
_SIZE_OPT = typer.Option("auto", "--size", help="auto (tiny on --device cpu, default on a "
                         "GPU), default (the full sizes: many minutes on a CPU), or tiny.")
_PARAM_OPT = typer.Option([], "--param", "-p", help="Workload parameter KEY=VALUE.")
_TIMING_OPT = typer.Option("auto", "--timing", help=_TIMING_HELP)
_DETAIL_OPT = typer.Option(20, "--detail-iterations", parser=count(), metavar="N", help="--timing auto: iterations of the "
                           "detail pass (at most --iterations).")
_EBPF_OPT = typer.Option(False, "--ebpf-trace", help="Also trace the CUDA runtime with eBPF (needs root).")
_PRIORITY_OPT = typer.Option("default", "--stream-priority", help=_PRIORITY_HELP)
_QUIET_OPT = typer.Option(False, "--quiet", "-q", help="No progress lines.")
_GRAPH_OPT = typer.Option(False, "--graph", help="Capture each stream's iteration as a CUDA graph "
                          "(HIP graph on ROCm) after the warm-up and replay it in every measured "
                          "iteration. Refused on --device cpu, with CUDA_LAUNCH_BLOCKING=1 and "
                          "for workloads that cannot be captured (queue list --json says why).")


def _parse_params(items: list[str]) -> dict[str, str]:
    from aorta_tui.core.errors import UsageError

    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--param {item!r} is not KEY=VALUE", hint="e.g. --param gemm_m=2048")
        out[key.strip()] = value.strip()
    return out


def _parse_devices(devices: str | None) -> list[str] | None:  # noqa: UP007
    if not devices:
        return None
    return [d.strip() for d in devices.split(",") if d.strip()]


def _progress_sink(quiet: bool) -> Callable[[Event], None]:
    """Progress lines on stderr, a terminal's or a pipe's (as ``--batch`` prints plain lines
    when piped: a long CPU run that printed nothing read as a hang), and every warning on stderr
    however it is run (a resume's "ended the process the dead run left", as sweep and policy
    resumes print it); ``--json`` prints its events on stdout instead."""
    progress = not quiet

    def show(event: Any) -> None:
        kind = getattr(event, "kind", "")
        if kind == "warning":
            from aorta_tui.core.text import inert

            err(f"warning: {inert(event.message)}")
        elif progress and kind == "progress" and event.total:
            err(f"  {event.done}/{event.total} {event.message}")

    return show


@app.command("list")
@cli_command
def list_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print the workloads as JSON."),
) -> None:
    """List the queue workloads with category, stream range and throughput unit.

    Example: aorta-tui queue list --json
    """
    from aorta_tui.hwqueue.workloads import all_infos

    infos = all_infos()
    if as_json:
        print(json.dumps([i.to_dict() for i in infos], indent=2))
        return
    rows = [[i.name, i.category, f"{i.min_streams}-{i.max_streams}", str(i.recommended_streams),
             i.switch_latency_sensitivity, i.throughput_unit, i.description] for i in infos]
    header = ["workload", "category", "streams", "rec.", "switch sens.", "unit", "what it does"]
    if not sys.stdout.isatty():  # piped (grep, cut, a pager): one workload per line, unwrapped
        for line in plain_table("queue workloads", header, rows, width=0, wrap=False):
            print(line)
        return
    _table("queue workloads", header, rows, whole=(0,))  # a name is typed: never broken


# `queue run`'s own options (named here so that its signature reads as the list of them)
_RUN_STREAMS_OPT = typer.Option(4, "--streams", "-s", parser=count(), metavar="N", help="Number of concurrent streams.")
_RUN_ITERATIONS_OPT = typer.Option(50, "--iterations", "-i", parser=count(), metavar="N", help="Measured iterations.")
_RUN_WARMUP_OPT = typer.Option(5, "--warmup", "-w", parser=count(at_least=0), metavar="N",
                               help="Warm-up iterations (not measured).")
_RUN_OUTPUT_OPT = typer.Option(None, "--output", "-o", help="Write the result JSON here (atomically).")
_TIMELINE_OPT = typer.Option(False, "--timeline", help="Include every launch's timestamps.")
_PROFILER_TRACE_OPT = typer.Option(None, "--profiler-trace", help="Also write the profiler's chrome trace "
                                   "(Perfetto) of the kernel-timed pass here.")
_RUN_ID_OPT = typer.Option("", "--run-id", help="Name the run (default: q-<UTC time>-<random>).")
_REPEAT_OPT = typer.Option(1, "--repeat", parser=count(), metavar="N", help="Run it this many times, each in a fresh "
                           "process; the result holds every run and their medians, and "
                           "`queue compare` then judges changes against the run-to-run "
                           "spread (3 or more).")
_RUN_JSON_OPT = typer.Option(False, "--json", help="Print the run as JSON event lines on "
                             "stdout: run_started first, run_finished last with the result "
                             "document in summary.result (as `queue sweep --json`).")


@app.command("run")
@cli_command
def run_cmd(
    workload: str = _WORKLOAD_ARG,
    streams: int = _RUN_STREAMS_OPT,
    iterations: int = _RUN_ITERATIONS_OPT,
    warmup: int = _RUN_WARMUP_OPT,
    device: str = _DEVICE_OPT,
    devices: str | None = _DEVICES_OPT,  # noqa: UP007
    sync_mode: str = _SYNC_OPT,
    dtype: str = _DTYPE_OPT,
    size: str = _SIZE_OPT,
    param: list[str] = _PARAM_OPT,
    output: Path | None = _RUN_OUTPUT_OPT,  # noqa: UP007
    timeline: bool = _TIMELINE_OPT,
    timing: str = _TIMING_OPT,
    detail_iterations: int = _DETAIL_OPT,
    profiler_trace: Path | None = _PROFILER_TRACE_OPT,  # noqa: UP007
    ebpf_trace: bool = _EBPF_OPT,
    stream_priority: str = _PRIORITY_OPT,
    graph: bool = _GRAPH_OPT,
    run_id: str = _RUN_ID_OPT,
    repeat: int = _REPEAT_OPT,
    as_json: bool = _RUN_JSON_OPT,
    quiet: bool = _QUIET_OPT,
) -> None:
    """Run WORKLOAD on N streams and measure throughput, latency, per-stream busy time,
    concurrency, launch delay, queue depth, gaps and switch overhead.

    By default (--timing auto) a measure pass without per-launch instrumentation gives
    throughput and latency, and a detail pass times every launch: kernel timestamps from the
    profiler on a GPU, device events where the profiler is unavailable.

    Example: aorta-tui queue run hetero_kernels --streams 8 --iterations 50 -o result.json

    Example: aorta-tui queue run continuous_batch --streams 8 --stream-priority lc -o lc.json

    Example: aorta-tui queue run moe --streams 16 --repeat 5 -o base.json

    Example: aorta-tui queue run tiny_kernel_stress --streams 8 --graph -o graph.json
    """
    from aorta_tui.cli.stream_end import EndedStream, ends_typed
    from aorta_tui.hwqueue.harness import QueueRunConfig, resolve_size

    with ends_typed(EndedStream("queue") if as_json else None):  # refused: still typed lines
        size = resolve_size(size, device, _parse_devices(devices))
        cfg = QueueRunConfig(workload=workload, streams=streams, iterations=iterations,
                             warmup=warmup, device=device, devices=_parse_devices(devices),
                             sync_mode=sync_mode, dtype=dtype, size=size,
                             params=_parse_params(param), ebpf_trace=ebpf_trace,
                             keep_timeline=timeline, timing=timing,
                             detail_iterations=detail_iterations,
                             profiler_trace=None if profiler_trace is None else str(profiler_trace),
                             stream_priority=stream_priority, run_id=run_id, graph=graph)
        if output is not None:
            output = _per_rank(output)
        check_output_file(output)
        check_output_file(profiler_trace, option="--profiler-trace")
    if as_json:
        _run_as_event_lines(cfg, repeat, output)
    else:
        _run_and_print(cfg, repeat, output, quiet)


def _run_queue(cfg: QueueRunConfig, repeat: int, output: Path | None,
               on_event: Callable[[Event], None]) -> QueueResult:
    """The run: once in this process, or with ``--repeat N`` N times, each in a fresh process
    (the result holds them all). The result is written to ``output`` when one is given."""
    if repeat != 1:
        from aorta_tui.hwqueue.repeat import run_repeated

        return run_repeated(cfg, repeat, on_event=on_event, output=output)
    from aorta_tui.hwqueue.run import run_queue

    return run_queue(cfg, on_event=on_event, output=output)


def _run_as_event_lines(cfg: QueueRunConfig, repeat: int, output: Path | None) -> None:
    """`queue run --json`: the run's events as JSON lines on stdout, the result document last."""
    from aorta_tui.hwqueue.result import new_run_id

    cfg.run_id = cfg.run_id or new_run_id()  # named before the first line: run_started's
    _event_lines(lambda emit: _run_queue(cfg, repeat, output, emit).to_json(), cfg.run_id, None, repeat,
                 source="queue")


def _run_and_print(cfg: QueueRunConfig, repeat: int, output: Path | None, quiet: bool) -> None:
    """`queue run`: progress on stderr (unless quiet), then the result's table on stdout."""
    result = _run_queue(cfg, repeat, output, _progress_sink(quiet))
    print_result(result)
    if output is not None:
        print(f"result written to {output}")


def _per_rank(path: Path) -> Path:
    """Under torchrun every rank writes its own file: result.json -> result.rank1.json."""
    import os

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return path.with_name(f"{path.stem}.rank{os.environ.get('RANK', '0')}{path.suffix}")
    return path


def print_result(doc: QueueResult | dict[str, Any]) -> None:
    """The run's table and notes. Typed figures are read as attributes; the platform, timing,
    metrics, graph and floor sections are shown as the harness wrote them."""
    from aorta_tui.hwqueue.result_doc import as_result

    result = as_result(doc, "queue run")
    s, u, cfg = result.summary.values, result.summary.units, result.config
    platform = result.section("platform")
    title = (f"{result.workload.name} x{cfg.streams} streams on {platform.get('device_name')}"
             f" ({platform['backend']}{', EMULATED' if result.emulated else ''}"
             f"{', CUDA-graph replay' if cfg.graph else ''})")
    sources = result.section("summary_source")
    # per-stream rows are one run's (a --repeat result's representative), never a median
    detail_from = _short_source(str(sources.get("achieved_concurrency", "")), keep_median=False)
    rows = []
    for key, value in s.items():
        shown = _fmt(value) if value is not None else _not_available(result, key)
        rows.append([key, shown, u.get(key) or "", _short_source(str(sources.get(key, "")))])
    for ps in result.per_stream():
        busy = ps["busy_ms"]
        shown = (_fmt(busy) if busy is not None
                 else _not_available(result, f"per_stream[{ps['stream']}].busy_ms"))
        rows.append([f"stream {ps['stream']} busy ({ps['device']})", shown, "ms", detail_from])
    rows.append(["stream priority", _priority_line(result), "", ""])
    memory = result.section("metrics").get("memory")
    if memory:
        for dev, m in memory.items():
            rows.append([f"peak memory ({dev})", _fmt(m["peak_bytes"] / 2**20), "MiB",
                         "allocator"])
    else:
        rows.append(["peak memory", _not_available(result, "memory"), "", ""])
    _table(title, ["metric", "value", "unit", "from"], rows)
    _repeat_lines(result)
    timing = result.section("timing")
    _say(f"busy time means {timing['busy_meaning']}")
    if timing.get("kernel_source_reason") and not result.emulated:
        _say(f"no kernel timestamps: {timing['kernel_source_reason']}")
    passes = timing.get("passes") or {}
    for name, p in passes.items():
        if isinstance(p, dict):
            _say(f"{name} pass: {p['iterations']} iterations in {_fmt(p['wall_s'])} s; "
                 f"{p['instrumentation']}")
    rel = passes.get("detail_relative_throughput")
    if rel is not None:
        _say(f"the detail pass ran at {rel * 100:.1f}% of the measure pass's throughput "
             "(the cost of timing every launch)")
    for line in floor_lines(result):
        _say(line)


def _repeat_lines(result: QueueResult) -> None:
    """A --repeat result: what its summary is, and each figure's range over the runs."""
    repeats = result.repeats
    if repeats is None:
        return
    _say(f"summary: medians of {repeats.count} repetitions, each a fresh process; "
         f"per-stream rows and passes below are the median-throughput one "
         f"(run {repeats.extra.get('detail_from')})")
    for key in result.summary.values:
        values = [v for v in (r.get(key) for r in repeats.summaries or ()) if v is not None]
        if values:
            _say(f"  {key}: {_fmt(min(values))} .. {_fmt(max(values))} over {len(values)} runs")


def floor_lines(result: QueueResult) -> list[str]:
    """The launch mode and the run's per-launch cost beside the in-process floors."""
    graph = result.section("graph")
    floor = result.section("floor")
    lines = []
    if graph.get("applied"):
        lines.append(f"launches: CUDA-graph replay ({graph.get('mode')}, {graph.get('graphs')} "
                     f"graph(s) captured in {_fmt(graph.get('capture_s'))} s)")
    run = floor.get("run_us_per_launch")
    if run is None:
        return lines
    parts = []
    for kind, name in (("eager", "bare eager loop"), ("graph", "graph replay")):
        # a --repeat result: the summary holds the median ratio, the floor one repetition's
        ratio: object = result.summary.value(f"{kind}_floor_ratio")
        ratio = floor.get(f"{kind}_ratio") if ratio is None else ratio
        us = floor.get(f"{kind}_us_per_launch")
        if isinstance(ratio, (int, float)) and isinstance(us, (int, float)):
            parts.append(f"{ratio:.3g}x the {name} ({_fmt(us)} us)")
        else:
            parts.append(f"{name} floor {ratio}")
    lines.append(f"per launch call: {_fmt(run)} us = " + "; ".join(parts))
    return lines


def _short_source(text: str, keep_median: bool = True) -> str:
    """'detail pass: profiler kernel timestamps' -> 'detail: kernels' (table column);
    a --repeat result's 'median of 3 repetitions, each ...' adds ', median of 3'."""
    if not text:
        return ""
    suffix = ""
    if text.startswith("median of "):
        count, _, text = text[len("median of "):].partition(" repetitions, each ")
        suffix = f", median of {count}" if keep_median else ""
    return _short_name(text) + suffix


def _short_name(text: str) -> str:
    head, _, tail = text.partition(":")
    short = {"profiler kernel timestamps": "kernels", "per-launch device events": "events",
             "wall per launch call over the in-process floors": "floors",
             "host clocks (CPU emulation)": "host clocks"}.get(tail.strip(), "")
    name = head.replace(" pass", "")
    return f"{name}: {short}" if short else name


def _priority_line(result: QueueResult) -> str:
    sp = result.section("stream_priority")
    if not sp.get("applied"):
        return f"{sp.get('requested', 'default')}: {sp.get('reason') or 'not applied'}"
    got = {ps["stream"]: ps.get("priority") for ps in result.per_stream()}
    lc = sp.get("latency_critical_streams") or []
    return (f"lc: streams {','.join(map(str, lc))} at {sp.get('highest_priority')} "
            f"(read back: {', '.join(f'{s}={got[s]}' for s in sorted(got))})")


def _not_available(result: QueueResult, key: str) -> str:
    from aorta_tui.hwqueue.result import summary_reason

    why = summary_reason(result.unavailable, key)
    return f"not available ({why})" if why else "not available"


def _fmt(value: object) -> str:
    if value is None:
        return "not available"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _table(title: str, header: list[str], rows: list[list[str]],
           whole: tuple[int, ...] = ()) -> None:
    """A rich table on a terminal, aligned plain text otherwise; both fit the terminal's
    width (``$COLUMNS``, else the terminal's, else 80): a long value wraps in its column,
    except in the columns ``whole`` names (names a user types)."""
    import shutil

    width = shutil.get_terminal_size((80, 24)).columns
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title)
        for k, h in enumerate(header):
            if k in whole:
                table.add_column(h, no_wrap=True, min_width=max(len(str(r[k])) for r in rows))
            else:
                table.add_column(h, overflow="fold")
        for r in rows:
            table.add_row(*[str(c) for c in r])
        Console(width=width).print(table)
        return
    for line in plain_table(title, header, rows, width, whole=whole):
        print(line)


def _say(text: str) -> None:
    """A line of prose wrapped to the terminal's width (continuations indented)."""
    import shutil
    import textwrap

    width = shutil.get_terminal_size((80, 24)).columns
    lead = " " * (len(text) - len(text.lstrip()))
    print("\n".join(textwrap.wrap(text, width, subsequent_indent=lead + "  ",
                                   break_long_words=True, break_on_hyphens=False)) or text)


def plain_table(title: str, header: list[str], rows: list[list[str]], width: int, *,
                wrap: bool = True, whole: tuple[int, ...] = ()) -> list[str]:
    """The lines of an aligned table at most ``width`` columns wide (no line wider unless one
    column alone cannot fit its header): the widest columns give way first, their cells
    wrapped onto more lines. Columns in ``whole`` never give way; ``wrap=False``: one line
    per row, as wide as it needs."""
    import textwrap

    gap = 2
    table = [[str(c) for c in r] for r in [header, *rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    # a column never narrower than its header; a whole one never narrower than its widest cell
    floor = [widths[i] if i in whole else max(len(h), 8) for i, h in enumerate(header)]
    if not wrap:
        return [title, *((" " * gap).join(c.ljust(w) for c, w in zip(r, widths, strict=True))
                         .rstrip() for r in table)]
    while sum(widths) + gap * (len(widths) - 1) > width:
        i = max(range(len(widths)), key=lambda j: widths[j] - floor[j])
        if widths[i] <= floor[i]:
            break
        widths[i] -= 1
    out = textwrap.wrap(title, width) or [""]
    for r in table:
        cells = [textwrap.wrap(c, w, break_long_words=True, break_on_hyphens=False) or [""]
                 for c, w in zip(r, widths, strict=True)]
        for k in range(max(len(c) for c in cells)):
            parts = [(c[k] if k < len(c) else "").ljust(w) for c, w in zip(cells, widths,
                                                                          strict=True)]
            out.append((" " * gap).join(parts).rstrip())
    return out


def _event_lines(go: Callable[[Callable[[Event], None]], dict[str, Json]], run_id: str,
                 run_dir: Path | None, total: int,
                 source: str = "queue_sweep") -> None:
    """`queue run --json` and `queue sweep --json`: the run as one event stream, as every long
    command's ``--json`` is (docs/architecture.md): ``RunStarted``, the run's own events, and
    ``RunFinished`` last with the result document in ``summary["result"]`` (or, on failure, a
    ``RunWarning`` and a failed ``RunFinished`` before the error goes on to stderr and the exit
    code).

    ``go(on_event)`` runs it and returns the document. A sweep kept in a run directory emits
    its own ``RunStarted`` and ``RunFinished`` (the journal gets them too); the ones it did not
    reach (a run refused before it started, a queue run, an in-process sweep) are written here."""
    from aorta_tui.cli.stream_end import EndedStream, ends_typed
    from aorta_tui.cli.trace_stream import open_stream

    # a point's own prints never mix into the lines (open_stream); the sweep's own events
    # only count as its start and end, never a point's
    stream = EndedStream(source, run_id=run_id, sink=open_stream(), run_dir=run_dir, total=total)
    if run_dir is None:
        stream.start()
    with ends_typed(stream):
        doc = go(stream.emit)
    stream.finish(doc)


_RUN_DIR_HELP = ("Keep the sweep in this run directory (default aorta-queue/WORKLOAD-RUNID): a "
                 "lock, a journal, each point's result.json and the document sweep.json; "
                 "`queue resume DIR` runs only the points it lacks. Not with --in-process, "
                 "which keeps no run directory.")


@app.command("sweep")
@cli_command
def sweep_cmd(
    workload: str = _WORKLOAD_ARG,
    streams: str = typer.Option("1,2,4,8,16,32,64", "--streams", "-s",
                                help="Comma-separated stream counts."),
    iterations: int = typer.Option(30, "--iterations", "-i", parser=count(), metavar="N", help="Measured iterations per point."),
    warmup: int = typer.Option(3, "--warmup", "-w", parser=count(at_least=0), metavar="N", help="Warm-up iterations per point."),
    device: str = _DEVICE_OPT,
    devices: str | None = _DEVICES_OPT,  # noqa: UP007
    sync_mode: str = _SYNC_OPT,
    dtype: str = _DTYPE_OPT,
    size: str = _SIZE_OPT,
    param: list[str] = _PARAM_OPT,
    knee_gain: float = typer.Option(0.10, "--knee-gain", parser=number(above=0.0, at_most=10.0), metavar="G",
                                    help="Marginal throughput gain below which the knee is set."),
    output: Path | None = typer.Option(None, "--output", "-o",  # noqa: UP007
                                          help="Also write the sweep JSON here (atomically)."),
    run_dir: Path | None = typer.Option(None, "--run-dir", help=_RUN_DIR_HELP),  # noqa: UP007
    ebpf_trace: bool = _EBPF_OPT,
    stream_priority: str = _PRIORITY_OPT,
    timing: str = _TIMING_OPT,
    detail_iterations: int = _DETAIL_OPT,
    graph: bool = _GRAPH_OPT,
    in_process: bool = typer.Option(False, "--in-process",
                                    help="Run every point in this process (faster start; state "
                                    "carries between points, a failing point ends the sweep, "
                                    "and no run directory is kept: nothing to resume). "
                                    "Default: a fresh process per point."),
    as_json: bool = typer.Option(False, "--json", help="Print the sweep as JSON event lines on "
                                 "stdout: run_started first, run_finished last with the sweep "
                                 "document in summary.result."),
    quiet: bool = _QUIET_OPT,
    metrics: str | None = METRICS_OPT,
    metrics_public: bool = METRICS_PUBLIC_OPT,
    metrics_linger: float = METRICS_LINGER_OPT,
) -> None:
    """Run WORKLOAD at several stream counts: throughput, scaling efficiency, peak and knee.

    Each point runs in a fresh process: nothing carries over between points, and a
    point that fails (e.g. out of memory) is reported while the others still run. The sweep
    is kept in a run directory (--run-dir); after Ctrl-C (exit 130) or a kill,
    `aorta-tui queue resume DIR` runs only the points that did not finish.

    Example: aorta-tui queue sweep hetero_kernels --streams 2,4,8,16,32,64 -o sweep.json

    Example: aorta-tui queue sweep moe --streams 4,8,16 --run-dir aorta-queue/moe-1 (then, after
    Ctrl-C: aorta-tui queue resume aorta-queue/moe-1)
    """
    from aorta_tui.cli.stream_end import EndedStream, ends_typed
    from aorta_tui.hwqueue.harness import QueueRunConfig, resolve_size
    from aorta_tui.hwqueue.result import new_run_id
    from aorta_tui.hwqueue.sweep import parse_stream_counts, run_sweep

    with ends_typed(EndedStream("queue_sweep") if as_json else None):  # refused: typed lines
        counts = parse_stream_counts(streams)
        base = QueueRunConfig(workload=workload, streams=counts[0], iterations=iterations,
                              warmup=warmup, device=device, devices=_parse_devices(devices),
                              sync_mode=sync_mode, dtype=dtype,
                              size=resolve_size(size, device, _parse_devices(devices)),
                              params=_parse_params(param), ebpf_trace=ebpf_trace,
                              stream_priority=stream_priority, timing=timing,
                              detail_iterations=detail_iterations, graph=graph)
        check_output_file(output)
    base.run_id = new_run_id()  # the events, the document and the run directory share it
    if run_dir is None and not in_process:
        run_dir = Path("aorta-queue") / f"{workload}-{base.run_id}"

    def go(on_event: Callable[[Event], None]) -> QueueSweepDoc:
        return run_sweep(base, counts, on_event=on_event, knee_gain=knee_gain, output=output,
                         isolate=not in_process, run_dir=run_dir)

    _sweep_and_print(metered(go, MetricsRequest(metrics, metrics_public, metrics_linger)),
                     base.run_id, run_dir, len(counts), output, as_json, quiet)


@app.command("resume")
@cli_command
def resume_cmd(
    run_dir: Path = typer.Argument(..., help="The run directory of an unfinished `queue sweep`."),
    output: Path | None = typer.Option(None, "--output", "-o",  # noqa: UP007
                                          help="Also write the sweep JSON here (default: the "
                                          "-o file the sweep was started with, if any)."),
    as_json: bool = typer.Option(False, "--json", help="JSON event lines on stdout, as "
                                 "`queue sweep --json`."),
    quiet: bool = _QUIET_OPT,
    trust_run_dir: bool = TRUST_OPT,
) -> None:
    """Finish an interrupted `queue sweep`: the points that finished are kept (never run
    again), the others run, each in a fresh process, with the sweep's own options; then the
    document (sweep.json in the run directory, and -o) is written.

    Exit status: 0 done; 2 not a queue sweep's run directory, or another process is running it;
    130 interrupted again (resume again).

    Example: aorta-tui queue resume aorta-queue/moe-q-20261201-101500-ab12
    """
    from aorta_tui.cli.stream_end import EndedStream, ends_typed
    from aorta_tui.hwqueue.sweep import read_request, resume_sweep

    # until the request is read (its run id), a refusal's --json stream ends here, typed
    with ends_typed(EndedStream("queue_sweep") if as_json else None):
        guard_run_dir(run_dir, ["queue", "resume", str(run_dir)], trusted=trust_run_dir)
        request = read_request(run_dir)
        check_output_file(output)
    run_id = request.run_id

    def go(on_event: Callable[[Event], None]) -> QueueSweepDoc:
        return resume_sweep(run_dir, on_event=on_event, output=output)

    _sweep_and_print(go, run_id, run_dir, len(request.stream_counts), output, as_json, quiet)


def _sweep_and_print(go: Callable[[Callable[[Event], None]], QueueSweepDoc], run_id: str,
                     run_dir: Path | None, total: int, output: Path | None, as_json: bool,
                     quiet: bool) -> None:
    """Run the sweep (``go(on_event)``) as event lines or as a table."""
    try:
        with stop_signals_interrupt():  # SIGTERM/SIGHUP end the sweep as Ctrl-C does
            if as_json:  # the last event carries the document in its JSON form
                _event_lines(lambda emit: go(emit).to_json(), run_id, run_dir, total)
                return
            doc = go(_progress_sink(quiet))
    except KeyboardInterrupt:
        if run_dir is not None:
            err(f"interrupted; the finished points are kept: aorta-tui queue resume {run_dir}")
        raise
    _print_sweep(doc)
    if output is not None:
        print(f"sweep written to {output}")
    if run_dir is not None:
        print(f"run directory: {run_dir}")


def _print_sweep(sweep: QueueSweepDoc) -> None:
    """The sweep's table, from the typed document's attributes."""
    from aorta_tui.hwqueue.result import summary_reason

    a = sweep.analysis
    unit = sweep.workload.throughput_unit
    rows = []
    keys = ("throughput", "latency_p50_ms", "latency_p99_ms", "achieved_concurrency",
            "switch_overhead_us")
    reasons: dict[str, str] = {}  # one footnote per distinct reason, not one per cell
    for r in sweep.points:
        n = r.config.streams
        cells = []
        for key in keys:
            value = r.summary.value(key)
            if value is not None:
                cells.append(_fmt(value))
                continue
            why = summary_reason(r.unavailable, key) or "no reason recorded"
            mark = reasons.setdefault(why, f"[{len(reasons) + 1}]")
            cells.append(f"n/a {mark}")
        eff = a.efficiency.get(str(n))
        rows.append([str(n), cells[0], _fmt(eff), *cells[1:]])
    title = f"{sweep.workload.name} stream sweep ({unit}){' EMULATED' if sweep.emulated else ''}"
    _table(title, ["streams", "throughput", "efficiency", "p50 ms", "p99 ms", "concurrency",
                   "switch us"], rows)
    for why, mark in reasons.items():
        print(f"{mark} not available: {why}")
    for failed in sweep.failed_points:
        print(f"{failed.streams} streams failed, left out of the analysis: {failed.reason}")
    print(f"peak: {a.peak_streams} streams ({_fmt(a.peak_throughput)} {unit}); "
          f"knee: {a.knee_streams} streams")


@app.command("compare")
@cli_command
def compare_cmd(
    base: Path = typer.Argument(..., help="Baseline result (`queue run -o`) or sweep (`queue sweep -o`)."),
    test: Path = typer.Argument(..., help="Result or sweep to judge against it."),
    min_change: float = typer.Option(0.05, "--min-change", parser=number(at_least=0.0, at_most=100.0), metavar="F",
                                     help="A figure whose relative change is below this is "
                                          "'unchanged' (the rule above)."),
    fail_on_regression: bool = typer.Option(True, "--fail-on-regression/--no-fail",
                                            help="Exit 1 when any figure regressed."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
) -> None:
    """Compare two queue results, or two sweeps stream count by stream count.

    One rule for every figure: a figure changed when |relative change| >= --min-change and,
    where both runs recorded a spread (95% bootstrap interval: run-to-run with --repeat 3,
    else per-iteration samples), the intervals do not overlap. A changed figure is 'improved'
    or 'regressed' by its direction when both spreads are known, else 'changed' (no better
    direction, such as wall_s, or no spread recorded). Everything else is 'unchanged'.

    Exit status: 0 no regression, 1 at least one figure regressed (unless --no-fail),
    2 bad input.

    Example: aorta-tui queue compare base.json test.json --min-change 0.03
    """
    from aorta_tui.hwqueue.compare import compare_files
    from aorta_tui.hwqueue.result_doc import load_result

    report = compare_files(load_result(base), load_result(test), min_change=min_change)
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        rows = []
        sweep = "streams" in report
        for r in report["rows"]:
            change = "" if r.get("change") is None else f"{r['change'] * 100:+.1f}%"
            rows.append(([str(r["streams"])] if sweep else [])
                        + [r["metric"], _fmt(r["base"]), _fmt(r["test"]), change,
                           f"{r['verdict']}: {r['why']}" if r.get("why") else r["verdict"],
                           r.get("spread") or r.get("reason", "")])
        _table(f"compare {base} -> {test}", (["streams"] if sweep else [])
               + ["metric", "base", "test", "change", "verdict", "spread"], rows,
               whole=(1,) if sweep else (0,))  # a metric's name is searched for: never broken
        for note in report["notes"]:
            print(f"note: {note}")
    if report["regressions"] and fail_on_regression:
        raise typer.Exit(1)
