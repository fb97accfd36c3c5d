"""The sweep orchestrator: plan -> worker processes -> journal -> events -> report.

One ``Sweep`` runs one run directory. Front ends (``--batch``, ``sweep run``, ``aorta-tui
run``, the TUI through a detached ``sweep run``) differ only in the sinks they attach to the
event bus; the journal is always the first sink, so whatever a display shows is already on
disk.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shlex
import shutil
import stat
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from aorta_tui import __version__
from aorta_tui.core import spawn_gate
from aorta_tui.core.aggregate import aggregate
from aorta_tui.core.errors import AortaError, EnvironmentProblem, ExitCode, RunDirError, UsageError
from aorta_tui.core.events import (
    CellAggregated,
    EventBus,
    ResultWritten,
    RunFinished,
    RunWarning,
    TrialFinished,
    TrialLaunch,
    TrialStarted,
)
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.core.secrets import record_secret_hashes
from aorta_tui.core.services import NO_SERVICES, SweepServices
from aorta_tui.core.trial_contract import (
    TRIAL_SPEC_FILE,
    TrialResult,
    WorkerSpec,
    workload_rank_files,
    workload_result_filename,
)
from aorta_tui.core.worker_result import WorkerResult, read_worker_result
from aorta_tui.registry.registry import Registry
from aorta_tui.store.naming import DEFAULT_OUTPUT, RUN_META
from aorta_tui.store.plan_doc import PLAN_FILE, read_plan_or_none
from aorta_tui.store.run_create import create_run_dir, discard_new_run, staged_run_id
from aorta_tui.store.run_meta import RunMeta, read_run_meta, write_run_meta
from aorta_tui.store.run_store import RunStore
from aorta_tui.store.write_errors import describe_free_space
from aorta_tui.sweep.plan import CellPlan, Plan, TrialSpec, build_plan
from aorta_tui.trial.run_loop import RunOutcome, RunPlan, TakeOver, TrialEngine, run_planned
from aorta_tui.trial.supervisor import CancelEvent, ProcessSpec

if TYPE_CHECKING:
    from aorta_tui.classify import Classification, KernelEvent, LogScan, PatternRule
    from aorta_tui.classify.dmesg import KernelLog
    from aorta_tui.classify.model import Detection
    from aorta_tui.core.bytecode import BytecodePlan
    from aorta_tui.executor.host import ExecutorTrial
    from aorta_tui.recipe.model import CustomPattern, Recipe
    from aorta_tui.registry.workload import Workload
    from aorta_tui.trial.prepared import PreparedPool
    from aorta_tui.trial.supervisor import ProcessOutcome
    from aorta_tui.trial.warm import WarmPool


@dataclass
class SweepOptions:
    output: Path = Path(DEFAULT_OUTPUT)
    resume: Path | None = None
    order: str | None = None
    seed: int | None = None
    strict: bool = False
    snapshots: bool = True
    ticket: str | None = None
    steps: int | None = None
    # tracing and snapshot hashing, from the layers above core (core/services.py)
    services: SweepServices = NO_SERVICES


@dataclass
class SweepOutcome(RunOutcome):
    cells: list[dict[str, Any]] = field(default_factory=list)
    failing_trials: list[str] = field(default_factory=list)
    records: list[TrialResult] = field(default_factory=list)  # every trial that counts, by id


class Sweep(TrialEngine[TrialSpec, SweepOutcome]):
    """A recipe's sweep: the recipe sweep's engine on the shared run loop (trial/run_loop.py)."""

    def __init__(self, recipe: Recipe, registry: Registry, options: SweepOptions, bus: EventBus) -> None:
        self.recipe = recipe
        self.registry = registry
        self.options = options
        self.bus = bus
        self.plan: Plan = build_plan(recipe, registry, order=options.order, seed=options.seed)
        self.cancel: CancelEvent = CancelEvent()  # wakes the running worker at once
        self.workload_cls: type[Workload] | None = None
        self._trace_summary: dict[str, Any] | None = None
        self._trace_calibrated = False
        # what the trials' identity tokens are bound to (trial/orphans.py): the id the run was
        # created with, which run.json keeps when its directory is renamed
        self._identity_key: str = ""
        self._refused_before_trials = False  # executor.begin refused: no trial of this run ran
        self._run_id = ""  # the run directory's name, once run() has it
        self._session = 1  # this session's number (attempts): a resume's is one more
        self._kernel_log: KernelLog | None = None  # the tier-3 detector's reader while the trials run
        self._zygotes = contextlib.ExitStack()  # the session's zygote pools (prepare)
        self._stopped = False  # a trial was stopped: the run ends as interrupted
        self._ran: dict[str, int] = {}  # trials per cell that count, for stop_after
        self._events: dict[str, int] = {}  # of those, the ones with stop_after's verdict
        self._store: RunStore  # the run directory, opened under its lock by run()
        self._captures: list[Any] = []  # snapshot captures of this session (trial timelines)
        # The result of every trial that counts: read once at a resume, then each one written
        # in this session; the aggregate and the report take these (no second read of the files).
        self._records: dict[str, TrialResult] = {}
        self._warm: WarmPool | PreparedPool | None = None  # the session's zygotes: warm's shared ones or the default's own (trial/prepared.py)
        from aorta_tui.executor import executor_for

        self.executor = executor_for(recipe)  # where trials run: local processes or Slurm jobs

    # -- preparation -----------------------------------------------------------------------

    def check_runnable(self, *, dry_run: bool = False) -> list[str]:
        """Problems the user can fix before anything is written.

        Returns notes for a dry run: there, a workload that is not installed is reported
        rather than refused (upstream resolves workload names at execution time too).
        """
        notes: list[str] = []
        r = self.recipe
        notes += _emulated_cells(self.plan, self.registry, dry_run)  # docs/compat.md
        if r.mode == "probe" and not r.command and dry_run:
            notes.append("no command given: a real run needs one after `--`")
        elif r.mode == "probe" and not r.command:
            raise UsageError(
                f"{r.source_path or 'the recipe'} is a probe recipe, and no command was given",
                hint="put the command after `--`, e.g. aorta-tui --batch probe.yaml -- bash launch.sh",
            )
        if r.mode == "triage" and not self._check_triage(notes, dry_run):
            return notes
        self._check_docker_policy_trace(notes, dry_run)
        notes += self._check_collectors(dry_run)
        notes += self.executor.check(self, dry_run=dry_run)  # sbatch, partition, shared run dir
        return notes

    def _check_triage(self, notes: list[str], dry_run: bool) -> bool:
        """The triage workload: installed, its config, torch, trial isolation. False when a
        dry run found it not installed (nothing more is worth checking then)."""
        from aorta_tui.registry.registry import load_workload

        r = self.recipe
        assert r.workload is not None  # validation requires it of a triage recipe
        try:
            self.workload_cls = load_workload(r.workload)
        except AortaError as exc:
            if not dry_run:
                raise
            notes.append(f"workload {r.workload!r} is not available here ({exc.message}); "
                         "a real run would stop with this error")
            return False
        from aorta_tui.recipe import RecipeValidationError
        from aorta_tui.sweep.workload_check import workload_issues

        issues, _ = workload_issues(r)
        if issues:
            raise RecipeValidationError(issues, source=str(r.source_path or r.source_label))
        self._check_world_sizes()
        cls = self._workload
        if cls.needs_torch or cls.launch.mode == "torchrun":
            # Said at plan time, not as every trial failing with a traceback (and a hint
            # blaming the device): the README says torch is optional (issue 27 item 18).
            from aorta_tui.core.requires import require_torch

            try:
                require_torch(f"workload {r.workload!r}")
            except EnvironmentProblem as exc:
                if not dry_run:
                    raise
                notes.append(f"{exc.message}; a real run would stop with this error")
        if r.trial_isolation == "warm":  # trial/warm.py: what a forked trial cannot honour
            from aorta_tui.trial.warm import check_warm

            check_warm(r, self.plan, self.workload_cls)
        if r.trial_isolation == "in_process" and not cls.launch.in_process_safe:
            raise UsageError(
                f"workload {r.workload!r} does not declare itself safe to run in process",
                hint="use trial_isolation: process (the default)",
                location=_where(r, "trial_isolation"),
            )
        return True

    @property
    def _workload(self) -> type[Workload]:
        """The triage recipe's workload class, loaded by check_runnable (a probe has none)."""
        cls = self.workload_cls
        assert cls is not None, "the workload class is read before check_runnable loaded it"
        return cls

    def _check_world_sizes(self) -> None:
        """A torchrun workload's world_size, per cell, is at least its minimum."""
        from aorta_tui.registry.workload import validate_config

        r = self.recipe
        launch = self._workload.launch
        for cell in self.plan.cells:  # the merged per-cell config, as the worker will see it
            config = validate_config(self._workload.config_schema, cell.workload_config)
            world = int(config.get("world_size", launch.min_world_size) or launch.min_world_size)
            if launch.mode == "torchrun" and world < launch.min_world_size:
                raise UsageError(
                    f"cell {cell.name!r}: workload {r.workload!r} needs at least "
                    f"{launch.min_world_size} ranks, world_size {world} asks for fewer",
                    hint=f"set workload_config: {{world_size: {launch.min_world_size}}}",
                    location=_where(r, f"cells[{self.plan.cells.index(cell)}]"),
                )

    def _check_docker_policy_trace(self, notes: list[str], dry_run: bool) -> None:
        """Docker for container cells, policy_axis (not run by sweeps), tracing for probes."""
        r = self.recipe
        if any(c.docker for c in self.plan.cells):
            try:
                _require_docker()
            except EnvironmentProblem as exc:
                if not dry_run:
                    raise
                notes.append(exc.message)
        if r.policy_axis and dry_run:
            notes.append("policy_axis is not run by sweeps yet: a real run refuses it "
                         "(compare policies with `aorta-tui policy sweep`)")
        elif r.policy_axis:
            # Accepted by the loader for forward compatibility; silently ignoring an axis of
            # the matrix would mislead, so refuse it until sweeps run policies.
            raise UsageError(
                "policy_axis is not run by sweeps yet",
                hint="compare policies with `aorta-tui policy sweep WORKLOAD --policies "
                + ",".join(r.policy_axis) + "`, or remove policy_axis",
                location=_where(r, "policy_axis"),
            )
        if r.trace is not None and r.trace.probes:
            try:
                self.options.services.require_tracing()
            except AortaError as exc:
                if not dry_run:
                    raise
                notes.append(f"trace: {exc.message}")

    def _check_collectors(self, dry_run: bool) -> list[str]:
        """rocprof / proton asked for but not installed: exit 3 before anything runs."""
        from aorta_tui.collect.collectors import cell_collect, missing_tools

        names = [n for c in self.plan.cells for n in cell_collect(self.recipe, c.name)]
        missing = missing_tools(names)
        if not missing or dry_run:
            return [f"collect: {n} not available: {why}" for n, why in missing]
        raise EnvironmentProblem(
            "collect: " + "; ".join(f"{n} cannot run here: {why}" for n, why in missing),
            hint="install it, or run without it: remove it from collect: (or pass --collect "
                 "with the collectors to keep); nothing was run",
            location=_where(self.recipe, "collect"))

    # -- the run ---------------------------------------------------------------------------

    def run(self) -> SweepOutcome:
        self.check_runnable()
        run_dir = self._open_run_dir()
        self._store = RunStore(run_dir)  # layout, lock, journal, resume set, results
        self._run_id = run_dir.name
        plan = RunPlan(
            run_dir.name, source="sweep", trials=self.plan.trials, trial_id=_trial_id,
            cells=[c.name for c in self.plan.cells], resumed=self.options.resume is not None,
            resume_command=f"aorta-tui sweep run --resume {run_dir}", recipe_hash=self._hash,
            identity_key=self._identity_key, progress=False,
        )
        try:
            # the shared loop (trial/run_loop.py): the lock, the resume set, the journal,
            # RunStarted, the trials in order, a full disk as a located exit 3
            return run_planned(self._store, self.bus, plan, self, cancel=self.cancel)
        except AortaError as exc:
            if self._refused_before_trials and self.options.resume is None \
                    and discard_new_run(run_dir):
                # the executor's checks that need the run's own jobs (Slurm's account, its
                # shared run directory) failed before any trial ran: leave no empty run behind
                exc.hint = f"{exc.hint + '; ' if exc.hint else ''}the new run directory {run_dir} was removed"
            raise

    # -- the engine's own steps of the run loop (trial/run_loop.py TrialEngine) ---------------

    def take_over(self, previous: TakeOver) -> None:
        """A resume, under the lock: a trial whose Slurm job still runs (or ended unrecorded)
        is adopted; every other unfinished trial starts from an empty directory, what an
        earlier attempt left kept aside as evidence and never counted."""
        run_dir = self._store.path
        adopted = self.executor.adopt(run_dir, set(previous.unfinished))
        for tid in sorted(previous.unfinished - adopted):
            self._store.retire_trial(tid)
        self._session = previous.sessions + 1
        self._records = {tid: rec for tid in sorted(previous.state.completed)
                         if (rec := self._store.read_trial(tid)) is not None}

    @contextlib.contextmanager
    def prepare(self, pending: Sequence[TrialSpec]) -> Iterator[None]:
        """The zygotes start first (warm mode's shared ones, or the default's first batch of
        trials prepared ahead), so their imports, the longest wait of a run, overlap the
        journal's set-up, the snapshots and the executor's."""
        from aorta_tui.trial.prepared import prepared_pool
        from aorta_tui.trial.warm import warm_pool

        pool = warm_pool if self.recipe.trial_isolation == "warm" else prepared_pool
        with self._zygotes:
            self._warm = self._zygotes.enter_context(pool(self, self._store.path, list(pending)))
            yield

    def announce(self) -> None:
        bytecode_note = self.bytecode.note()
        if bytecode_note:  # once per run: the image compiles every import (core/bytecode.py)
            self.bus.emit(RunWarning(self._run_id, message=f"bytecode: {bytecode_note}",
                                     code="bytecode"))

    @contextlib.contextmanager
    def running(self, pending: Sequence[TrialSpec]) -> Iterator[None]:
        """Around the trials: the environment snapshots (taken while the trials run), the
        kernel log, the executor's session (Slurm: one batched sbatch)."""
        from aorta_tui.sweep.snapshots import cancel_captures

        captures = self._start_captures()
        try:
            with self._trial_machinery(list(pending)):
                yield
            self._say_import_cost(self._run_id, list(pending))
            self._finish_captures(captures)
            captures = []
        finally:
            if captures:
                cancel_captures(captures)

    def should_run(self, trial: TrialSpec) -> bool:
        """``stop_after``: a cell stops once it has its events or its most trials."""
        stop = self.recipe.stop_after
        return stop is None or (self._events.get(trial.cell, 0) < stop.events
                                and self._ran.get(trial.cell, 0) < stop.max_trials)

    def run_trial(self, trial: TrialSpec) -> str | None:
        kernel_log = self._kernel_log
        assert kernel_log is not None  # opened by run() for the trials
        verdict = self._run_one(self._store.path, self._run_id, trial, self._session, kernel_log)
        if verdict is None:
            self._stopped = True
            return None
        self._count(trial.cell, verdict)
        return f"{trial.trial_id} {verdict}"

    def finish(self, status: str, exit_code: int) -> SweepOutcome:
        self._zygotes.close()  # idle from here: their memory goes back before the report
        self._warm = None
        return self._finish(self._store.path, self._run_id, status)

    def keyboard_interrupt(self) -> None:
        # no report: the driver (sweep/drive.py) turns Ctrl-C into a cancel, so an exception
        # here is a stop it could not handle; the run stays resumable from its journal
        return None

    def write_failed(self, problem: AortaError) -> None:
        return None  # the journal is on the same full disk: the error says it all

    def _count(self, cell: str, verdict: str) -> None:
        """A trial that counts for ``stop_after`` (each once, a resumed run's too)."""
        self._ran[cell] = self._ran.get(cell, 0) + 1
        stop = self.recipe.stop_after
        if stop is not None and verdict == stop.event_verdict:
            self._events[cell] = self._events.get(cell, 0) + 1

    def _start_captures(self) -> list[Any]:
        if not self.options.snapshots:
            return []
        from aorta_tui.sweep.snapshots import start_captures

        self._captures = start_captures(
            self._store.fs, self.plan.environments, self.base_env(),
            session=self._session, include_torch=self.recipe.mode == "triage",
            docker={c.environment: c.docker for c in self.plan.cells},
        )
        return self._captures

    def _finish_captures(self, captures: list[Any]) -> None:
        if not captures:
            return
        from aorta_tui.sweep.snapshots import finish_captures

        for w in finish_captures(self._store.fs, captures):
            self.bus.emit(RunWarning(self._run_id, message=w, code="snapshot"))

    @contextlib.contextmanager
    def _trial_machinery(self, pending: list[TrialSpec]) -> Iterator[None]:
        from aorta_tui.classify.dmesg import KernelLog

        with KernelLog.open() as kernel_log:
            try:
                self.executor.begin(self, self._store.path, pending, self._session)
            except AortaError:
                self._refused_before_trials = True  # no trial of this session has started
                raise
            self._kernel_log = kernel_log
            if kernel_log.unavailable:
                self.bus.emit(RunWarning(
                    self._run_id, code="tier3_unavailable",
                    message=f"tier-3 kernel log detector off: {kernel_log.unavailable}"))
            for rec in self._records.values():  # a resumed run counts what it already has
                self._count(rec.cell, rec.verdict)
            completed = False
            try:
                yield
                completed = not (self._stopped or self.cancel.is_set())
            finally:
                self.executor.end(interrupted=not completed)  # scancel what is left

    def _open_run_dir(self) -> Path:
        """A new run directory, or the one to resume once its recipe hash is checked."""
        from aorta_tui.recipe import dump_resolved, recipe_hash

        self._hash = recipe_hash(self.recipe)
        if self.options.resume is not None:
            run_dir = Path(self.options.resume)
            meta = read_run_meta(run_dir)  # a recipe_hash that is no hash: refused there
            # a run made before run.json kept its id: its directory's name, as it was created
            self._identity_key = meta.run_id or run_dir.name
            if meta.recipe_hash is None:
                # Damage, not a changed recipe: saying "the recipe changed (hash None then)"
                # would send the user looking for an edit that never happened.
                raise RunDirError(
                    f"{run_dir / RUN_META}: recipe_hash is missing, so this run cannot be "
                    "checked against its recipe (run.json is damaged)",
                    hint="start a new run with the recipe; the trials already done stay in "
                    f"{run_dir}/trials as evidence",
                )
            if meta.recipe_hash != self._hash:
                raise RunDirError(
                    f"the recipe changed since {run_dir} was started "
                    f"(hash {meta.recipe_hash} then, {self._hash} now)",
                    hint=f"resume with the recipe it was started with ({run_dir}/recipe.resolved.yaml "
                    "is used when you pass only --resume), or start a new run",
                )
            return run_dir
        ticket = self.options.ticket or self.recipe.ticket or "untitled"

        def populate(run_dir: Path) -> None:
            # Written into the directory before it gets its name (create_run_dir): a kill
            # in between leaves a hidden .creating directory, never a run without run.json.
            self._identity_key = staged_run_id(run_dir)
            with RunDirFS(run_dir) as fs:
                fs.atomic_write_text("recipe.resolved.yaml", dump_resolved(self.recipe))
                fs.atomic_write_json(PLAN_FILE, self.plan.to_dict())
            write_run_meta(run_dir, RunMeta(
                aorta_tui_version=__version__, run_id=self._identity_key, recipe_hash=self._hash,
                recipe_source=str(self.recipe.source_path or ""), mode=self.recipe.mode,
                command=tuple(self.recipe.command or ()), created_at=time.time(),
                argv=tuple(sys.argv)))

        return create_run_dir(Path(self.options.output), ticket, populate)

    def _launch_identity(self, run_dir: Path, run_id: str, spec: TrialSpec, session: int,
                         pspec: ProcessSpec) -> ProcessSpec:
        """The trial's process spec with its identity token, once the journal names its
        digests (issue 27 item 1): no process of the run exists before its journal line.

        Local trials only: a Slurm job's processes are settled through Slurm (the executor's
        ``adopt``), never by a /proc scan here."""
        if self.executor.kind != "local":
            return pspec
        from aorta_tui.trial.orphans import mint

        zygote = getattr(getattr(pspec.launcher, "zygote", None), "token", None)
        ident = mint(self._identity_key, zygote_token=zygote)
        self.bus.emit(TrialLaunch(run_id, trial_id=spec.trial_id, cell=spec.cell, trial=spec.trial,
                                  attempt=session, identity=list(ident.digests)))
        self._store.check_journal()  # not in the journal: the process must not start
        return dataclasses.replace(pspec, env={**pspec.env, **ident.env})

    @property
    def _trial_ids(self) -> set[str]:
        return {t.trial_id for t in self.plan.trials}

    def base_env(self) -> dict[str, str]:
        """The environment every child starts from: this process's, with the bytecode cache
        (core/bytecode.py) where the image would compile every import in every child."""
        return self.bytecode.apply(os.environ)

    @functools.cached_property
    def bytecode(self) -> BytecodePlan:
        from aorta_tui.core.bytecode import BytecodePlan, plan_bytecode

        mode = self.recipe.bytecode_cache
        kind = self.recipe.executor.kind
        if kind != "local" and mode == "auto":
            # another machine's image is not the one inspected here
            return BytecodePlan(mode, False, f"not inspected: trials run under the {kind} executor")
        return plan_bytecode(mode)

    def _say_import_cost(self, run_id: str, pending: list[TrialSpec]) -> None:
        from aorta_tui.core.bytecode import import_cost_note

        ms = [p["ms"] for t in pending if (r := self._records.get(t.trial_id)) is not None
              for p in (r.timeline or {}).get("phases") or [] if p.get("name") == "torch_imported"]
        note = import_cost_note(self.bytecode, ms)
        if note:
            self.bus.emit(RunWarning(run_id, message=f"bytecode: {note}", code="bytecode_cost"))

    def _tool_env(self, cell: CellPlan, env: dict[str, str]) -> dict[str, str | None]:
        """What the tool set in a trial's environment beyond this process's and the recipe's
        variables (None: removed), masked like the overlay."""
        from aorta_tui.core.secrets import tool_env

        return tool_env({**os.environ, **cell.env}, env)

    def _run_one(self, run_dir: Path, run_id: str, spec: TrialSpec, session: int,
                 kernel_log: KernelLog) -> str | None:
        cell, trial_dir, env, argv, pspec = self.prepare_trial(run_dir, spec)
        r = self.recipe
        announced = False

        def on_start(pid: int | None) -> None:
            nonlocal announced
            announced = True
            self.bus.emit(TrialStarted(run_id, trial_id=spec.trial_id, cell=spec.cell, trial=spec.trial,
                                       attempt=session, pid=pid))

        cursor = kernel_log.mark()
        outcome, pspec, log_scan = self._execute_trial(run_dir, run_id, spec, session, cell,
                                                       trial_dir, env, pspec, on_start)
        if not announced:  # the command never started (exec failure): the journal still says so
            self.bus.emit(TrialStarted(run_id, trial_id=spec.trial_id, cell=spec.cell, trial=spec.trial,
                                       attempt=session))
        if outcome.cancelled:
            return None  # no result: a resume runs this trial again
        _require_own_dir(trial_dir, spec.trial_id, run_dir)
        if outcome.log_error:
            _refuse_cut_logs(outcome.log_error, spec.trial_id, trial_dir, run_dir)
        kevents = kernel_log.events_since(cursor)
        worker = _read_workload_results(self._store.fs, trial_dir) if r.mode == "triage" else None
        trial_timeline = self._timeline(outcome, None if worker is None else worker.timeline,
                                        pspec.stdout_path)
        wres = _result_section(worker)
        result = self._classify(outcome, pspec, wres, log_scan, kevents, kernel_log.unavailable)
        steps, source = self._step_times(worker, pspec.stdout_path, outcome.wall_s, cell)
        record = {
            "schema_version": 1,
            "trial_id": spec.trial_id,
            "cell": spec.cell,
            "trial": spec.trial,
            "order": spec.order,
            "session": session,
            "verdict": result.verdict,
            "reason": result.reason,
            "detections": [_detection_dict(d) for d in result.detections],
            "process": outcome.to_dict(),
            "argv": argv,
            "env_overlay": _masked(cell.env),  # never a token in result.json (core/secrets.py)
            "tool_env": self._tool_env(cell, pspec.env),
            "mitigations": list(cell.mitigations),
            "environment": cell.environment,
            "step_times_s": steps,
            "step_time_source": source,
            "workload_result": wres,
            "trace": self._trace_summary,
            "timeline": trial_timeline,
        }
        self._finish_record(record, log_scan, cell, argv, env, trial_dir, result.verdict)
        # Typed once: what is kept in memory (for the aggregate) is exactly what the file says.
        typed = TrialResult.from_record(record, where=str(self._store.result_path(spec.trial_id)))
        self._store.write_result(spec.trial_id, typed)
        self.bus.emit(TrialFinished.of(run_id, typed, trial_dir=str(trial_dir), exit_code=outcome.exit_code,
                                       signal=outcome.signal, wall_s=outcome.wall_s))
        self._records[spec.trial_id] = typed  # counts once its journal line is in (_run_trials_with)
        return result.verdict

    def _classify(self, outcome: ProcessOutcome, pspec: ProcessSpec,
                  wres: dict[str, Any] | None, log_scan: LogScan | None,
                  kevents: Sequence[KernelEvent], kernel_unavailable: str | None,
                  ) -> Classification:
        """The trial's verdict: every tier over its outcome, logs, kernel log and results."""
        from aorta_tui.classify import classify

        r = self.recipe
        disabled = set(r.disable_detectors or ())
        return classify(
            outcome, stdout_path=pspec.stdout_path, stderr_path=pspec.stderr_path,
            custom_rules=_pattern_rules(r, outcome), disabled=disabled, kernel_events=kevents,
            kernel_unavailable=kernel_unavailable, workload_result=wres, log_scan=log_scan,
            placement=self.executor.placement(outcome),  # a Slurm job's state, the node's kernel log
            open_log=self._open_trial_log,  # through the run's file layer (no link, no FIFO)
        )

    def _execute_trial(self, run_dir: Path, run_id: str, spec: TrialSpec, session: int,
                       cell: CellPlan, trial_dir: Path, env: dict[str, str], pspec: ProcessSpec,
                       on_start: Callable[[int | None], None],
                       ) -> tuple[ProcessOutcome, ProcessSpec, LogScan | None]:
        """Run the trial (in this process, or as a traced, possibly forked, process);
        returns its outcome, the ProcessSpec it ran with and the log scan (None in process)."""
        from aorta_tui.classify import LogScan

        r = self.recipe
        log_scan: LogScan | None = None
        if r.mode == "triage" and r.trial_isolation == "in_process":
            from aorta_tui.trial.inprocess import run_in_process

            wspec = WorkerSpec.from_json(trial_dir / TRIAL_SPEC_FILE).to_dict()
            on_start(os.getpid())
            outcome = run_in_process(wspec, {**cell.env, **{k: v for k, v in env.items() if k.startswith("AORTA_")}},
                                     trial_dir, self._store.fs)
            return outcome, pspec, log_scan
        with self._trial_trace(run_id, trial_dir) as trace_env:
            if trace_env:  # the CUPTI collector, for GPU start times of the trial's launches
                pspec = dataclasses.replace(pspec, env={**pspec.env, **trace_env})
            if self._warm is not None:  # forked from its zygote (trial/warm.py, trial/prepared.py)
                launcher = self._warm.launcher_for(spec.trial_id, cell.environment, pspec.env)
                if launcher is not None:
                    pspec = dataclasses.replace(pspec, launcher=launcher)
            pspec = self._launch_identity(run_dir, run_id, spec, session, pspec)
            # tiers 4-5 over the whole output as it passes (the logs keep head + tail)
            log_scan = LogScan(_pattern_rules(r, _NOT_ENDED), r.disable_detectors or ())
            pspec = dataclasses.replace(pspec, log_scan=log_scan)
            outcome = self.executor.run(spec, pspec, cancel=self.cancel, on_start=on_start)
            for note in self._warm.take_notes() if self._warm is not None else ():
                # once per run and reason: a trial exec'd instead of forked (trial/prepared.py)
                self.bus.emit(RunWarning(run_id, message=f"trial start: {note}", code="prepared"))
        return outcome, pspec, log_scan

    def _finish_record(self, record: dict[str, Any], log_scan: LogScan | None, cell: CellPlan,
                       argv: list[str], env: dict[str, str], trial_dir: Path,
                       verdict: str) -> None:
        """Add the log scan's summary, the collectors' reports and the kept files to a
        trial's record."""
        from aorta_tui.collect.retention import finish_trial_files

        r = self.recipe
        if log_scan is not None and log_scan.used:  # how much was scanned, how much is kept
            record["log_scan"] = log_scan.summary()
        if self._collect(cell):  # what each collector did, or "not available: <reason>"
            from aorta_tui.collect.collectors import finish_trial

            record["collectors"] = finish_trial(self._collect(cell), argv, env, trial_dir, mode=r.mode,
                                               fs=self._store.fs)
        record.update(finish_trial_files(r, trial_dir, env, verdict))  # collect_paths, retain

    def prepare_trial(self, run_dir: Path, spec: ExecutorTrial
                      ) -> tuple[CellPlan, Path, dict[str, str], list[str], ProcessSpec]:
        """The trial's directory, environment, argv and ProcessSpec (executors call it too:
        the Slurm executor prepares every pending trial before its batched submission)."""
        from aorta_tui.trial.hang import HangPolicy
        from aorta_tui.trial.supervisor import ProcessSpec

        cell = self.plan.cell(spec.cell)
        self._store.make_trial_dir(spec.trial_id)  # no link followed on the way
        trial_dir = run_dir / "trials" / spec.trial_id  # as the executor spells the run (absolute for Slurm)
        env = self._trial_env(cell, spec, trial_dir)
        # keyed hashes of its secrets' values, so a bundle recognises them (core/secrets.py)
        record_secret_hashes(run_dir, env)
        wspec = self._worker_spec(cell, spec, trial_dir)
        if wspec is not None:  # what the trial worker runs, on disk before its argv names it
            wspec.write(self._store.fs, trial_dir / TRIAL_SPEC_FILE)
        argv = self._trial_argv(cell, trial_dir, env)
        r = self.recipe
        hang = None
        if not {"hang", "tier2", "tier2:hang"} & set(r.disable_detectors or ()):
            hang = HangPolicy(window_s=float(r.hang_window_sec), grace_s=float(r.hang_grace_period_at_start),
                              disabled=frozenset(r.disable_detectors or ()))
        pspec = ProcessSpec(
            argv=argv, env=env, cwd=Path.cwd(),
            stdout_path=trial_dir / "stdout.log", stderr_path=trial_dir / "stderr.log",
            timeout_s=float(r.timeout_per_trial) if r.timeout_per_trial else None, hang=hang,
            log_root=run_dir,
        )
        return cell, trial_dir, env, argv, pspec

    @contextlib.contextmanager
    def _trial_trace(self, run_id: str, trial_dir: Path) -> Iterator[dict[str, str]]:
        """The recipe's ``trace:`` probes, attached system-wide for the length of the trial.

        System-wide because uprobes attach before the trial's process exists (a pid filter
        would miss its first launches); the result's per-pid breakdown separates the trial's
        processes from anything else that ran meanwhile. With the ``cuda`` set, the trial's
        environment also gets the CUPTI collector (yielded), so the trace has GPU start times.
        """
        self._trace_summary = None
        spec = self.recipe.trace
        if not spec or not spec.probes:
            yield {}
            return
        session = self.options.services.trace_session(list(spec.probes), mode=spec.mode, on_event=self.bus.emit,
                               run_id=run_id, calibrate=not self._trace_calibrated, inject_children=True)
        try:
            session.start()
        except AortaError as exc:
            self.bus.emit(RunWarning(run_id, message=f"trace not attached for {trial_dir.name}: {exc.message}",
                                  code="trace"))
            yield {}
            return
        self._trace_calibrated = True
        try:
            yield session.child_env
        finally:
            session.stop()
            self._store.fs.atomic_write_json(trial_dir / "trace.json", session.result().to_json())
            self._trace_summary = {"path": "trace.json", "probes": list(spec.probes), "mode": spec.mode}

    def _trial_env(self, cell: CellPlan, spec: ExecutorTrial, trial_dir: Path) -> dict[str, str]:
        env = self.base_env()
        env.update(cell.env)
        env.update({
            "AORTA_ARTIFACT_DIR": str(trial_dir),
            "AORTA_TRIAL_ID": spec.trial_id,
            "AORTA_CELL": spec.cell,
            "AORTA_TRIAL": str(spec.trial),
            "PYTHONUNBUFFERED": "1",
        })
        if self.recipe.env_passthrough_mode == "file":
            # For launchers that drop the environment (ssh, srun): the command sources this file.
            # Names were validated (recipe and sidecar); checked again here because sourcing a
            # bad one runs it. Values are quoted; 0600 from the start: they may be secrets.
            from aorta_tui.recipe.checks import ENV_NAME_RE

            bad = [k for k in cell.env if not ENV_NAME_RE.fullmatch(k)]
            if bad:
                raise UsageError(f"cell {cell.name!r}: {bad[0][:60]!r} is not a variable name "
                                 "that can be written to probe.env")
            lines = [f"export {k}={shlex.quote(v)}" for k, v in sorted(cell.env.items())]
            path = trial_dir / "probe.env"
            self._store.fs.atomic_write_bytes(path, ("\n".join(lines) + "\n").encode(), mode=0o600)
            env["AORTA_ENV_FILE"] = str(path)
        return env

    def _collect(self, cell: CellPlan) -> dict[str, dict[str, str]]:
        """The cell's upstream collectors, name -> options (collect/collectors.py)."""
        from aorta_tui.collect.collectors import cell_collect

        return cell_collect(self.recipe, cell.name)

    def _worker_spec(self, cell: CellPlan, spec: ExecutorTrial, trial_dir: Path) -> WorkerSpec | None:
        """What the trial worker of a workload trial runs (``trial_spec.json``); None for a probe."""
        r = self.recipe
        if r.mode == "probe":
            return None
        cls = self.workload_cls
        steps = self.options.steps or cell.steps
        assert steps is not None  # recipe validation requires `steps` wherever a workload runs
        assert r.workload is not None  # and a workload
        return WorkerSpec(
            workload=r.workload,
            # what the orchestrator resolved: the worker imports it without scanning every
            # installed distribution's entry points again (trial_worker.load_class)
            workload_ref=f"{cls.__module__}:{cls.__qualname__}" if cls is not None else None,
            steps=steps,
            config=cell.workload_config or {},
            seed=self.plan.seed * 1000 + spec.trial,
            trial_dir=str(trial_dir),
            switches=tuple(cell.switches),
            collect={n: o for n, o in self._collect(cell).items()  # the worker's own collectors
                     if n in ("layer_numerics", "torch_profiler")},  # (collect/layer_numerics.py, torch_profiler_collect.py)
        )

    def _trial_argv(self, cell: CellPlan, trial_dir: Path, env: dict[str, str]) -> list[str]:
        r = self.recipe
        if r.mode == "probe":
            assert r.command is not None  # a probe recipe's command (the recipe's or after `--`)
            argv = list(r.command)
        else:
            worker = [sys.executable, "-m", "aorta_tui.trial.worker", str(trial_dir / TRIAL_SPEC_FILE)]
            launch = self._workload.launch
            world = int((cell.workload_config or {}).get("world_size", launch.min_world_size))
            from aorta_tui.executor.distributed import torchrun_argv

            # torchrun --standalone here, srun torchrun across a Slurm job's nodes (executor)
            launcher = torchrun_argv(r, world, worker[1:]) if launch.mode == "torchrun" else None
            argv = launcher or worker  # one rank needs no launcher (_dist.py)
        if self._collect(cell):  # rocprof / proton around the command (collect/collectors.py)
            from aorta_tui.collect.collectors import wrap_trial

            argv = wrap_trial(self._collect(cell), argv, env, trial_dir)
        if cell.docker:
            # `-e NAME` takes the value from docker's own environment (the trial env), so no
            # value (a token) shows in the argv; `--` ends the options, so the image is never one.
            argv = ["docker", "run", "--rm", "--network=host", "--ipc=host",
                    *[a for k in sorted(cell.env) for a in ("-e", k)],
                    "-v", f"{trial_dir}:{trial_dir}", "--", cell.docker, *argv]
        return argv

    def _timeline(self, outcome: ProcessOutcome, child: dict[str, Any] | None, stdout: Path) -> dict[str, Any]:
        """The trial's timeline (trial/timeline.py): the supervisor's marks, the child's (its
        workload result's ``timeline``; None: it left none), and what ran beside it."""
        from aorta_tui.sweep.snapshots import beside_trial
        from aorta_tui.trial import timeline

        marks = dict(outcome.marks)
        beside = dict(outcome.beside)
        beside["snapshot_capture"] = beside_trial(self._captures, marks.get("spawn"), marks.get("reaped"))
        unavailable: dict[str, str] = {}
        if child is not None:
            timeline.fill_cpu_device(child)
        if self.recipe.mode == "probe":
            missing = timeline.OPAQUE_REASON
        elif self.recipe.trial_isolation == "in_process":
            missing = "no workload result"
            for name in timeline.SUPERVISOR_MARKS:
                unavailable[name] = "in-process trial (trial_isolation: in_process): no process of its own"
        elif outcome.exec_error:
            missing = f"the worker did not start ({outcome.exec_error})"
        else:
            missing = "the trial worker left no timeline in workload_result.json"
        stdout_marks: dict[str, int] = {}
        if self.recipe.mode == "triage":
            with self._trial_log(stdout) as fh:
                stdout_marks = timeline.read_stdout_marks(fh)
        return timeline.build(marks, wall_start=outcome.started_at, child=child, child_missing=missing,
                              stdout_marks=stdout_marks, beside=beside, unavailable=unavailable)

    def _open_trial_log(self, path: Path) -> BinaryIO | None:
        """A trial's log opened through the run's file layer, or ``None``: the trial (or whoever
        can write the run) may have swapped it, or its directory, for a link or a FIFO since it
        was written; a refused log is read as no log rather than followed or waited on."""
        try:
            return self._store.fs.open_read(path, missing_ok=True)
        except (AortaError, OSError):
            return None

    @contextlib.contextmanager
    def _trial_log(self, path: Path) -> Iterator[BinaryIO | None]:
        fh = self._open_trial_log(path)
        try:
            yield fh
        finally:
            if fh is not None:
                fh.close()

    def _step_times(self, worker: WorkerResult | None, stdout: Path, wall_s: float,
                    cell: CellPlan) -> tuple[list[float] | None, str]:
        if worker is not None and worker.step_times_s:
            return [float(x) for x in worker.step_times_s], "workload"
        if self.recipe.step_time_regex:
            from aorta_tui.classify import extract_step_times

            with self._trial_log(stdout) as fh:
                times = extract_step_times(fh, self.recipe.step_time_regex) if fh else []
            if times:
                return times, "step_time_regex"
        if self.recipe.mode == "probe" and wall_s:
            return [wall_s], "trial_wall"
        return None, "none"

    # -- the end ---------------------------------------------------------------------------

    def _finish(self, run_dir: Path, run_id: str, status: str) -> SweepOutcome:
        from aorta_tui.sweep.matrix_report import write_reports

        records = [self._records[t] for t in sorted(self._records)]
        cells = aggregate(records, [c.name for c in self.plan.cells],
                          baseline_cell=self.plan.baseline_cell,
                          threshold=float(self.recipe.confound.threshold) if self.recipe.confound else 1.15)
        if self.workload_cls is not None:
            for s in cells:
                results = [r.workload_result for r in records if r.cell == s.cell and r.workload_result]
                s.cross_trial_failures = [
                    {"code": f.code, "message": f.message, "details": f.details}
                    for f in self.workload_cls.cross_trial_checks(results)
                ]
        for s in cells:
            self.bus.emit(CellAggregated(run_id, cell=s.cell, stats=s))
        hint = self._failure_hint(records, cells)
        paths = write_reports(run_dir, self.recipe, self.plan, cells, records, status=status, hint=hint,
                              schema_hash=self.options.services.snapshot_hash)
        for what, path in paths.items():
            self.bus.emit(ResultWritten(run_id, path=str(path), what=what))
        failing = [r.trial_id for r in records if r.verdict != "pass"]
        bad_cells = [s for s in cells if s.failed or s.errored or s.cross_trial_failures]
        # Every trial errored: the sweep judged nothing (no trial passed or failed), whatever
        # ran them (a Slurm job that never launched, a command that is not there), so it is
        # not a success even without --strict (docs/run-directory.md, "Exit codes").
        all_errored = bool(records) and all(r.verdict == "error" for r in records)
        if status == "interrupted":
            code = int(ExitCode.INTERRUPTED)
        elif all_errored or (self.options.strict and bad_cells):
            code = int(ExitCode.FAILURES)
        else:
            code = int(ExitCode.OK)
        summary = {
            "cells": {s.cell: {"passed": s.passed, "failed": s.failed, "errored": s.errored,
                               "confound": s.confound.get("flag"),
                               "cross_trial_failures": len(s.cross_trial_failures)} for s in cells},
            "failing_trials": [str(run_dir / "trials" / t) for t in failing],
            "hint": hint,
            "matrix": str(paths.get("matrix.md", "")),
            "every_trial_errored": all_errored,
        }
        self.bus.emit(RunFinished(run_id, status=status, exit_code=code, summary=summary))
        return SweepOutcome(run_dir, status, code, [s.to_dict() for s in cells], failing, records)

    def _failure_hint(self, records: list[TrialResult], cells: list[Any]) -> str:
        """The workload's hint for its failing trials (``Workload.failure_hint``), or "" when
        nothing failed: a hint such as "gpu_smoke failing means the device is broken" under an
        all-pass run sends the reader looking for a failure that is not there (issue 27 item 19)."""
        cls = self.workload_cls
        bad = [r for r in records if r.verdict != "pass"]
        if cls is None or not (bad or any(s.cross_trial_failures for s in cells)):
            return ""
        failing = [r.workload_result for r in bad if isinstance(r.workload_result, dict)]
        # a Workload subclass (load_workload refuses anything else): the base class's
        # failure_hint (its ``hint``) is always there; a plugin's may still answer None
        return cls.failure_hint(failing) or ""


