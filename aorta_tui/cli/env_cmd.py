"""`aorta-tui env ...`: capture, summarize, query and diff environment snapshots."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from aorta_tui.cli.common import check_output_file, cli_command, err, new_app, seconds

if TYPE_CHECKING:
    from aorta_tui.envsnap.diff import DiffReport

app = new_app(
    "Environment snapshots (env.json): capture, summarize, query one field, diff two.\n\n"
    "Examples:\n\n"
    "  aorta-tui env probe                      # writes ./env.json and prints a summary\n\n"
    "  aorta-tui env probe --summary            # one screen, no file\n\n"
    "  aorta-tui env probe --field gpus.0.architecture\n\n"
    "  aorta-tui env diff box-a.json box-b.json # exit 1 when numerics/scheduling differ\n\n"
    "  aorta-tui env summary env.json"
)

_PROBE_HELP = (
    "Capture this machine's environment: host, GPUs, driver, CUDA or ROCm libraries, torch "
    "build and numerics flags, Python packages, numerics/scheduling environment variables. "
    "Every field has a state (ok, not_applicable, unknown, error) and its source. Without "
    "--summary, --field or --json it writes env.json (or -o FILE). Run it as a normal user "
    "to see which fields need root.\n\n"
    "Example: aorta-tui env probe -o h200.json --summary"
)


@app.command("probe", help=_PROBE_HELP)
@cli_command
def probe(
    output: Path | None = typer.Option(  # noqa: UP007 - typer needs Optional on 3.10
        None, "--output", "-o", metavar="FILE",
        help="Write the snapshot here (default env.json when neither --summary, --field nor --json)."),
    summary: bool = typer.Option(False, "--summary", help="Print the one-screen summary."),
    field: str | None = typer.Option(  # noqa: UP007
        None, "--field", metavar="PATH",
        help="Print one field as JSON, e.g. torch.tf32_matmul or gpus.0.architecture."),
    json_mode: bool = typer.Option(False, "--json", help="Print the whole snapshot as JSON."),
    no_torch: bool = typer.Option(False, "--no-torch", help="Skip the torch section (no import)."),
    timeout: float = typer.Option(20.0, "--timeout", parser=seconds(at_least=1.0), metavar="S",
                                  help="Seconds the whole capture may take."),
    bytecode_cache: str = typer.Option(
        "auto", "--bytecode-cache", metavar="MODE",
        help="auto (default): where the image keeps no bytecode for torch (PYTHONDONTWRITEBYTECODE=1, "
             "a uv-built torch), the probe's helper processes use the cache under "
             "~/.cache/aorta-tui/pycache; on; off (the image's settings exactly)."),
) -> None:
    from aorta_tui.core.atomic import atomic_write_json
    from aorta_tui.core.errors import UsageError
    from aorta_tui.envsnap import capture_snapshot, snapshot_hash
    from aorta_tui.envsnap.query import get_field, split_path

    if sum((summary, field is not None, json_mode)) > 1:
        raise UsageError("--summary, --field and --json each choose what to print: use one")
    if field is not None:
        split_path(field)  # a malformed path fails before the capture, not after it
    from aorta_tui.core.bytecode import CHOICES, plan_bytecode

    if bytecode_cache not in CHOICES:
        raise UsageError(f"--bytecode-cache {bytecode_cache!r} is not a mode",
                         hint=f"use one of {', '.join(CHOICES)}")
    write_to = output if output is not None else (
        None if (summary or field is not None or json_mode) else Path("env.json"))
    check_output_file(write_to)  # before the probe's seconds, not after them
    snap = capture_snapshot(timeout_s=timeout, include_torch=not no_torch,
                            bytecode=plan_bytecode(bytecode_cache))
    if write_to is not None:
        try:
            atomic_write_json(write_to, snap)
        except OSError as exc:  # a full disk (bytes or inodes): exit 3 with the free space
            from aorta_tui.store.write_errors import output_write_error

            raise output_write_error(exc, write_to) from None
    needs_root = snap.get("probe", {}).get("fields_needing_root", {}).get("value") or []
    if needs_root:
        err(f"note: {len(needs_root)} field(s) need root and were not read: {', '.join(needs_root)} "
            "(run with sudo to include them)")
    if field is not None:
        print(json.dumps(get_field(snap, field)))
        return
    if json_mode:
        print(json.dumps(snap, indent=2))
        return
    if write_to is not None:
        states = snap.get("probe", {}).get("state_counts", {}).get("value") or {}
        err(f"wrote {write_to} (hash {snapshot_hash(snap)}; "
            + ", ".join(f"{k} {v}" for k, v in states.items()) + ")")
    _print_summary(snap)


@app.command("summary", help=(
    "Show the one-screen summary of a snapshot file (aorta-tui or upstream AORTA env.json).\n\n"
    "Example: aorta-tui env summary env.json --field cuda.cublas.version"))
@cli_command
def summary_cmd(
    file: Path = typer.Argument(..., metavar="FILE", help="A snapshot written by `env probe`."),
    field: str | None = typer.Option(None, "--field", metavar="PATH",  # noqa: UP007
                                        help="Print one field as JSON instead."),
    json_mode: bool = typer.Option(False, "--json", help="Print the summary rows as JSON."),
) -> None:
    from aorta_tui.envsnap import load_snapshot
    from aorta_tui.envsnap.query import get_field
    from aorta_tui.envsnap.summary import summarize

    snap = load_snapshot(file)
    if field is not None:
        if snap.get("format") is None:  # upstream AORTA: look the dotted path up as it is
            from aorta_tui.envsnap.upstream import get_upstream_field

            print(json.dumps(get_upstream_field(snap, field)))
            return
        print(json.dumps(get_field(snap, field)))
        return
    if json_mode:
        print(json.dumps([{"group": g, "rows": [{"label": a, "text": b} for a, b in rows]}
                          for g, rows in summarize(snap)], indent=2))
        return
    _print_summary(snap)


_DIFF_HELP = (
    "Compare two snapshots: added / removed / changed fields grouped by section, each ranked "
    "numerics (libraries, TF32/precision/determinism, numerics env vars), scheduling (queues, "
    "MPS, clocks, power, limits) or informational. Volatile fields (timestamps, load, current "
    "clocks) are hidden unless --all. Reads upstream AORTA env.json files too.\n\n"
    "Exit codes: 0 no numerics/scheduling difference; 1 there are some; 2 bad input.\n\n"
    "Example: aorta-tui env diff cpu-box.json h200.json --section cuda"
)


@app.command("diff", help=_DIFF_HELP)
@cli_command
def diff(
    a: Path = typer.Argument(..., metavar="A", help="First snapshot."),
    b: Path = typer.Argument(..., metavar="B", help="Second snapshot."),
    show_all: bool = typer.Option(False, "--all", help="Include volatile fields."),
    json_mode: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    section: str | None = typer.Option(None, "--section", metavar="S",  # noqa: UP007
                                          help="Only this section (host, gpus, cuda, torch, ...)."),
) -> None:
    from aorta_tui.core.errors import UsageError
    from aorta_tui.envsnap import diff_snapshots, load_snapshot

    snap_a, snap_b = load_snapshot(a), load_snapshot(b)
    report = diff_snapshots(snap_a, snap_b, include_volatile=show_all)
    if section is not None:
        known = {e.section for e in report.entries} | _sections(snap_a) | _sections(snap_b)
        if section not in known:
            raise UsageError(f"--section {section}: no such section in these snapshots",
                             hint="sections: " + ", ".join(sorted(known)))
        report = report.filtered(section)
    if json_mode:
        print(json.dumps({"a": str(a), "b": str(b), **report.to_dict()}, indent=2, default=str))
    elif sys.stdout.isatty():
        _print_diff_rich(report)
    else:
        from aorta_tui.envsnap.diff import render_text

        sys.stdout.write(render_text(report))
    if report.has_relevant_differences:
        raise typer.Exit(1)


def _sections(snap: dict[str, Any]) -> set[str]:
    return {k for k in snap if k not in ("format", "schema_version")}


def _print_summary(snap: dict[str, Any]) -> None:
    from aorta_tui.envsnap.summary import render_text, summarize

    groups = summarize(snap)
    if not sys.stdout.isatty():
        sys.stdout.write(render_text(groups))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column(style="dim", no_wrap=True)
    table.add_column(overflow="fold")
    for title, rows in groups:
        for i, (label, text) in enumerate(rows):
            style = "yellow" if text.startswith("not available") else None
            table.add_row(title if i == 0 else "", label, f"[{style}]{_esc(text)}[/]" if style else _esc(text))
    Console().print(table)


def _esc(text: str) -> str:
    """Text from a snapshot for rich: its escapes shown, not obeyed (core/text.py), and no
    markup."""
    from rich.markup import escape

    from aorta_tui.core.text import inert

    return escape(inert(text))


def _print_diff_rich(report: DiffReport) -> None:
    from rich.console import Console
    from rich.table import Table

    from aorta_tui.envsnap.diff import render_value

    console = Console()
    counts = report.counts()
    if not report.entries:
        console.print(f"no differences in {report.compared_fields} fields"
                      + (f" ({report.hidden_volatile} volatile hidden; --all)" if report.hidden_volatile else ""))
        return
    console.print(f"{len(report.entries)} differences: [red]{counts['numerics']} numerics[/], "
                  f"[yellow]{counts['scheduling']} scheduling[/], {counts['informational']} informational"
                  + (f"; {report.hidden_volatile} volatile hidden (--all)" if report.hidden_volatile else ""))
    for note in report.notes:
        console.print(f"note: {_esc(note)}")
    colour = {"numerics": "red", "scheduling": "yellow", "informational": "dim"}
    for section, entries in report.by_section().items():
        table = Table(title=f"[bold]{_esc(section)}[/]", title_justify="left", expand=True)
        table.add_column("rank", no_wrap=True)
        table.add_column("change", no_wrap=True)
        table.add_column("field", overflow="fold")
        table.add_column("A", overflow="fold")
        table.add_column("B", overflow="fold")
        for e in entries:
            table.add_row(f"[{colour[e.rank]}]{e.rank}[/]", e.change, _esc(e.path),
                          _esc(render_value(e.a_value, 60)) if e.change != "added" else "",
                          _esc(render_value(e.b_value, 60)) if e.change != "removed" else "")
        console.print(table)
