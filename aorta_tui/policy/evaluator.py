"""Run one workload under several policies, every trial in a fresh process.

Why processes: GPU runtimes read ``CUDA_DEVICE_MAX_CONNECTIONS``, ``GPU_MAX_HW_QUEUES``,
``HSA_XNACK`` and friends once, when the runtime starts. Setting them inside a running process
(as upstream AORTA 0.3.0's policy sweep did) changes nothing, and every policy measures the same.
Here each trial is one queue run in a fresh process (the queue engine's entry point,
``python -m aorta_tui.hwqueue.child``, reading the trial's ``queue-config.json``: the sweep's
options with the policy's ``harness_args``, `queue run` flags parsed by hwqueue/options.py),
started with the policy's environment already in place, and every variable that *any* policy of the sweep sets is removed from the inherited
environment first, so ``baseline`` really runs with the runtime's defaults.

Trials are interleaved: round ``r`` runs every policy once, in an order shuffled with
``seed + r``, so slow drift of the machine (clocks, temperature, other tenants) spreads over all
policies instead of biasing the one that ran last.

Run directory (the source of truth; ``aorta-tui policy report DIR`` re-renders from it)::

    DIR/sweep.json                         the request, the policies, the planned order
                                           (manifest_doc.SweepManifest)
    DIR/journal.jsonl                      every event, one JSON object per line (the lines a
                                           resume trusts fsynced: store/run_store.py)
    DIR/trials/NNN-POLICY-tK/queue-config.json  the queue run the trial is (QueueRunConfig)
    DIR/trials/NNN-POLICY-tK/result.json   the queue harness's result (docs/hwqueue.md)
    DIR/trials/NNN-POLICY-tK/outcome.json  exit status, environment applied, extracted figures
                                           (outcome_doc.TrialOutcome)
    DIR/trials/NNN-POLICY-tK/stdout.txt, stderr.txt
    DIR/policy.json, DIR/policy.md         the comparison (aorta_tui.policy.report)
    DIR/.lock                              held (flock, lock.RunLock) while a process runs
                                           the sweep; names its pid

A trial counts as done when its final ``outcome.json`` and its ``trial_finished`` journal line
are both on disk (in that order), as in every run directory (``RunStore``).

Use from a front end::

    from aorta_tui.policy.evaluator import PolicySweepRequest, run_policy_sweep, resume_policy_sweep
    outcome = run_policy_sweep(request, on_event=callback, cancel=CancelEvent())
    outcome = resume_policy_sweep(run_dir, on_event=callback)   # after an interruption
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import secrets
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from threading import Event as ThreadEvent
from typing import TYPE_CHECKING, Any, NoReturn

from aorta_tui.core.errors import AortaError, EnvironmentProblem, ExitCode, RunDirError, UsageError
from aorta_tui.core.events import (
    CallbackSink,
    Event,
    EventBus,
    Measurement,
    ResultWritten,
    RunFinished,
    RunWarning,
    TrialFinished,
    TrialLaunch,
    TrialStarted,
)
from aorta_tui.core.inputs import (
    INPUT_LIMITS,
    Json,
    decode_utf8,
    open_input,
    parse_json_text,
    read_input_bytes,
)
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.core.secrets import record_secret_hashes
from aorta_tui.policy.comparison import MIN_SAMPLES
from aorta_tui.policy.manifest_doc import (
    OrderEntry,
    PlannedPolicy,
    PolicyRecord,
    RecordedRequest,
    SweepManifest,
    SweepPlan,
)
from aorta_tui.policy.outcome_doc import Figures, ResultStamp, TrialEnd, TrialOutcome
from aorta_tui.policy.presets import BUILTIN_BY_NAME, Policy
from aorta_tui.policy.report import REPORT_FILES
from aorta_tui.policy.report_doc import PolicyReport
from aorta_tui.store.run_store import RunStore, StoreLayout
from aorta_tui.store.write_errors import output_write_error

if TYPE_CHECKING:  # imported when a policy changes the GPU, not on every sweep
    from aorta_tui.hwqueue.harness import QueueRunConfig  # the harness: ~30 ms, a trial's business
    from aorta_tui.hwqueue.result_doc import QueueResult
    from aorta_tui.policy.gpu_control import ControlBackend
from aorta_tui.trial.orphans import mint
from aorta_tui.trial.run_loop import RunOutcome, RunPlan, TrialEngine, run_planned
from aorta_tui.trial.supervisor import CancelEvent, ProcessOutcome, ProcessSpec, run_process

REFERENCE = "baseline"
GPU_CONTROL_SKIPPED = ("gpu control skipped: --allow-gpu-control not given (clock level and "
                       "power limit are device-wide; they are applied only when you opt in)")


@dataclass(frozen=True)
class PolicySweepRequest:
    workload: str
    policies: tuple[Policy, ...]
    streams: int
    output_dir: Path
    trials: int = 5
    iterations: int | None = None
    warmup: int | None = None
    device: str | None = None
    seed: int = 0
    allow_gpu_control: bool = False
    gpu_index: int = 0
    queue_args: tuple[str, ...] = ()  # further `queue run` options shared by every trial
    timeout_s: float = 900.0
    python: str = field(default_factory=lambda: sys.executable)

    def record(self) -> RecordedRequest:
        """The request as sweep.json records it (a resume rebuilds the request from it)."""
        return RecordedRequest(
            workload=self.workload, output_dir=str(self.output_dir),
            policies=tuple(p.name for p in self.policies), streams=self.streams,
            trials=self.trials, iterations=self.iterations, warmup=self.warmup,
            device=self.device, seed=self.seed, allow_gpu_control=self.allow_gpu_control,
            gpu_index=self.gpu_index, queue_args=tuple(self.queue_args), timeout_s=self.timeout_s)

    def to_dict(self) -> dict[str, Json]:
        return self.record().to_json()


TrialCommand = Callable[[PolicySweepRequest, Policy, Path], list[str]]


@dataclass(frozen=True)
class PlannedTrial:
    position: int  # 0-based place in the run order
    policy: str
    trial: int  # 1-based repeat of this policy

    @property
    def dir_name(self) -> str:
        return f"{self.position + 1:03d}-{self.policy}-t{self.trial}"


@dataclass
class PolicySweepOutcome(RunOutcome):
    report: PolicyReport


def with_reference(policies: Sequence[Policy]) -> tuple[tuple[Policy, ...], bool]:
    """Put ``baseline`` first (adding it when missing): every comparison needs it."""
    rest = [p for p in policies if p.name != REFERENCE]
    added = len(rest) == len(policies)
    return (BUILTIN_BY_NAME[REFERENCE], *rest), added


def plan_order(names: Sequence[str], trials: int, seed: int) -> list[PlannedTrial]:
    """Round-robin rounds, each a seeded shuffle of all policies.

    Not ``sweep/plan``'s interleaved order: that one draws every round from one RNG seeded with
    ``seed`` and swaps a round's first cell when it ended the previous round; this one seeds each
    round on its own (``seed * 1_000_003 + round``) and never swaps. Kept so a seed gives the
    order it always gave (``sweep.json`` records it; a resume reads it from there).
    """
    plan: list[PlannedTrial] = []
    for round_index in range(trials):
        order = list(names)
        random.Random(seed * 1_000_003 + round_index).shuffle(order)
        for name in order:
            plan.append(PlannedTrial(len(plan), name, round_index + 1))
    return plan


def trial_environment(base: Mapping[str, str], policy: Policy,
                      policies: Sequence[Policy]) -> tuple[dict[str, str], list[str]]:
    """The complete environment of a trial process and the inherited variables removed.

    Every variable any policy of the sweep sets is removed from ``base`` first, so the
    arms differ only by their own settings.
    """
    controlled = {key for p in policies for key in p.env}
    removed = sorted(k for k in controlled if k in base)
    env = {k: v for k, v in base.items() if k not in controlled}
    env.update(policy.env)
    env["PYTHONUNBUFFERED"] = "1"
    return env, removed


QUEUE_CONFIG_FILE = "queue-config.json"  # the trial's QueueRunConfig, beside its result.json


def trial_queue_doc(request: PolicySweepRequest, policy: Policy) -> dict[str, Json]:
    """``queue-config.json`` of a trial of ``policy``: the document ``hwqueue.child`` reads back
    through :class:`~aorta_tui.hwqueue.point_config.PointConfig`, written by its one serializer."""
    from aorta_tui.hwqueue.point_config import PointConfig

    return PointConfig.of(trial_queue_config(request, policy)).to_json()


def trial_queue_config(request: PolicySweepRequest, policy: Policy) -> QueueRunConfig:
    """The `queue run` a trial of ``policy`` is: the sweep's options, then ``--queue-arg``, then
    the policy's ``harness_args`` (`queue run` flags, parsed by hwqueue/options.py)."""
    from aorta_tui.hwqueue.harness import QueueRunConfig
    from aorta_tui.hwqueue.options import trial_config

    base = QueueRunConfig(workload=request.workload, streams=request.streams, size="auto")
    # the sweep's own options where given; the harness defaults otherwise
    if request.iterations is not None:
        base.iterations = request.iterations
    if request.warmup is not None:
        base.warmup = request.warmup
    if request.device is not None:
        base.device = request.device
    return trial_config(base, ("--queue-arg", request.queue_args),
                        (f"policy {policy.name!r} harness_args", policy.harness_args))