def _trial_id(spec: TrialSpec) -> str:
    return spec.trial_id


def load_trial_records(run_dir: Path, trial_ids: set[str] | None = None) -> list[TrialResult]:
    """The record of every trial that counts, each once, in trial-id order.

    The trials that count are the plan's (``trial_ids``; without it, the run's ``plan.json``)
    whose ``trial_finished`` line is in the journal and whose own ``result.json`` is whole
    (see ``resume.resume_state``). A loose glob of result files would also count the retired
    copy of a trial killed between its result and its journal line (``trial-NNN.interrupted-K``).
    """
    if trial_ids is None:
        trial_ids = _planned_trial_ids(run_dir)
    store = RunStore(run_dir)  # read only: no lock taken
    return [rec for tid in sorted(store.completed(trial_ids)) if (rec := store.read_trial(tid)) is not None]


def _planned_trial_ids(run_dir: Path) -> set[str] | None:
    plan = read_plan_or_none(run_dir)
    # no readable plan: trust the journal's trial ids (they are checked)
    return None if plan is None else plan.trial_ids


def _read_workload_results(fs: RunDirFS, trial_dir: Path) -> WorkerResult | None:
    """Rank 0's result, with every other rank's failures folded in (named by rank) and each
    rank's pass and metrics under ``ranks``; None when rank 0 left no readable result."""
    result = _read_rank(fs, trial_dir / workload_result_filename(0))
    ranks = workload_rank_files(trial_dir)
    if result is None or not ranks:
        return result
    kept = result.extra.get("ranks")
    folded: dict[str, Any] = dict(kept) if isinstance(kept, dict) else {}
    failures = list(result.failures)
    for p in ranks:
        other = _read_rank(fs, p)
        if other is None:
            continue
        rank = p.stem.rsplit("rank", 1)[-1]
        folded[rank] = {"passed": other.passed, "metrics": other.metrics}
        failures += [dataclasses.replace(f, message=f"rank {rank}: {f.message}") for f in other.failures]
    # "ranks" where the untyped fold's setdefault put it: after the file's own keys
    return dataclasses.replace(result, failures=tuple(failures), passed=not failures,
                               extra={**result.extra, "ranks": folded})


