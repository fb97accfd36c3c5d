"""`sweep run --recipe FILE` for a ``mode: sanitizer`` recipe (collect/sanitizer.py).

As upstream, only ``--recipe``, ``--dry-run``, ``--output``, ``--json`` and ``-v`` apply; any
other flag (the executor's, the trial isolation's, ``--metrics``, ``--no-snapshot`` too) or a
``-- command`` is refused rather than silently ignored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.core.events import RunFinished, RunStarted

if TYPE_CHECKING:
    from aorta_tui.cli.sweep_view import SweepRunView
    from aorta_tui.core.events import EventSink
    from aorta_tui.sweep.way_in import SweepRequest


def _set_flags(req: SweepRequest, view: SweepRunView) -> list[str]:
    """The flags given that a sanitizer recipe has no use for (every `sweep run` flag but
    --recipe, --dry-run, --output, --json and -v: the last three are the view's own)."""
    flags: dict[str, object] = {
        "--workload": req.workload, "--mitigation-axis": req.mitigation_axis,
        "--environment-axis": req.environment_axis, "--trials": req.trials,
        "--steps": req.steps, "--ticket": req.ticket, "--baseline-cell": req.baseline_cell,
        "--confound-threshold": req.confound_threshold,
        "--env-passthrough-mode": req.env_passthrough_mode,
        "--stop-after-events": req.stop_after_events, "--max-trials": req.max_trials,
        "--disable-detector": req.disable_detectors, "--mitigations-file": req.mitigation_files,
        "--collect": req.collect, "--strict": req.strict, "--order": req.order,
        "--seed": req.seed, "--resume": req.resume, "--no-snapshot": not req.snapshots,
        "--executor": req.executor, "--nodes": req.nodes, "--gpus-per-node": req.gpus_per_node,
        "--trial-isolation": req.trial_isolation, "--bytecode-cache": req.bytecode_cache,
        "--i-trust-this-directory": req.trust_run_dir,
        "--metrics": view.metrics.addr if view.metrics is not None else None,
    }
    return sorted(k for k, v in flags.items() if v not in (None, "", (), [], False))


def run_sanitizer_request(req: SweepRequest, view: SweepRunView,
                          stream: EventSink | None = None) -> int:
    """Run the recipe's checks; with ``--json`` (``stream``) its events: ``run_started`` and a
    ``run_finished`` whose ``summary.result`` is the run directory, the report and each check's
    verdict (until issue 36 one untyped ``sanitizer_report`` line)."""
    from aorta_tui.collect.sanitizer import (
        exit_code_of,
        load_sanitizer_recipe,
        run_sanitizer_recipe,
    )

    if req.command:
        raise UsageError("a trailing '-- <command>' is not valid for a mode: sanitizer recipe",
                         hint="put the program in sanitizer_plan.source (kind: command, argv)",
                         location=str(req.recipe))
    bad = _set_flags(req, view)
    if bad:
        raise UsageError("these flags are not valid for a mode: sanitizer recipe: "
                         + ", ".join(bad), hint="drop them (only --recipe, --dry-run, --output, "
                         "--json and -v apply)", location=str(req.recipe))
    assert req.recipe is not None  # is_sanitizer_request read it
    recipe = load_sanitizer_recipe(req.recipe)
    run_dir, checks = run_sanitizer_recipe(recipe, req.output, dry_run=view.dry_run)
    report = run_dir / recipe.report_name
    code = int(ExitCode.OK if view.dry_run else exit_code_of(checks))
    if stream is not None:
        result = {"run_dir": str(run_dir), "report": str(report),
                  "checks": [{"sanitizer": c.sanitizer, "verdict": c.verdict, "reason": c.reason}
                             for c in checks]}
        stream.emit(RunStarted(run_dir.name, source="sanitizer", run_dir=str(run_dir),
                               total=len(checks)))
        stream.emit(RunFinished(run_dir.name, status="completed", exit_code=code,
                                summary={"result": result}))
    else:
        for c in checks:
            print(f"{c.sanitizer}: {c.verdict}: {c.reason}")
        print(f"sanitizer report: {report}")
    return code