def queue_child_argv(request: PolicySweepRequest, policy: Policy, result_path: Path) -> list[str]:
    """A trial's process: the queue engine's entry point, reading the QueueRunConfig the
    evaluator wrote beside ``result_path`` (never the command line: docs/architecture.md)."""
    del policy  # the config file holds what the policy asks for
    return [request.python, "-m", "aorta_tui.hwqueue.child",
            str(result_path.with_name(QUEUE_CONFIG_FILE)), str(result_path)]


class PolicyEvaluator(TrialEngine["PlannedTrial", "PolicySweepOutcome"]):
    def __init__(self, request: PolicySweepRequest, *,
                 on_event: Callable[[Event], None] | None = None,
                 cancel: ThreadEvent | None = None,
                 gpu_backend: ControlBackend | None = None,
                 base_env: Mapping[str, str] | None = None,
                 trial_command: TrialCommand | None = None) -> None:
        _check_request(request)
        self.trial_command = trial_command or queue_child_argv
        policies, self.reference_added = with_reference(request.policies)
        self.request = dataclasses.replace(request, policies=policies)
        for policy in policies:  # a flag no trial can take is refused before any trial runs
            trial_queue_config(self.request, policy)
        self.cancel = cancel if cancel is not None else CancelEvent()
        self.gpu_backend = gpu_backend
        from aorta_tui.core.bytecode import plan_bytecode

        base = dict(os.environ if base_env is None else base_env)
        # every arm alike: the bytecode cache where the image compiles every import
        # (core/bytecode.py), so no arm pays `import torch` from source
        self.base_env = plan_bytecode("auto", base).apply(base)
        self.user_env = base  # what tool_env is measured against
        self.run_id = f"p-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
        self.bus = EventBus([CallbackSink(on_event)] if on_event else [])
        self.notes: dict[str, list[str]] = {p.name: [] for p in policies}
        self.skipped: dict[str, str] = {}
        self.gpu_plans: dict[str, str] = {}
        self.store: RunStore  # the run directory, opened under its lock by run()
        self.created: Path | None = None  # the directory run() made (a refusal removes it)
        self.resumed = False

    # -- preparation --------------------------------------------------------------------

    def _prepare_gpu_control(self) -> None:
        needing = [p for p in self.request.policies if not p.gpu_control.is_empty()]
        if not needing:
            return
        if not self.request.allow_gpu_control:
            for p in needing:
                if p.has_process_effect():
                    self.notes[p.name].append(GPU_CONTROL_SKIPPED)
                else:
                    self.skipped[p.name] = ("not run: its only knobs are device-wide GPU control "
                                            "and --allow-gpu-control was not given")
            return
        from aorta_tui.policy.gpu_control import GpuControl, backend_from_spec

        if self.gpu_backend is None:
            self.gpu_backend = backend_from_spec("auto")
        for p in needing:
            plan = GpuControl(self.gpu_backend, self.request.gpu_index, p.gpu_control).plan()
            text = "; ".join(plan)
            self.notes[p.name].append(f"gpu control ({self.gpu_backend.name}), around each "
                                      f"trial: {text}")
            self.gpu_plans[p.name] = text

    # -- running ------------------------------------------------------------------------

    def dry_run(self) -> SweepPlan:
        """What ``run`` would do, without running or writing anything (the GPU state is read
        when a GPU-control policy is allowed, to print its plan)."""
        req = self.request
        self._prepare_gpu_control()
        names = [p.name for p in req.policies if p.name not in self.skipped]
        plan = plan_order(names, req.trials, req.seed)
        policies = []
        for p in req.policies:
            _env, removed = trial_environment(self.base_env, p, req.policies)
            argv = self.trial_command(req, p, Path(req.output_dir) / "trials" / "NNN"
                                      / "result.json")
            policies.append(PlannedPolicy(
                policy=p, inherited_removed=tuple(removed), notes=tuple(self.notes[p.name]),
                skipped=self.skipped.get(p.name, ""),
                queue_config=trial_queue_doc(req, p), argv=tuple(argv)))
        return SweepPlan(request=req.record(), reference_added=self.reference_added,
                         policies=tuple(policies), order=tuple(t.dir_name for t in plan),
                         gpu_control_plans=dict(self.gpu_plans))

    def run(self, *, resume: SweepManifest | None = None) -> PolicySweepOutcome:
        """Run the sweep; with ``resume`` (a run dir's ``sweep.json``), run only the trials
        that have no final outcome yet, in the recorded order, into the same directory."""
        run_dir = Path(self.request.output_dir)
        self._prepare_gpu_control()  # reads the GPU state: fails before anything is written
        if resume is None:
            self.created, plan, names = self._start_fresh(run_dir)
        else:
            self.created = None
            self.run_id = resume.run_id or self.run_id
            plan = [PlannedTrial(o.position, o.policy, o.trial) for o in resume.order]
            names = list(dict.fromkeys(t.policy for t in plan))
        self.resumed = resume is not None
        self.store = RunStore(run_dir, POLICY_LAYOUT)
        return run_planned(self.store, self.bus, RunPlan(
            self.run_id, source="policy", trials=plan, trial_id=lambda t: t.dir_name, cells=names,
            resumed=resume is not None, resume_command=f"aorta-tui policy resume {run_dir}"),
            self, cancel=self.cancel)

    def _start_fresh(self, run_dir: Path) -> tuple[Path | None, list[PlannedTrial], list[str]]:
        """Claim the run directory and write its sweep.json (the plan a resume follows)."""
        req = self.request
        created = _claim_run_dir(run_dir)
        names = [p.name for p in req.policies if p.name not in self.skipped]
        plan = plan_order(names, req.trials, req.seed)
        manifest = SweepManifest(
            run_id=self.run_id, created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            request=req.record(), reference=REFERENCE, reference_added=self.reference_added,
            policies=tuple(PolicyRecord(p) for p in req.policies),
            notes={k: tuple(v) for k, v in self.notes.items()}, skipped=dict(self.skipped),
            order=tuple(OrderEntry(t.position, t.policy, t.trial, t.dir_name) for t in plan))
        try:
            with RunDirFS(run_dir) as fs:
                fs.atomic_write_json("sweep.json", manifest.to_json())
        except OSError as exc:  # nothing to resume without it: leave nothing, say why
            _discard_run_dir(run_dir, created)
            raise output_write_error(exc, run_dir / "sweep.json", option="--output") from None
        return created, plan, names

    # -- the run loop's engine (trial/run_loop.py) ----------------------------------------------

    def announce(self) -> None:
        """The warnings known before any trial runs."""
        req = self.request
        if req.trials < MIN_SAMPLES:  # said up front, not discovered in the report
            self._emit(RunWarning(self.run_id, code="too_few_trials", message=(
                f"{req.trials} trial(s) per policy: the report needs {MIN_SAMPLES} for a "
                "confidence interval, so it gives medians and calls no difference")))
        for name, note in self.skipped.items():
            self._emit(RunWarning(self.run_id, message=f"policy {name}: {note}",
                               code="policy_skipped"))
        for name, text in self.gpu_plans.items():
            self._emit(RunWarning(self.run_id, message=f"policy {name}: GPU control plan: "
                               f"{text}", code="gpu_control_plan"))

    def run_trial(self, planned: PlannedTrial) -> str | None:
        by_name = {p.name: p for p in self.request.policies}
        try:
            self._run_one(self.store.path, planned, by_name[planned.policy])
        except _AbortSweep as abort:
            self._abort(abort)
        if self.cancel.is_set():
            return None  # the stop came while this trial ran: it was cut, the run is interrupted
        return f"{planned.policy} trial {planned.trial}"

    def _abort(self, abort: _AbortSweep) -> NoReturn:
        """A trial refused to run (its options, the machine): the sweep ends, exit 2 or 3, and
        a new run leaves nothing behind; a resume keeps the earlier trials."""
        self._emit(RunFinished(self.run_id, status="failed", exit_code=int(abort.error.exit_code),
                               summary={"error": abort.error.message}))
        self.store.close_journal()
        run_dir = self.store.path
        if not self.resumed:
            _discard_run_dir(run_dir, self.created)
        else:  # keep the earlier trials; only the refused one goes
            shutil.rmtree(run_dir / "trials" / abort.trial_dir, ignore_errors=True)
        raise abort.error from None

    def finish(self, status: str, exit_code: int) -> PolicySweepOutcome:
        from aorta_tui.policy.report import build_report, write_reports

        run_dir = self.store.path
        report = build_report(run_dir, status=status)
        json_path, md_path = write_reports(run_dir, report)
        self._emit(ResultWritten(self.run_id, path=str(json_path), what="policy.json"))
        self._emit(ResultWritten(self.run_id, path=str(md_path), what="policy.md"))
        called = [f"{c.policy}:{c.metric}:{c.verdict}" for c in report.differences]
        self._emit(RunFinished(self.run_id, status=status, exit_code=exit_code,
                               summary={"run_dir": str(run_dir), "differences": called,
                                        "failed_trials": report.failed_trials}))
        return PolicySweepOutcome(run_dir, status, exit_code, report)

    def write_failed(self, problem: AortaError) -> None:
        return None  # the journal is on the same full disk: the error says it all

    def _run_one(self, run_dir: Path, planned: PlannedTrial, policy: Policy) -> None:
        req = self.request
        # what an interrupted run left of this trial is removed: it starts afresh
        trial_dir = self.store.fresh_trial_dir(planned.dir_name)
        result_path = trial_dir / "result.json"
        env, removed = trial_environment(self.base_env, policy, req.policies)
        self.store.fs.atomic_write_json(trial_dir / QUEUE_CONFIG_FILE, trial_queue_doc(req, policy))
        argv = self.trial_command(req, policy, result_path)
        trial_id = planned.dir_name
        # its identity is in the journal before the process exists (trial/orphans.py)
        ident = mint(self.run_id)
        self._emit(TrialLaunch(self.run_id, trial_id=trial_id, cell=policy.name,
                               trial=planned.trial, identity=list(ident.digests)))
        self.store.check_journal()
        env.update(ident.env)
        # keyed hashes of its secrets' values, so a bundle recognises them (core/secrets.py)
        record_secret_hashes(run_dir, env)
        # no GPU memory sampling: it polls a vendor tool (nvidia-smi, rocm-smi) once a second,
        # extra work on the device whose scheduling the trial measures
        spec = ProcessSpec(argv=argv, env=env, cwd=Path.cwd(),
                           stdout_path=trial_dir / "stdout.txt",
                           stderr_path=trial_dir / "stderr.txt", timeout_s=req.timeout_s,
                           sample_gpu=False, log_root=run_dir)
        outcome, gpu_note = self._run_process(spec, planned, policy)
        record = _trial_record(planned, policy, argv, removed, outcome, trial_dir, gpu_note,
                               _tool_env(self.user_env, policy, env, removed))
        # outcome.json, before its journal line
        self.store.write_result(planned.dir_name, record.to_json())
        self._report(planned, policy, record, outcome, trial_dir)

    def _run_process(self, spec: ProcessSpec, planned: PlannedTrial, policy: Policy,
                     ) -> tuple[ProcessOutcome, str]:
        """The trial's process, under the policy's GPU settings when it changes them (restored
        as it ends), and the note saying what was applied and restored ("" when nothing)."""
        req = self.request

        def started(pid: int) -> None:
            self._emit(TrialStarted(self.run_id, trial_id=planned.dir_name, cell=policy.name,
                                    trial=planned.trial, pid=pid))

        if not policy.gpu_control.is_empty() and req.allow_gpu_control:
            from aorta_tui.policy.gpu_control import GpuControl

            # _prepare_gpu_control chose the backend for every policy that changes the GPU
            assert self.gpu_backend is not None
            with GpuControl(self.gpu_backend, req.gpu_index, policy.gpu_control) as control:
                outcome = run_process(spec, cancel=self.cancel, on_start=started)
            return outcome, f"applied {policy.gpu_control.to_dict()}; restored {control.previous}"
        return run_process(spec, cancel=self.cancel, on_start=started), ""

    def _report(self, planned: PlannedTrial, policy: Policy, record: TrialOutcome,
                outcome: ProcessOutcome, trial_dir: Path) -> None:
        """What a recorded trial tells: the sweep stops on a trial the harness refused (its
        options are wrong for every trial to come); else its end, its figures or a warning."""
        trial_id = planned.dir_name
        if record.status == "usage_error" or record.status == "environment_error":
            cls = UsageError if record.status == "usage_error" else EnvironmentProblem
            message, fix = _split_fix(record.reason)
            raise _AbortSweep(cls(
                f"the trial process of policy {policy.name!r} refused to run: {message}",
                hint=(fix or "fix the sweep's options (workload, streams, device, iterations) "
                      "or the policy's harness_args") + "; nothing was kept from this sweep"),
                planned.dir_name)
        verdict = "pass" if record.status == "ok" else "error"
        self._emit(TrialFinished(self.run_id, trial_id=trial_id, cell=policy.name,
                                 trial=planned.trial, verdict=verdict,
                                 exit_code=outcome.exit_code, signal=outcome.signal,
                                 wall_s=outcome.wall_s, reason=record.reason,
                                 trial_dir=str(trial_dir)))
        if record.status == "ok":
            self._emit(Measurement(self.run_id, source="policy",
                                   name=f"{policy.name}/trial{planned.trial}",
                                   values=dict(record.figures.summary),
                                   reasons=dict(record.figures.unavailable)))
        elif record.status != "cancelled":
            self._emit(RunWarning(self.run_id, code="trial_failed",
                               message=f"{trial_id}: {record.reason}"))

    def _emit(self, event: Event) -> None:
        self.bus.emit(event)