def _result_section(doc: WorkerResult | None) -> dict[str, Any] | None:
    """The ``workload_result`` of the trial's result.json (and the classifier's tier-4 input):
    the folded result without its timeline, which result.json keeps under its own key."""
    return None if doc is None else dataclasses.replace(doc, timeline=None).to_json()


def _read_rank(fs: RunDirFS, path: Path) -> WorkerResult | None:
    """One rank's result file, typed; None when it is missing, refused or damaged.

    The trial wrote it: a FIFO or a link it planted (here or on the way) must not hang or
    mislead the sweep, so it is read through the run's file layer. A file that cannot be read
    as a result is no result, as an unreadable one always was: rank 0's gives the trial no
    workload result (its verdict is its process's and its logs'), another rank's is left out
    of the fold. Refused now: a file that parses but is not a result (a failure without a
    code, ``failures`` that is no list), which the classifier took entry by entry and the
    fold stopped on with a traceback. The worker checks the file it writes reads back
    (``WorkerResult.file_bytes``), so only a file something else changed meets this.
    """
    try:
        return read_worker_result(fs, path)
    except (AortaError, OSError):  # FileNotFoundError among them: no file, no result
        return None


# What the recipe patterns of a trial that has not ended yet see (LogScan judges their
# conditions after the end, with the real outcome).
class _EndFacts(Protocol):
    """What a pattern's condition reads of a trial's end (a ProcessOutcome, or none yet)."""

    @property
    def gpu_peak_mem_bytes(self) -> int | None: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def wall_s(self) -> float | None: ...


