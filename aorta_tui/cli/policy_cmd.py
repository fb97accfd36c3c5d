"""`aorta-tui policy ...`: compare scheduling/memory policies, each trial in a fresh process."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from aorta_tui.cli.common import cli_command, count, err, new_app, seconds, seed_number
from aorta_tui.cli.metrics_opts import (
    METRICS_LINGER_OPT,
    METRICS_OPT,
    METRICS_PUBLIC_OPT,
    MetricsRequest,
    metered,
)
from aorta_tui.cli.trust_opts import TRUST_OPT
from aorta_tui.core.numerals import MAX_TRIALS
from aorta_tui.store.trust_guard import guard_run_dir

R = TypeVar("R")

if TYPE_CHECKING:  # the CLI imports the engine only when a command runs
    from aorta_tui.core.events import Event, EventSink
    from aorta_tui.policy.evaluator import PolicySweepOutcome, PolicySweepRequest
    from aorta_tui.policy.gpu_control import ControlBackend
    from aorta_tui.policy.manifest_doc import SweepPlan
    from aorta_tui.policy.presets import Policy
    from aorta_tui.policy.report_doc import PolicyReport

app = new_app(
    "Compare scheduling and memory policies on one hardware-queue workload.\n\n"
    "Every trial is a fresh `aorta-tui queue run` process started with the policy's "
    "environment already set (runtimes read CUDA_DEVICE_MAX_CONNECTIONS, GPU_MAX_HW_QUEUES, "
    "HSA_XNACK ... once, at start-up). Trials are interleaved across policies; the report "
    "gives the median and a 95% bootstrap interval per metric and calls a difference against "
    "`baseline` only when the intervals separate.\n\n"
    "Examples:\n\n"
    "  aorta-tui policy list\n\n"
    "  aorta-tui policy sweep tiny_kernel_stress --policies baseline,cuda_max_connections_1 "
    "--streams 16 --trials 5\n\n"
    "  aorta-tui policy sweep hetero_kernels --policies baseline,mine --policy-file pol.yaml "
    "--streams 8\n\n"
    "  aorta-tui policy report aorta-policy/tiny_kernel_stress-20261129-101500\n\n"
    "  aorta-tui policy resume aorta-policy/tiny_kernel_stress-20261129-101500"
)


@app.command("list")
@cli_command
def list_policies(
    json_mode: bool = typer.Option(False, "--json", help="JSON output."),
    policy_file: Path | None = typer.Option(None, "--policy-file", help="Also list the policies of this YAML/JSON file."),
) -> None:
    """List the built-in policies (and a file's): what each sets and which runtime reads it.

    Example: aorta-tui policy list --json
    """
    from aorta_tui.policy.file import load_policy_file
    from aorta_tui.policy.presets import all_policies

    user = load_policy_file(policy_file) if policy_file else []
    rows = [{**p.to_dict(), "sets": p.summary()} for p in all_policies(user)]
    if json_mode:
        print(json.dumps(rows, indent=2))
        return
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table("policy", "vendor", "kind", "sets", "description")
        for r in rows:
            table.add_row(r["name"], r["vendor"], r["kind"], r["sets"], r["description"])
        Console().print(table)
        return
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        print(f"{r['name']:<{width}}  {r['vendor']:<4}  {r['sets']}")
        print(f"{'':<{width}}        {r['description']}")


@app.command("sweep")
@cli_command
def sweep(
    workload: str = typer.Argument(..., help="A hardware-queue workload (see `aorta-tui queue list`)."),
    policies: str = typer.Option("baseline", "--policies", "-p", help="Comma-separated policy names; baseline is always included."),
    streams: int = typer.Option(8, "--streams", "-s", parser=count(), metavar="N", help="Concurrent streams per trial."),
    trials: int | None = typer.Option(None, "--trials", "-n", parser=count(at_most=MAX_TRIALS), metavar="N", help="Trials per policy, default 5 (at least 4 for a confidence interval; fewer report medians only)."),
    trials_k: int | None = typer.Option(None, "-k", parser=count(at_most=MAX_TRIALS), hidden=True, help="Older spelling of --trials/-n."),
    iterations: int | None = typer.Option(None, "--iterations", "-i", parser=count(), metavar="N", help="Measured iterations per trial (harness default if unset)."),
    warmup: int | None = typer.Option(None, "--warmup", parser=count(at_least=0), metavar="N", help="Warm-up iterations per trial (harness default if unset)."),
    device: str | None = typer.Option(None, "--device", help="cuda, cpu, ... (harness default if unset)."),
    size: str | None = typer.Option(None, "--size", help="Workload size passed to `queue run` (e.g. tiny)."),
    param: list[str] = typer.Option([], "--param", help="Workload parameter KEY=VALUE passed to `queue run` (repeatable)."),
    sync_mode: str | None = typer.Option(None, "--sync-mode", help="per_iteration, end_only or none (passed to `queue run`)."),
    dtype: str | None = typer.Option(None, "--dtype", help="float32, float16 or bfloat16 (passed to `queue run`)."),
    queue_arg: list[str] = typer.Option([], "--queue-arg", help="Any other `queue run` option for every trial (repeatable), e.g. --queue-arg=--timing=cupti."),
    policy_file: Path | None = typer.Option(None, "--policy-file", help="YAML/JSON file of extra policies."),
    seed: int = typer.Option(0, "--seed", parser=seed_number(), metavar="N", help="Seed of the interleaved order and the bootstrap."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Run directory (default aorta-policy/WORKLOAD-TIME)."),
    json_mode: bool = typer.Option(False, "--json", help="One JSON event per line on stdout."),
    allow_gpu_control: bool = typer.Option(False, "--allow-gpu-control", help="Apply clock-level/power-limit knobs (device-wide; restored afterwards). Never on a shared machine."),
    gpu_index: int = typer.Option(0, "--gpu-index", parser=count(at_least=0, at_most=1023), metavar="N", help="Which GPU the clock/power knobs act on."),
    timeout: float | None = typer.Option(None, "--timeout", parser=seconds(), metavar="S", help="Kill a trial after this many seconds, default 900 (a finite number above 0)."),
    timeout_s: float | None = typer.Option(None, "--timeout-s", parser=seconds(), hidden=True, help="Older spelling of --timeout."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when any trial failed."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan (policies, variables, order, GPU-control commands) and exit; writes nothing."),
    gpu_control_backend: str = typer.Option("auto", "--gpu-control-backend", hidden=True, help="auto, nvidia, rocm or fake:PATH (tests)."),
    metrics: str | None = METRICS_OPT,
    metrics_public: bool = METRICS_PUBLIC_OPT,
    metrics_linger: float = METRICS_LINGER_OPT,
) -> None:
    """Run WORKLOAD under each policy, trials interleaved, and write policy.md / policy.json.

    Exit codes: 0 done; 1 trials failed (with --strict); 2 bad input (unknown policy or
    workload, stream count out of range, policy file error); 3 the machine cannot do it (no
    GPU); 130 interrupted (the report covers the finished trials).

    Example: aorta-tui policy sweep tiny_kernel_stress --policies cuda_max_connections_1,cuda_max_connections_32 --streams 16 --trials 5
    """
    from aorta_tui.cli.stream_end import EndedStream, ends_typed
    from aorta_tui.policy.evaluator import PolicySweepRequest

    stream = EndedStream("policy") if json_mode else None
    with ends_typed(stream):  # a refused sweep's --json stream still ends typed
        chosen, run_dir = _policies_and_run_dir(workload, policies, policy_file, output)
        request = PolicySweepRequest(
            workload=workload, policies=chosen, streams=streams, output_dir=run_dir,
            trials=_spelled_once(trials, trials_k, "--trials", "-k", 5), iterations=iterations,
            warmup=warmup, device=device, seed=seed, allow_gpu_control=allow_gpu_control,
            gpu_index=gpu_index, queue_args=tuple(_queue_args(size, sync_mode, dtype, param, queue_arg)),
            timeout_s=_spelled_once(timeout, timeout_s, "--timeout", "--timeout-s", 900.0))
        backend = _gpu_backend(request, gpu_control_backend)
        if dry_run:
            _dry_run(request, backend, json_mode)
            return
        from aorta_tui.policy.evaluator import run_policy_sweep

        go = metered(lambda on_event: run_policy_sweep(request, on_event=on_event,
                                                       gpu_backend=backend),
                     MetricsRequest(metrics, metrics_public, metrics_linger))
        outcome = go((stream or _plain_sink()).emit)
    _finish(outcome, json_mode, strict)


def _policies_and_run_dir(workload: str, policies: str, policy_file: Path | None,
                          output: Path | None) -> tuple[tuple[Policy, ...], Path]:
    """The policies named (aliases said on stderr) and the run directory (its default named)."""
    import time

    from aorta_tui.policy.file import load_policy_file
    from aorta_tui.policy.presets import alias_note, resolve_policies

    user = load_policy_file(policy_file) if policy_file else []
    chosen = resolve_policies(policies.split(","), user)
    for note in filter(None, map(alias_note, policies.split(","))):
        print(f"note: {note}", file=sys.stderr)
    if output is None:
        output = Path("aorta-policy") / f"{workload}-{time.strftime('%Y%m%d-%H%M%S')}"
    return tuple(chosen), output


def _gpu_backend(request: PolicySweepRequest, spec: str) -> ControlBackend | None:
    """The GPU-control backend the policies' knobs need: none unless --allow-gpu-control and a
    policy sets a knob."""
    if not (request.allow_gpu_control
            and any(not p.gpu_control.is_empty() for p in request.policies)):
        return None
    from aorta_tui.policy.gpu_control import backend_from_spec

    return backend_from_spec(spec)


def _dry_run(request: PolicySweepRequest, backend: ControlBackend | None, json_mode: bool) -> None:
    """The plan (policies, variables, order, GPU-control commands): a document, nothing written."""
    from aorta_tui.policy.evaluator import PolicyEvaluator

    plan = PolicyEvaluator(request, gpu_backend=backend).dry_run()
    if json_mode:
        print(json.dumps(plan.to_json(), indent=2))
    else:
        _print_plan(plan)


@app.command("resume")
@cli_command
def resume(
    run_dir: Path = typer.Argument(..., help="An interrupted `policy sweep` output directory."),
    json_mode: bool = typer.Option(False, "--json", help="One JSON event per line on stdout."),
    allow_gpu_control: bool = typer.Option(False, "--allow-gpu-control", help="Required again when the sweep applied clock-level/power-limit knobs."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when any trial failed."),
    gpu_control_backend: str = typer.Option("auto", "--gpu-control-backend", hidden=True, help="auto, nvidia, rocm or fake:PATH (tests)."),
    trust_run_dir: bool = TRUST_OPT,
) -> None:
    """Continue an interrupted sweep: same policies, order and options; finished trials are
    kept, the rest run; then policy.md / policy.json are rewritten.

    Example: aorta-tui policy resume aorta-policy/tiny_kernel_stress-20261129-101500
    """
    from aorta_tui.cli.stream_end import EndedStream, ends_typed
    from aorta_tui.policy.evaluator import resume_policy_sweep

    stream = EndedStream("policy") if json_mode else None
    with ends_typed(stream):  # a refused resume's --json stream still ends typed
        guard_run_dir(run_dir, ["policy", "resume", str(run_dir)], trusted=trust_run_dir)
        backend = None
        if allow_gpu_control:
            from aorta_tui.policy.gpu_control import backend_from_spec

            backend = backend_from_spec(gpu_control_backend)
        outcome = resume_policy_sweep(run_dir, allow_gpu_control=allow_gpu_control,
                                      on_event=(stream or _plain_sink()).emit, gpu_backend=backend)
    _finish(outcome, json_mode, strict)


def _plain_sink() -> EventSink:
    """One readable line per event (``--json`` has cli/stream_end.EndedStream)."""
    from aorta_tui.core.events import CallbackSink

    return CallbackSink(_print_event)


def _finish(outcome: PolicySweepOutcome, json_mode: bool, strict: bool) -> None:
    if not json_mode:
        _print_summary(outcome.report, outcome.run_dir)
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)
    if strict and outcome.report.failed_trials:
        raise typer.Exit(1)


@app.command("report")
@cli_command
def report(
    run_dir: Path = typer.Argument(..., help="A `policy sweep` output directory."),
    json_mode: bool = typer.Option(False, "--json", help="Print policy.json to stdout."),
    trust_run_dir: bool = TRUST_OPT,
) -> None:
    """Recompute and rewrite policy.md / policy.json from a sweep's run directory.

    Example: aorta-tui policy report aorta-policy/tiny_kernel_stress-20261129-101500
    """
    from aorta_tui.policy.report import rerender

    guard_run_dir(run_dir, ["policy", "report", str(run_dir)], trusted=trust_run_dir)
    data, json_path, md_path = rerender(run_dir)
    if json_mode:
        print(json.dumps(data.to_json(), indent=2))
        return
    _print_summary(data, run_dir)


def _spelled_once(value: R | None, older: R | None, name: str, alias: str, default: R) -> R:
    """An option given by its name or by its older hidden spelling (docs/cli.md), not both."""
    from aorta_tui.core.errors import UsageError

    if value is not None and older is not None:
        raise UsageError(f"{name} and {alias} are one option (the second its older spelling)",
                         hint=f"give {name} once")
    return value if value is not None else older if older is not None else default


def _queue_args(size: str | None, sync_mode: str | None, dtype: str | None, params: list[str],
                queue_arg: list[str]) -> list[str]:
    """The `queue run` flags every trial takes: the sweep's own options, then --queue-arg."""
    from aorta_tui.hwqueue.options import check_not_set_by_sweep

    out: list[str] = []
    for flag, value in (("--size", size), ("--sync-mode", sync_mode), ("--dtype", dtype)):
        if value is not None:
            out += [flag, value]
    for pair in params:
        out += ["--param", pair]
    check_not_set_by_sweep(queue_arg, where="--queue-arg")
    return out + list(queue_arg)


def _print_plan(plan: SweepPlan) -> None:
    req = plan.request
    print(f"policy sweep plan: {req.workload}, {req.streams} streams, {req.trials} "
          f"trials per policy, seed {req.seed}, output {req.output_dir}")
    for planned in plan.policies:
        p = planned.policy
        sets = ", ".join(f"{k}={v}" for k, v in p.env.items()) or "(no variables)"
        print(f"  {p.name}: {sets}" + (f" + {' '.join(p.harness_args)}"
                                       if p.harness_args else ""))
        print(f"      queue run: {_config_text(planned.queue_config)}")
        if planned.inherited_removed:
            print("      removed from the inherited environment: "
                  f"{', '.join(planned.inherited_removed)}")
        for note in ([planned.skipped] if planned.skipped else []) + list(planned.notes):
            print(f"      note: {note}")
    print(f"order ({plan.trials_total} trials): {' '.join(plan.order)}")
    example = plan.policies[0].argv
    print(f"each trial runs: {' '.join(example)}")


def _config_text(config: dict[str, Any]) -> str:
    """A trial's queue run in words: the workload, then every field off the harness default."""
    import dataclasses

    from aorta_tui.hwqueue.harness import QueueRunConfig

    defaults = dataclasses.asdict(QueueRunConfig(workload="", streams=0))
    shown = [f"{k}={v}" for k, v in config.items()
             if k not in ("workload", "streams") and v != defaults.get(k)]
    return f"{config['workload']} on {config['streams']} streams" + (f", {', '.join(shown)}" if shown else "")


def _print_event(event: Event) -> None:
    from aorta_tui.core.events import Measurement, RunStarted, RunWarning

    if isinstance(event, RunStarted):
        done = f" ({event.already_done} already done)" if event.already_done else ""
        print(f"policy sweep: {event.total} trials over {', '.join(event.cells)} -> "
              f"{event.run_dir}{done}", flush=True)
    elif isinstance(event, Measurement):
        v = event.values
        shown = ", ".join(f"{name}={v[name]:.4g}" for name in
                          ("throughput", "latency_p50_ms", "wall_s") if v.get(name) is not None)
        print(f"  {event.name}: {shown or 'measured'}", flush=True)
    elif isinstance(event, RunWarning):
        err(f"warning: {event.message}")


def _print_summary(report: PolicyReport, run_dir: Path) -> None:
    ref = report.reference
    print(f"status: {report.status}; {report.failed_trials} failed trial(s)")
    if report.differences:
        print(f"differences against {ref} (95% intervals separate):")
        for d in report.differences:
            change = f"{d.change_pct:+.1f}%" if d.change_pct is not None else ""
            print(f"  {d.policy}: {d.metric} {d.verdict} {change} {d.assessment}".rstrip())
    else:
        print(f"no policy differs from {ref} beyond run-to-run noise")
    for p in report.policies:
        for note in ([p.skipped_reason] if p.skipped_reason else []) + list(p.notes):
            print(f"  note ({p.name}): {note}")
    print(f"report: {Path(run_dir) / 'policy.md'}")