class _AbortSweep(Exception):
    def __init__(self, error: AortaError, trial_dir: str = "") -> None:
        self.error = error
        self.trial_dir = trial_dir


def run_policy_sweep(request: PolicySweepRequest, *, on_event: Callable[[Event], None] | None = None,
                     cancel: ThreadEvent | None = None, gpu_backend: ControlBackend | None = None,
                     base_env: Mapping[str, str] | None = None,
                     trial_command: TrialCommand | None = None) -> PolicySweepOutcome:
    """Run the sweep and write its reports; see the module docstring.

    ``on_event`` receives every event (from this thread); ``cancel`` stops the sweep after the
    running trial is ended (a :class:`aorta_tui.trial.supervisor.CancelEvent` wakes it at once);
    ``gpu_backend`` is the GPU-control backend (default: detected, only with
    ``allow_gpu_control``); ``base_env`` replaces ``os.environ`` as the inherited environment;
    ``trial_command`` replaces ``queue_child_argv`` (a child that writes a queue result, as
    ``hwqueue/result_doc.py`` reads it: anything else is a failed trial).
    """
    return PolicyEvaluator(request, on_event=on_event, cancel=cancel, gpu_backend=gpu_backend,
                           base_env=base_env, trial_command=trial_command).run()


# -- helpers -----------------------------------------------------------------------------