@dataclass(frozen=True)
class _NotEnded:
    """The end of a trial still running: the scan's patterns are built before it ends."""

    gpu_peak_mem_bytes: None = None
    exit_code: None = None
    wall_s: None = None


_NOT_ENDED = _NotEnded()



def _refuse_cut_logs(log_error: str, trial_id: str, trial_dir: Path, run_dir: Path) -> None:
    """A log cut short by a full disk (or an I/O error) cannot be classified honestly: record
    nothing, stop, and let the resume run this trial again once it is fixed."""
    raise EnvironmentProblem(
        f"the logs of trial {trial_id} could not be written: {log_error} "
        f"({describe_free_space(trial_dir)} there)",
        hint="free some space on that filesystem (or fix the disk), then finish the run with "
        f"`aorta-tui sweep run --resume {run_dir}` (finished trials are kept)",
    )

def _pattern_rules(recipe: Recipe, outcome: _EndFacts) -> list[PatternRule]:
    """The recipe's tier-5 patterns for one finished trial.

    Conditions see the match's named groups plus upstream's trial variables (``exit_code``,
    ``walltime_sec``, ``peak_vram_mib``), which exist only once the process has ended.
    """
    from aorta_tui.classify import PatternRule

    vram = outcome.gpu_peak_mem_bytes / 2**20 if outcome.gpu_peak_mem_bytes is not None else None
    rules = []
    for p in recipe.custom_patterns or ():
        cond: Callable[[dict[str, Any]], bool] | None = None
        if p.condition:
            def cond(caps: dict[str, Any], p: CustomPattern = p) -> bool:
                return p.condition_holds(caps, exit_code=outcome.exit_code,
                                         walltime_sec=outcome.wall_s, peak_vram_mib=vram)
        rules.append(PatternRule(id=p.id, regex=p.compiled_regex, on_match=p.on_match,
                                 required_for_pass=bool(p.required_for_pass), condition=cond))
    return rules


