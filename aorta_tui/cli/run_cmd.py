"""`aorta-tui run --workload NAME`: one workload, no matrix.

It builds a one-cell triage recipe in memory (the given mitigations on this host) and runs it
through the sweep engine, so a single run gets the same worker processes, classifier, run
directory and reports as a sweep. Everything the user can get wrong (the workload, a config
key, the world size, a mitigation, torch without distributed support) is checked before a
process is started.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from aorta_tui.cli.common import cli_command, count
from aorta_tui.core.numerals import MAX_STEPS, MAX_TRIALS
from aorta_tui.store.naming import DEFAULT_OUTPUT

if TYPE_CHECKING:
    from aorta_tui.cli.stream_end import EndedStream
    from aorta_tui.core.trial_contract import TrialResult
    from aorta_tui.registry.registry import Registry


@cli_command
def run_workload(
    workload: str = typer.Option(..., "--workload", "-w", help="Registered workload name (see `aorta-tui sweep list-workloads`)."),
    trials: int = typer.Option(1, "--trials", "-n", parser=count(at_most=MAX_TRIALS), metavar="N", help="Trials (each in a fresh worker process)."),
    steps: int = typer.Option(5, "--steps", parser=count(at_most=MAX_STEPS), metavar="N", help="Measured steps per trial."),
    config: list[str] = typer.Option([], "--config", "-c", help="Workload config KEY=VALUE (repeatable; a.b=v for nested keys)."),
    mitigations: str = typer.Option("none", "--mitigations", "-m", help="Comma-separated mitigations applied together."),
    output: Path = typer.Option(Path(DEFAULT_OUTPUT), "--output", "-o", help="Runs go to OUTPUT/<ticket>/<run-id>/."),
    json_mode: bool = typer.Option(False, "--json", help="One JSON event per line on stdout (the journal's format)."),
    no_snapshot: bool = typer.Option(False, "--no-snapshot", help="Skip the environment snapshot."),
) -> None:
    """Run one registered workload without a matrix (a one-cell sweep).

    Examples:

      aorta-tui run --workload training --steps 5 --config parallelism=fsdp

      aorta-tui run --workload race --trials 3 --config mode=fsdp --config world_size=2

      aorta-tui run --workload inference --trials 2 --config perturb_logits=0.001

      aorta-tui run --workload llm_determinism --mitigations deterministic --json

    --config takes KEY=VALUE (nested keys with dots, values parsed as YAML) and may repeat.
    Exit codes: 0 every trial passed; 1 a trial failed or errored, or the trials disagree;
    2 usage error; 3 environment error; 130 interrupted.
    """
    from aorta_tui.cli.stream_end import EndedStream, ends_typed

    stream = EndedStream("sweep") if json_mode else None
    with ends_typed(stream):  # a refused run's --json stream still ends typed
        code = _run(workload, trials, steps, config, mitigations, output, stream,
                    not no_snapshot)
    raise typer.Exit(code)


def _run(workload: str, trials: int, steps: int, config: list[str], mitigations: str,
         output: Path, stream: EndedStream | None, snapshots: bool) -> int:
    import yaml

    from aorta_tui.cli.sinks import pick_sink
    from aorta_tui.core.events import EventBus
    from aorta_tui.recipe import load_recipe_text
    from aorta_tui.registry.registry import Registry
    from aorta_tui.sweep.drive import run_until_done, sweep_services
    from aorta_tui.sweep.orchestrator import Sweep, SweepOptions

    registry = Registry()
    raw_config, mits = check_request(workload, config, mitigations, registry)
    doc: dict[str, Any] = {
        "schema_version": 1, "mode": "triage", "ticket": f"run-{workload}",
        "workload": workload, "trials": trials, "steps": steps,
        "cells": [{"name": "+".join(mits), "mitigations": mits, "environment": "local"}],
    }
    if raw_config:
        doc["workload_config"] = raw_config
    recipe = load_recipe_text(yaml.safe_dump(doc, sort_keys=False), source="<aorta-tui run>",
                              registry=registry)
    bus = EventBus()
    sweep = Sweep(recipe, registry, SweepOptions(output=output, strict=True, snapshots=snapshots,
                                                   services=sweep_services()),
                  bus)
    bus.add(stream if stream is not None else pick_sink(False))
    outcome = run_until_done(sweep, bus)
    if stream is None:
        _print_failures(outcome.records, outcome.cells)
    return outcome.exit_code


def check_request(workload: str, config: list[str], mitigations: str,
                  registry: Registry) -> tuple[dict[str, Any], list[str]]:
    """Everything that can be wrong before a process starts; returns (config, mitigations)."""
    from aorta_tui.core.errors import UsageError
    from aorta_tui.registry.registry import load_workload
    from aorta_tui.registry.workload import parse_config_overrides, validate_config

    cls = load_workload(workload)
    raw = parse_config_overrides(config)
    resolved = validate_config(cls.config_schema, raw)
    mits = [m.strip() for m in mitigations.split(",") if m.strip()] or ["none"]
    for m in mits:
        registry.mitigation(m)
    if cls.launch.mode == "torchrun":
        world = resolved.get("world_size", cls.launch.min_world_size)
        if world < cls.launch.min_world_size:
            raise UsageError(
                f"workload {workload!r} needs at least {cls.launch.min_world_size} ranks, "
                f"--config world_size={world} asks for fewer",
                hint=f"use --config world_size={cls.launch.min_world_size}",
            )
        _require_torch_distributed(workload)
    return raw, mits


def _require_torch_distributed(workload: str) -> None:
    from aorta_tui.core.errors import EnvironmentProblem
    from aorta_tui.core.requires import require_torch

    require_torch(f"workload {workload!r}")
    import torch.distributed

    if not torch.distributed.is_available():
        raise EnvironmentProblem(
            f"workload {workload!r} runs under torchrun, and this torch has no "
            "torch.distributed support",
            hint="install a torch build with distributed support (the PyPI wheels have it)",
        )


def _print_failures(records: list[TrialResult], cells: list[dict[str, Any]]) -> None:
    """The workload's own failure messages, which the sweep summary only counts: from the
    records the sweep just aggregated (each counted trial once, by id; no result file read)."""
    for record in records:
        wres = record.workload_result or {}
        failures = wres.get("failures")
        for f in (failures if isinstance(failures, list) else [])[:5]:
            if isinstance(f, dict):
                print(f"{record.trial_id}: {f.get('code')}: {f.get('message')}")
    for c in cells:
        for f in c.get("cross_trial_failures") or []:
            print(f"{c.get('cell')}: {f.get('code')}: {f.get('message')}")