def _check_request(req: PolicySweepRequest) -> None:
    if req.trials < 1:
        raise UsageError(f"--trials must be at least 1, got {req.trials}",
                         hint="use 5 or more for confidence intervals that mean something")
    if req.streams < 1:
        raise UsageError(f"--streams must be at least 1, got {req.streams}")
    if req.iterations is not None and req.iterations < 1:
        raise UsageError(f"--iterations must be at least 1, got {req.iterations}")
    if not (isinstance(req.timeout_s, (int, float)) and math.isfinite(req.timeout_s)
            and req.timeout_s > 0):
        raise UsageError(f"--timeout-s must be a finite number of seconds above 0, got "
                         f"{req.timeout_s!r}")
    if not req.policies:
        raise UsageError("no policies given", hint="e.g. --policies baseline,cuda_max_connections_1")


def _claim_run_dir(run_dir: Path) -> Path | None:
    """Create the run dir, returning the outermost directory this made (the default
    ``aorta-policy/`` on a first sweep), or accept an existing empty one (None)."""
    if run_dir.exists():
        if not run_dir.is_dir():
            raise UsageError(f"--output {run_dir} exists and is not a directory",
                             hint="choose another --output")
        if (run_dir / "sweep.json").exists() or any(run_dir.iterdir()):
            raise UsageError(f"--output {run_dir} already holds files",
                             hint="choose a new --output (re-render an old sweep with "
                                  "`aorta-tui policy report DIR`)")
        return None
    outermost = run_dir
    while not outermost.parent.exists() and outermost.parent != outermost:
        outermost = outermost.parent
    try:
        run_dir.mkdir(parents=True, exist_ok=True)  # under sudo the tool runs as the user: theirs
    except OSError as exc:
        raise output_write_error(exc, run_dir, option="--output") from None
    return outermost