def _masked(env: dict[str, str]) -> dict[str, str]:
    from aorta_tui.core.secrets import mask_env

    return mask_env(env)


def _detection_dict(d: Detection) -> dict[str, Any]:
    return dataclasses.asdict(d)


def _where(recipe: Recipe, path: str) -> str | None:
    try:
        return recipe.where(path)
    except Exception:
        return None


def _require_docker() -> None:
    import subprocess

    if shutil.which("docker") is None:
        raise EnvironmentProblem("a cell runs in a docker environment, and there is no `docker` here",
                                 hint="install docker, or use environment: local")
    try:
        probe = spawn_gate.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                               capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(f"docker does not answer: {exc}") from None
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or ["no container engine runs"])[-1]
        raise EnvironmentProblem(
            f"a cell runs in a docker environment, and no container engine runs here ({why})",
            hint="start the docker daemon, or use environment: local",
        )


def _emulated_cells(plan: Plan, registry: Registry, dry_run: bool) -> list[str]:
    """Cells in upstream's emulated environments: a note in a dry run, else exit 3."""
    from aorta_tui.registry.registry import emulator_problem

    notes = []
    for cell in plan.cells:
        env = registry.environments.get(cell.environment)
        bad = emulator_problem(env) if env is not None else None
        if bad and not dry_run:
            raise EnvironmentProblem(f"cell {cell.name!r}: {bad[0]}", hint=bad[1])
        if bad:
            notes.append(f"cell {cell.name!r}: {bad[0]}; a real run stops here (exit 3)")
    return notes


