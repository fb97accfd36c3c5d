"""The body of `sweep run` / `--batch`: recipe or flags -> plan -> sweep with sinks."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from aorta_tui.core.errors import UsageError
from aorta_tui.sweep.drive import run_until_done, sweep_for_request
from aorta_tui.sweep.way_in import SweepRequest, is_sanitizer_request

if TYPE_CHECKING:
    from aorta_tui.cli.stream_end import EndedStream
    from aorta_tui.cli.sweep_view import SweepRunView
    from aorta_tui.core.events import EventBus
    from aorta_tui.recipe.model import Recipe
    from aorta_tui.sweep.plan import Plan


def _bad_byte(text: str) -> tuple[int, int] | None:
    """``(position, byte)`` of the first byte of ``text`` that was not UTF-8 (Python decodes such
    an argv byte or path byte as a lone surrogate), or ``None`` when ``text`` is all UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        return exc.start + 1, code - 0xDC00 if 0xDC80 <= code <= 0xDCFF else code
    return None


def _shown(value: str, limit: int = 80) -> str:
    """``value`` with its undecodable bytes written as ``\\xNN`` (as the user typed them)."""
    text = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def refuse_undecodable(req: SweepRequest, argv: list[str] | None = None) -> None:
    """Refuse, before anything is created, an argument that is not UTF-8.

    Everything a run records (run.json with the command and argv, the journal, the resolved
    recipe, matrix.md) is UTF-8 text that resume, attach and the TUI read back; a byte that has
    no UTF-8 form would be stored as an escape a reader may not turn back into the same byte,
    so the run would not be resumable faithfully. A wrapper script carries such bytes intact.
    """
    named: list[tuple[str, str]] = [(f"argument {i} of the command after `--`", a)
                                    for i, a in enumerate(req.command, 1)]
    for what, value in (("--output", req.output), ("--recipe", req.recipe), ("--resume", req.resume),
                        ("--ticket", req.ticket), *(("--mitigations-file", m) for m in req.mitigation_files)):
        if value is not None:
            named.append((f"the {what} value", str(value)))
    named += [(f"command-line argument {i}", a) for i, a in enumerate(argv if argv is not None else sys.argv)]
    for what, value in named:
        bad = _bad_byte(value)
        if bad is None:
            continue
        pos, byte = bad
        fix = ("put the command in a script and run that (e.g. -- bash launch.sh): the script "
               "passes the bytes on unchanged" if "command after" in what
               else "use a path (or value) that is UTF-8 text")
        raise UsageError(
            f"{what} is not UTF-8 text: '{_shown(value)}' has byte 0x{byte:02x} at position {pos}; "
            "aorta-tui records it in UTF-8 files (run.json, the journal) that a resume reads back",
            hint=fix,
        )


def run_sweep_command(req: SweepRequest, view: SweepRunView) -> int:
    """``sweep run``; with ``--json`` a run stopped by an error still ends its event stream:
    ``run_started`` first, a ``warning`` and a failed ``run_finished`` with the exit code and
    the error's parts last (the paragraph for people goes to stderr, as without ``--json``)."""
    from aorta_tui.cli.stream_end import EndedStream, ends_typed

    stream = EndedStream("sweep") if view.json_mode else None
    with ends_typed(stream):
        return _run_sweep_command(req, view, stream)


def _run_sweep_command(req: SweepRequest, view: SweepRunView, stream: EndedStream | None) -> int:
    from aorta_tui.cli.sinks import pick_sink
    from aorta_tui.core.events import EventBus

    refuse_undecodable(req)
    if is_sanitizer_request(req):  # upstream's separate runner (collect/sanitizer.py)
        from aorta_tui.cli.sanitizer_flow import run_sanitizer_request

        return run_sanitizer_request(req, view, stream)
    bus = EventBus()
    sweep = sweep_for_request(req, bus)
    recipe = sweep.recipe
    if view.dry_run:
        notes = sweep.check_runnable(dry_run=True)
        print_plan(recipe, sweep.plan, view.json_mode, notes)
        return 0
    bus.add(stream if stream is not None else pick_sink(False))
    if view.verbose:
        add_verbose_sink(bus, view.verbose)
    from aorta_tui.cli.metrics_opts import sweep_metrics_serving

    with sweep_metrics_serving(view.metrics, bus, {c.name: c.trials for c in sweep.plan.cells}):
        outcome = run_until_done(sweep, bus)
    if outcome.status == "interrupted":
        print(f"interrupted; resume with: aorta-tui sweep run --resume {outcome.run_dir}",
              file=sys.stderr, flush=True)
    return outcome.exit_code


def cells_times_trials(plan: Plan) -> str:
    """``3 cells x 2 trials = 6 trials``; cells with different counts say their range."""
    per_cell = sorted({c.trials for c in plan.cells})
    n_cells, total = len(plan.cells), len(plan.trials)
    cells = f"{n_cells} cell{'s' if n_cells != 1 else ''}"
    if len(per_cell) == 1:
        each = per_cell[0]
        return f"{cells} x {each} trial{'s' if each != 1 else ''} = {total} trials"
    return f"{cells} x {per_cell[0]}-{per_cell[-1]} trials = {total} trials"


def print_plan(recipe: Recipe, plan: Plan, json_mode: bool, notes: Sequence[str] = ()) -> None:
    import json

    if json_mode:
        out = {"mode": recipe.mode, "ticket": recipe.ticket, "workload": recipe.workload,
               "command": list(recipe.command or []), **plan.to_dict(), "notes": list(notes)}
        print(json.dumps(out, indent=2))
        return
    what = (f"workload {recipe.workload}" if recipe.mode == "triage"
            else f"command: {' '.join(recipe.command or []) or '(none given)'}")
    print(f"{recipe.mode} recipe, ticket {recipe.ticket}, {what}")
    print(f"{cells_times_trials(plan)}, order {plan.order} (seed {plan.seed}), "
          f"baseline {plan.baseline_cell or 'none'}")
    for c in plan.cells:
        from aorta_tui.core.secrets import mask_env  # printed: never a token

        env = " ".join(f"{k}={v}" for k, v in sorted(mask_env(c.env).items())) or "(no variables)"
        sw = ""
        if c.switches:
            # An opaque command cannot be switched from inside: only the variables reach it.
            sw = (f" switches: {', '.join(c.switches)}" if recipe.mode == "triage"
                  else f" (in-process switches {', '.join(c.switches)} apply to workload runs only)")
        print(f"  {c.name}: {c.trials} trials, mitigations [{', '.join(c.mitigations)}], "
              f"environment {c.environment}; {env}{sw}")
    first = ", ".join(t.trial_id for t in plan.trials[:6])
    print(f"run order starts: {first}{' ...' if len(plan.trials) > 6 else ''}")
    for note in notes:
        print(f"note: {note}")


def add_verbose_sink(bus: EventBus, level: int) -> None:
    """-v: a line per trial on stderr while the matrix runs; -vv: also the engine's debug log."""
    import logging

    from aorta_tui.cli.sinks import PlainSink

    bus.add(PlainSink(sys.stderr))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    log = logging.getLogger("aorta_tui")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG if level >= 2 else logging.INFO)