def _busy(run_dir: Path, holder: str) -> AortaError:
    return RunDirError(f"another process is running the sweep in {run_dir} ({holder})",
                       hint="wait for it, or stop it first")


def _final_outcome(data: dict[str, Any], trial_id: str) -> dict[str, Any] | None:
    """A trial's ``outcome.json`` when it is final (a cancelled trial runs again).

    Why a refused file is not final: an outcome its reader refuses (a field of the wrong type,
    an ok trial without figures) is no more trusted than a torn one, so the resume runs the
    trial again rather than keep a result the report could only call failed.
    """
    try:
        outcome = TrialOutcome.from_dict(data, where=trial_id)
    except UsageError:
        return None
    return data if outcome.is_final else None


# trials/NNN-POLICY-tK/outcome.json; the lock's refusal in this sweep's words
POLICY_LAYOUT = StoreLayout(result_file="outcome.json", sweep_ids=False, accept=_final_outcome,
                            refusal=_busy, files=REPORT_FILES)


def resume_policy_sweep(run_dir: str | Path, *, allow_gpu_control: bool = False,
                        on_event: Callable[[Event], None] | None = None,
                        cancel: ThreadEvent | None = None, gpu_backend: ControlBackend | None = None,
                        base_env: Mapping[str, str] | None = None,
                        trial_command: TrialCommand | None = None) -> PolicySweepOutcome:
    """Continue an interrupted sweep: same policies, order and options (from ``sweep.json``);
    trials with a final outcome are kept, the others run (a half-run one afresh).

    GPU control is machine-changing, so it must be allowed again explicitly.
    """
    from aorta_tui.policy.report import load_manifest

    run_dir = Path(run_dir)
    manifest = load_manifest(run_dir)  # every field's type checked: a damaged one, exit 2
    raw = manifest.request
    if raw.allow_gpu_control and not allow_gpu_control:
        raise UsageError("this sweep applied GPU control (clock level / power limit)",
                         hint="pass --allow-gpu-control again to resume it")
    if raw.workload is None or raw.streams is None or raw.trials is None:
        # the report reads such a manifest (null where a field is missing); a resume cannot
        missing = [k for k, v in (("workload", raw.workload), ("streams", raw.streams),
                                  ("trials", raw.trials)) if v is None]
        raise RunDirError(f"{run_dir / 'sweep.json'} is incomplete (no request."
                          f"{', request.'.join(missing)})",
                          hint="it was not written by `aorta-tui policy sweep`")
    request = PolicySweepRequest(
        workload=raw.workload, policies=tuple(p.policy for p in manifest.policies),
        streams=raw.streams, output_dir=run_dir, trials=raw.trials, iterations=raw.iterations,
        warmup=raw.warmup, device=raw.device, seed=raw.seed,
        allow_gpu_control=raw.allow_gpu_control, gpu_index=raw.gpu_index,
        queue_args=raw.queue_args, timeout_s=raw.timeout_s)
    evaluator = PolicyEvaluator(request, on_event=on_event, cancel=cancel,
                                gpu_backend=gpu_backend, base_env=base_env,
                                trial_command=trial_command)
    return evaluator.run(resume=manifest)