def _refuse_swapped_parent(trial_dir: Path, run_dir: Path) -> None:
    """A directory between the run and the trial (``trials/``, the cell's) that is now a link
    was swapped by someone who can write the run directory, not by the trial: the file layer's
    refusal (exit 3), not the trial's fault."""
    from aorta_tui.core.rundir_fs import rundir_refused

    try:
        parents = trial_dir.relative_to(run_dir).parents
    except ValueError:
        return
    for rel in sorted(parents, key=lambda p: len(p.parts))[1:]:  # [0] is the run itself
        if (run_dir / rel).is_symlink():
            raise rundir_refused(str(run_dir / rel), "a symlink")


def _require_own_dir(trial_dir: Path, trial_id: str, run_dir: Path) -> None:
    """The trial's directory is its ``$AORTA_ARTIFACT_DIR``, so the trial can replace it with a
    file or a link; its result would then be written over (or through) that: exit 2 naming it,
    the trial not counted (issue 37 item 7; it was exit 70)."""
    try:
        st = trial_dir.lstat()
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        return
    _refuse_swapped_parent(trial_dir, run_dir)
    what = ("removed its own directory" if st is None
            else "replaced its own directory with a symlink" if stat.S_ISLNK(st.st_mode)
            else "replaced its own directory with a file")
    raise RunDirError(
        f"{trial_dir}: trial {trial_id} {what} (its $AORTA_ARTIFACT_DIR, where its logs and "
        "result.json are kept), so it cannot be recorded",
        hint=f"fix the command so it writes inside $AORTA_ARTIFACT_DIR, move what it left away "
             f"(`mv {trial_dir} {trial_dir}.bad`), then finish the run with "
             f"`aorta-tui sweep run --resume {run_dir}`")
