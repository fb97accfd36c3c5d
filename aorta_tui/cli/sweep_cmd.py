"""`aorta-tui sweep ...` and `aorta-tui --batch`: the sweep engine, headless."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

import typer

from aorta_tui.cli.common import cli_command, count, new_app, number, seed_number
from aorta_tui.cli.metrics_opts import (
    METRICS_LINGER_OPT,
    METRICS_OPT,
    METRICS_PUBLIC_OPT,
    MetricsRequest,
)
from aorta_tui.cli.trust_opts import TRUST_OPT
from aorta_tui.core.numerals import MAX_STEPS, MAX_TRIALS, SLURM_MAX_GPUS_PER_NODE, SLURM_MAX_NODES
from aorta_tui.store.naming import DEFAULT_OUTPUT

app = new_app(
    "Recipe-driven mitigation sweeps: cells x trials, each trial in a fresh worker process.\n\n"
    "\b\nExamples:\n"
    "  aorta-tui sweep run --recipe recipes/quickstart.yaml\n"
    "  aorta-tui sweep run --recipe probe.yaml --dry-run -- bash launch.sh\n"
    "  aorta-tui sweep run --resume aorta-out/TICKET/20261129-101500-ab12\n"
    "  aorta-tui sweep run --workload gpu_smoke --mitigation-axis none,tf32_off --trials 3"
)

_RUN_HELP = (
    "Run a sweep (the same engine as `aorta-tui --batch RECIPE`).\n\n"
    "Exit codes: 0 done; 1 failures found with --strict; 2 usage or recipe error; "
    "3 environment error (no docker, no GPU); 130 interrupted (resume with --resume RUN_DIR)."
)


@app.command("run", help=_RUN_HELP, context_settings={"allow_extra_args": True})
@cli_command
def run(
    ctx: typer.Context,
    recipe: Path | None = typer.Option(None, "--recipe", "-r", help="Recipe YAML file."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan (cells, trials, env vars, order) and exit."),
    resume: Path | None = typer.Option(None, "--resume", help="Continue RUN_DIR: skip finished trials, re-run an interrupted one."),
    trust_run_dir: bool = TRUST_OPT,
    output: Path = typer.Option(Path(DEFAULT_OUTPUT), "--output", "-o", help="Runs go to OUTPUT/<ticket>/<run-id>/."),
    json_mode: bool = typer.Option(False, "--json", help="One JSON event per line on stdout (the journal's format)."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when any trial fails or errors."),
    order: str | None = typer.Option(None, "--order", help="interleaved (default), sequential or random."),
    seed: int | None = typer.Option(None, "--seed", parser=seed_number(), metavar="N", help="Seed of the trial order (default: the recipe's, else 0)."),
    ticket: str | None = typer.Option(None, "--ticket", help="Override the recipe's ticket."),
    mitigations_file: list[Path] = typer.Option([], "--mitigations-file", help="Sidecar JSON of extra mitigations (repeatable)."),
    workload: str | None = typer.Option(None, "--workload", help="Flag mode: the workload to sweep (no recipe)."),
    mitigation_axis: str | None = typer.Option(None, "--mitigation-axis", help="Flag mode: comma-separated mitigations."),
    environment_axis: str | None = typer.Option(None, "--environment-axis", help="Flag mode: comma-separated environments."),
    trials: int | None = typer.Option(None, "--trials", "-n", parser=count(at_most=MAX_TRIALS), metavar="N", help="Flag mode: trials per cell."),
    steps: int | None = typer.Option(None, "--steps", parser=count(at_most=MAX_STEPS), metavar="N", help="Flag mode: steps per trial."),
    no_snapshot: bool = typer.Option(False, "--no-snapshot", help="Skip the environment snapshots."),
    stop_after_events: int | None = typer.Option(None, "--stop-after-events", parser=count(at_most=MAX_TRIALS), metavar="K", help="Stop each cell once K trials have the event verdict (default fail); overlays the recipe's stop_after (needs --max-trials unless the recipe gives the cap)."),
    max_trials: int | None = typer.Option(None, "--max-trials", parser=count(at_most=MAX_TRIALS), metavar="N", help="Hard cap of trials per cell when stop-after is active; overlays stop_after.max_trials."),
    disable_detector: list[str] = typer.Option([], "--disable-detector", metavar="TIER[:ID]", help="Silence a detector or a whole tier (repeatable; upstream AORTA's ids too); added to the recipe's disable_detectors."),
    env_passthrough_mode: str | None = typer.Option(None, "--env-passthrough-mode", help="Probe runs: inherit, or file (also writes probe.env and exports AORTA_ENV_FILE); overrides the recipe."),
    collect: str = typer.Option("", "--collect", help="Comma-separated upstream collectors (rocprof, proton, layer_numerics, ...), replacing the recipe's and cells': each trial runs them where their tools exist and records 'not available: <reason>' where not."),
    baseline_cell: str | None = typer.Option(None, "--baseline-cell", help="Flag mode: the baseline cell of the speed confound (with --recipe: the recipe's confound)."),
    confound_threshold: float | None = typer.Option(None, "--confound-threshold", parser=number(above=0.0, at_most=1000.0), metavar="R", help="Flag mode: step-time ratio to the baseline above which a cell is flagged (default 1.15)."),
    executor: str | None = typer.Option(None, "--executor", help="Where trials run: local (processes here, the default) or slurm (a batched job array; the recipe's executor: block gives partition, account, gres; docs/slurm.md)."),
    nodes: int | None = typer.Option(None, "--nodes", parser=count(at_least=0, at_most=SLURM_MAX_NODES), metavar="N", help="Slurm: spread each torchrun trial over N nodes (srun torchrun; overrides executor.nodes; docs/slurm.md)."),
    gpus_per_node: int | None = typer.Option(None, "--gpus-per-node", parser=count(at_least=0, at_most=SLURM_MAX_GPUS_PER_NODE), metavar="K", help="Slurm: K GPUs (and K torchrun ranks) per node of each trial (overrides executor.gpus_per_node)."),
    trial_isolation: str | None = typer.Option(None, "--trial-isolation", help="process (a process of its own per trial, the default: forked from a zygote started for that trial alone, prepared ahead in batches, so imports run in parallel between trials), exec (a freshly exec'd interpreter per trial), warm (trials forked from a zygote that imported torch once; runtime variables still apply, import-time ones are refused: docs/recipes.md) or in_process; overrides the recipe."),
    bytecode_cache: str | None = typer.Option(None, "--bytecode-cache", help="auto (the default: when the image keeps no bytecode, e.g. PYTHONDONTWRITEBYTECODE=1 with a uv-built torch, the tool's children get a persistent cache under ~/.cache/aorta-tui/pycache), on, or off (the image's settings exactly); overrides the recipe's bytecode_cache. Each trial's result lists what it set (tool_env)."),
    metrics: str | None = METRICS_OPT,
    metrics_public: bool = METRICS_PUBLIC_OPT,
    metrics_linger: float = METRICS_LINGER_OPT,
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, help="-v: a line per trial on stderr while the matrix runs; -vv: also the engine's debug log."),
    secret_values_fd: int | None = typer.Option(None, "--secret-values-fd", parser=count(at_least=0, at_most=2**31 - 1), hidden=True, help="Internal (aorta-tui agent): an inherited pipe with secret values the sidecars mask."),
) -> None:
    from aorta_tui.cli.sweep_flow import run_sweep_command
    from aorta_tui.cli.sweep_view import SweepRunView
    from aorta_tui.sweep.way_in import SweepRequest

    request = SweepRequest(
        recipe=recipe, command=list(ctx.args), resume=resume, output=output, trust_run_dir=trust_run_dir,
        strict=strict, order=order, seed=seed, ticket=ticket,
        mitigation_files=list(mitigations_file), workload=workload, mitigation_axis=mitigation_axis,
        environment_axis=environment_axis, trials=trials, steps=steps, snapshots=not no_snapshot,
        stop_after_events=stop_after_events, max_trials=max_trials,
        disable_detectors=list(disable_detector), env_passthrough_mode=env_passthrough_mode,
        collect=[c.strip() for c in collect.split(",") if c.strip()], baseline_cell=baseline_cell,
        confound_threshold=confound_threshold, trial_isolation=trial_isolation, bytecode_cache=bytecode_cache,
        executor=executor, nodes=nodes, gpus_per_node=gpus_per_node,
        secret_values_fd=secret_values_fd,
    )
    # how the run is shown: the command line's alone, beside the engine's request
    view = SweepRunView(dry_run=dry_run, json_mode=json_mode, verbose=verbose,
                        metrics=MetricsRequest(metrics, metrics_public, metrics_linger))
    raise typer.Exit(run_sweep_command(request, view))


class _MitigationRow(TypedDict):
    """One mitigation as `sweep list-mitigations` prints it (and --json writes it)."""

    name: str
    vendor: str
    env: dict[str, str]
    switches: list[str]
    description: str
    source: str


@app.command("list-mitigations")
@cli_command
def list_mitigations(
    json_mode: bool = typer.Option(False, "--json", help="JSON output."),
    mitigations_file: list[Path] = typer.Option([], "--mitigations-file", help="Include a sidecar JSON file."),
) -> None:
    """List every mitigation: the variables it sets and the in-process switches it applies."""
    from aorta_tui.registry.registry import Registry

    reg = Registry(mitigations_file)
    rows: list[_MitigationRow] = [
        {"name": m.name, "vendor": m.vendor, "env": dict(m.env), "switches": list(m.switches),
         "description": m.description, "source": m.source}
        for m in sorted(reg.mitigations.values(), key=lambda m: m.name)
    ]
    if json_mode:
        print(json.dumps(rows, indent=2))
        return
    for r in rows:
        env = " ".join(f"{k}={v}" for k, v in r["env"].items()) or "(none)"
        sw = f"  +{','.join(r['switches'])}" if r["switches"] else ""
        print(f"{r['name']:36} {r['vendor']:5} {env}{sw}")


@app.command("list-environments")
@cli_command
def list_environments(
    json_mode: bool = typer.Option(False, "--json", help="JSON output."),
    mitigations_file: list[Path] = typer.Option([], "--mitigations-file", help="Include a sidecar JSON file (its environments)."),
) -> None:
    """List the named environments (recipes may also give {docker: IMAGE, env: {...}} inline)."""
    from aorta_tui.registry.registry import Registry

    reg = Registry(mitigations_file)
    rows = [{"name": e.name, "docker": e.docker, "env": dict(e.env), "description": e.description,
             "source": e.source} for e in reg.environments.values()]
    if json_mode:
        print(json.dumps(rows, indent=2))
        return
    for r in rows:
        print(f"{r['name']:12} {r['description']}")


@app.command("list-workloads")
@cli_command
def list_workloads(json_mode: bool = typer.Option(False, "--json", help="JSON output.")) -> None:
    """List registered workloads (the aorta_tui.workloads entry-point group)."""
    from aorta_tui.registry.registry import load_workload, workload_entry_points

    rows = []
    for name, ep in sorted(workload_entry_points().items()):
        try:
            cls = load_workload(name)
            rows.append({"name": name, "description": cls.description, "launch": cls.launch.mode,
                         "min_world_size": cls.launch.min_world_size, "entry_point": ep.value})
        except Exception as exc:
            rows.append({"name": name, "error": str(exc), "entry_point": ep.value})
    if json_mode:
        print(json.dumps(rows, indent=2))
        return
    for r in rows:
        print(f"{r['name']:16} {r.get('launch', '?'):8} {r.get('description') or r.get('error')}")


@app.command("list-patterns")
@cli_command
def list_patterns(json_mode: bool = typer.Option(False, "--json", help="JSON output.")) -> None:
    """List the built-in detectors' patterns (tier 3 kernel log, tier 4 trial logs) with a sample."""
    from aorta_tui.classify import BUILTIN_PATTERNS

    rows = [p.to_dict() for p in BUILTIN_PATTERNS]
    if json_mode:
        print(json.dumps(rows, indent=2))
        return
    for r in rows:
        print(f"{r['id']} [tier {r['tier']}, {r['severity']}] {r['description']}\n"
              f"  regex:  {r['regex']}\n  sample: {r['sample']}")