def _discard_run_dir(run_dir: Path, created: Path | None) -> None:
    """Remove what this sweep wrote: the directories it made (a failed first sweep leaves no
    empty ``aorta-policy/``), or the contents of the empty one it was given."""
    if created is not None:
        shutil.rmtree(run_dir, ignore_errors=True)
        parent = run_dir.parent
        # rmdir, never rmtree: another sweep may have put its own directory there meanwhile
        while created in (parent, *parent.parents) and parent != parent.parent:
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent
        return
    for child in run_dir.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def _tail_error(path: Path, limit: int = 600) -> str:
    """The child's error paragraph (`error: ...` and its `fix:`), else its last lines."""
    try:  # the child's own file: a FIFO or a link it left must not hang or mislead the sweep
        fh = open_input(path, what="trial log", follow_symlinks=False)
    except AortaError:
        return ""
    assert fh is not None  # missing_ok is off: a missing file raised
    with fh:
        size = os.fstat(fh.fileno()).st_size
        fh.seek(max(0, size - (256 << 10)))  # the error paragraph is near the end
        lines = fh.read().decode("utf-8", "replace").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("error:"):
            text = " ".join(x.strip() for x in lines[i:i + 4])
            return text[len("error:"):].strip()[:limit]
    tail = " | ".join(x.strip() for x in lines[-3:] if x.strip())
    return tail[-limit:]


def _split_fix(reason: str) -> tuple[str, str | None]:
    message, sep, fix = reason.partition(" fix: ")
    return (message.strip(), fix.strip()) if sep else (reason, None)


def _tool_env(user: Mapping[str, str], policy: Policy, env: Mapping[str, str],
              left_out: Sequence[str]) -> dict[str, str | None]:
    """What the tool set beyond the user's environment and the policy's variables (the
    bytecode cache, PYTHONUNBUFFERED, the trial's identity token - masked, as every secret-named
    value), as a recipe sweep's result.json has it; the other arms' variables are left out:
    ``env_removed`` has them."""
    from aorta_tui.core.secrets import tool_env

    asked = {**user, **policy.env}
    return {k: v for k, v in tool_env(asked, env).items() if k not in left_out}


def _trial_record(planned: PlannedTrial, policy: Policy, argv: list[str], removed: list[str],
                  outcome: ProcessOutcome, trial_dir: Path, gpu_note: str,
                  tool_env: dict[str, str | None]) -> TrialOutcome:
    return TrialOutcome(
        policy=policy.name, trial=planned.trial, position=planned.position, argv=tuple(argv),
        env_set=dict(policy.env), env_removed=tuple(removed), exit_code=outcome.exit_code,
        signal=outcome.signal, timed_out=outcome.timed_out, exec_error=outcome.exec_error,
        wall_s=round(outcome.wall_s, 4), peak_rss_kb=outcome.peak_rss_kb,
        peak_rss_reason=outcome.peak_rss_reason, gpu_control=gpu_note,
        end=_trial_end(outcome, trial_dir), tool_env=tool_env)


def _trial_end(outcome: ProcessOutcome, trial_dir: Path) -> TrialEnd:
    """How the trial's process ended, in the order the checks have always run."""
    stderr = trial_dir / "stderr.txt"
    if outcome.cancelled:
        return TrialEnd("cancelled", "cancelled before it finished")
    if outcome.exec_error:
        return TrialEnd("failed", f"could not start: {outcome.exec_error}")
    if outcome.timed_out:
        return TrialEnd("timed_out", "timed out; the process group was killed")
    if outcome.exit_code == int(ExitCode.USAGE):
        return TrialEnd("usage_error", _tail_error(stderr) or "exit code 2")
    if outcome.exit_code == int(ExitCode.ENVIRONMENT):
        return TrialEnd("environment_error", _tail_error(stderr) or "exit code 3")
    if outcome.exit_code != 0:
        how = (f"signal {outcome.signal}" if outcome.signal is not None
               else f"exit code {outcome.exit_code}")
        return TrialEnd("failed", f"{how}: {_tail_error(stderr)}".rstrip(": "))
    return _read_result(trial_dir / "result.json")


def _read_result(path: Path) -> TrialEnd:
    """The ending of a trial whose process exited 0, from the ``result.json`` it wrote.

    The file is read by the queue result's own reader (``hwqueue/result_doc.py``: kind,
    version, every field ``queue compare`` reads). Why a refusal is a failed trial: a result
    that reader refuses (a ``summary`` alone, a figure that is text, another document's kind)
    is not a measurement; counting it ok put unchecked figures into the comparison, and raising
    would end the whole sweep over one trial's file. So it is ``failed``, its reason the
    reader's located message (file, field path). A missing file stays the failure it was.
    """
    from aorta_tui.hwqueue.result import summary_reason

    result = _load_trial_result(path)
    if isinstance(result, str):
        return TrialEnd("failed", result)
    # the fields an ok trial always had: figures as floats, each missing one with its reason
    values = {k: None if v is None else float(v) for k, v in result.summary.values.items()}
    unavailable = {key: summary_reason(result.unavailable, key)
                   or "the harness reported no value and no reason"
                   for key, value in values.items() if value is None}
    figures = Figures(summary=values, units=dict(result.summary.units),
                      better=dict(result.summary.better), unavailable=unavailable,
                      platform=dict(result.section("platform")), emulated=result.emulated)
    # what --stream-priority did in this trial (asked, applied or why not), from the harness
    stamp = ResultStamp(result.schema_version, result.sections.get("stream_priority"))
    return TrialEnd("ok", "", figures, stamp)


def _load_trial_result(path: Path) -> QueueResult | str:
    """The typed result at ``path``, or why there is none (a failed trial's reason)."""
    from aorta_tui.hwqueue.result_doc import read_run_document

    try:  # the child's own file: a link it left is refused, never followed
        raw = read_input_bytes(path, what="queue result", limit=INPUT_LIMITS["queue result"],
                               follow_symlinks=False)
    except UsageError as exc:
        if not (path.exists() or path.is_symlink()):
            return "exit code 0 but no result.json was written"
        return f"result.json unreadable: {exc.message}"
    where = str(path)
    try:
        data = parse_json_text(decode_utf8(raw, where=where, what="queue result"), where=where,
                               what="queue result")
    except UsageError as exc:
        return f"result.json unreadable: {exc.message}"
    try:
        return read_run_document(data, where)
    except UsageError as exc:
        located = f"{exc.location}: {exc.message}" if exc.location else exc.message
        return f"result.json is not a valid queue result: {located}"
