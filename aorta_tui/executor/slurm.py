"""The Slurm executor: every pending trial a task of one batched job array (docs/slurm.md).

Why an array per submission, not a job per trial: one ``sbatch`` call submits up to
``ARRAY_MAX`` trials (a 1,000-trial sweep is one call, not a thousand), while each trial keeps
its own job id (``<job>_<task>``), node, state, ``scancel`` and time limit. The planner's order
is the task order, so the scheduler starts them in the plan's interleaved order.

Durability (what a SIGKILLed orchestrator leaves): ``slurm/jobs.json`` names each batch
(job name ``aorta-<run>-s<session>-b<k>``) *before* its sbatch call and gets its job id right
after, both atomic and fsynced; a resume finds a batch whose id was never written by its job
name. Trials whose job still runs, or that ended while nobody watched, are adopted, never
resubmitted; a job the orchestrator itself cancelled (Ctrl-C) is marked so and runs again.

The journal stays the orchestrator's: the job writes only into its trial directory (logs,
``workload_result.json``, ``slurm-outcome.json``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_tui.classify.placement import SLURM_STATES, Placement
from aorta_tui.core.atomic import atomic_write_bytes
from aorta_tui.core.errors import AortaError, EnvironmentProblem, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS, Json
from aorta_tui.core.process_record import ExecutorFacts
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.executor import slurm_cmd as sc
from aorta_tui.executor.distributed import distributed_shape
from aorta_tui.executor.slurm_job import GATE_SUFFIX, JOB_SPEC, OUTCOME
from aorta_tui.executor.slurm_jobs_doc import WHAT as JOBS_WHAT
from aorta_tui.executor.slurm_jobs_doc import (
    BatchRecord,
    JobPlace,
    SlurmJobs,
    TrialRecord,
    task_job_id,
)
from aorta_tui.executor.slurm_outcome_doc import NodeFacts, NodeKernelLog, SlurmOutcome
from aorta_tui.executor.slurm_spec_doc import HangSpec, JobSpec, SpecManifest

if TYPE_CHECKING:
    from collections.abc import Sequence

    from aorta_tui.classify.model import Outcome
    from aorta_tui.core.events import EventBus
    from aorta_tui.executor.host import ExecutorCell, ExecutorHost, ExecutorTrial
    from aorta_tui.recipe.model import Recipe
    from aorta_tui.trial.supervisor import ProcessOutcome, ProcessSpec

ARRAY_MAX = int(os.environ.get("AORTA_SLURM_ARRAY_MAX", "1000"))  # Slurm's MaxArraySize is 1001
QUERY_EVERY_S = float(os.environ.get("AORTA_SLURM_QUERY_S", "1.0"))  # squeue for all jobs at once
STAT_EVERY_S = 0.05  # the outcome file, looked at between queries (a stat; no inotify on NFS)
# The shared-filesystem check is the array's own first task (the gate: slurm_job.pass_gate): no
# task started within PROBE_WAIT_S leaves the check to the tasks, with a warning.
PROBE_WAIT_S = float(os.environ.get("AORTA_SLURM_PROBE_WAIT_S", "120"))
# The gate's marker is looked at every PROBE_STAT_S and squeue asked every PROBE_QUERY_S: the
# marker says a task runs, squeue only that one ended without it; a squeue every 0.1 s took CPU
# from the tasks' own start on a small node for nothing.
PROBE_STAT_S, PROBE_QUERY_S = 0.02, 0.5
# A task in one of these states ran (or failed to launch): ended without its marker, it is the
# check failing. One cancelled or preempted while pending says nothing about the filesystem.
_RAN_STATES = frozenset({"COMPLETED", "FAILED", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY"})
_GATE_NAME = re.compile(r"gate-s\d{1,9}-[0-9a-f]{16}")  # begin(): gate-s<session>-<token>
SETTLE_S = 30.0  # after a signalled job's outcome: wait this long for Slurm's final state
OUTCOME_LAG_S = 10.0  # a finished job's outcome file may show up late on a network filesystem
BACKSTOP_S = 60.0  # past timeout_per_trial + this, the orchestrator scancels the job itself
# A job that squeue stops listing while it was alive (and sacct, where it works, does not know
# either) ends as LOST after this long: Slurm 22.05 drops an array task cancelled while
# PENDING from squeue at once, without a final state, so its last state would hold forever.
VANISH_S = max(OUTCOME_LAG_S, 3 * QUERY_EVERY_S)
STATE_DIR = "slurm"
JOBS_FILE = "jobs.json"
JOBS_LIMIT = INPUT_LIMITS[JOBS_WHAT]  # about 100 bytes a trial

# Slurm's final states that explain a trial better than its process does (the classifier's
# table, classify/placement.py): a job in one of them has ended
TYPED_STATES = SLURM_STATES


@dataclass
class TrialJob:
    trial_id: str
    batch: str  # job name of its array
    task: int
    trial_dir: Path
    submitted_at: float
    job_id: str | None = None  # "<array job>_<task>" once known
    adopted: bool = False
    started_seen: float | None = None  # when squeue first said RUNNING (orchestrator clock)
    done: bool = False  # run() returned its outcome (the sweep records it)
    info: sc.JobInfo | None = None
    orchestrator_state: str | None = None  # TIMEOUT when the backstop scancelled it; LOST
    gone_since: float | None = None  # when squeue (and sacct) first stopped listing it
    vanished_from: str | None = None  # its last state seen, when it vanished while alive
    foreign_outcome: tuple[int, int] | None = None  # (inode, mtime) of another job's outcome file


@dataclass
class _Jobs:
    """``slurm/jobs.json`` in memory, rewritten atomically on every change: its typed records
    (``slurm_jobs_doc``), each replaced, never changed in place, when a batch gets its job id
    or a trial its node; saved as the :class:`SlurmJobs` they make."""

    run_dir: Path
    batches: dict[str, BatchRecord] = field(default_factory=dict)
    trials: dict[str, TrialRecord] = field(default_factory=dict)
    read: SlurmJobs = field(default_factory=SlurmJobs)  # the file's version and unknown keys

    @property
    def path(self) -> Path:
        return self.run_dir / STATE_DIR / JOBS_FILE

    @property
    def doc(self) -> SlurmJobs:
        return replace(self.read, batches=dict(self.batches), trials=dict(self.trials))

    @property
    def data(self) -> dict[str, Json]:
        """The object jobs.json holds: what :meth:`save` writes."""
        return self.doc.to_json()

    def job_id(self, trial_id: str) -> str | None:
        return task_job_id(self.batches, self.trials, trial_id)

    @classmethod
    def load(cls, run_dir: Path, *, strict: bool = False) -> _Jobs:
        """Through the run's file layer: a FIFO, ``/dev/zero`` or a link in its place (the run
        directory is its owner's to write) is no jobs file, and never hangs or fills memory.

        A file that is no jobs map (not JSON, ``batches`` or ``trials`` not an object) is no
        jobs file either, as it always was: the run's trials are run (again) as if it had none.
        With ``strict`` (a resume, which must know which jobs still run) it is a located
        UsageError instead: forgetting the map would resubmit trials whose jobs may still run,
        and the resume's save would then write the damaged file over with an empty map.
        A damaged entry is left out and the others kept, as the readers of the untyped map
        skipped it (a record that is not an object, a task that is not a number)."""
        jobs = cls(run_dir)
        try:
            with RunDirFS(run_dir) as fs:
                raw = fs.load_json(f"{STATE_DIR}/{JOBS_FILE}", what=JOBS_WHAT, limit=JOBS_LIMIT)
            doc = SlurmJobs.from_dict(raw, where=str(jobs.path), leave_out_damaged=True)
        except FileNotFoundError:
            return jobs  # a run no batch was submitted for
        except (OSError, AortaError, RecursionError) as exc:
            if strict:
                raise _damaged_map(jobs.path, run_dir.name, exc) from None
            return jobs
        jobs.read, jobs.batches, jobs.trials = doc, dict(doc.batches), dict(doc.trials)
        return jobs

    def save(self) -> None:
        with RunDirFS(self.run_dir) as fs:
            fs.atomic_write_json(f"{STATE_DIR}/{JOBS_FILE}", self.data)


def _damaged_map(path: Path, run_name: str, exc: BaseException) -> UsageError:
    """The resume's refusal of a jobs map it cannot read: which file, why, and how to go on
    without running a trial beside its still-running job."""
    why = exc.message if isinstance(exc, AortaError) else f"{path}: {exc}"
    if not why.startswith(str(path)):
        why = f"{path}: {why}"
    return UsageError(
        f"{why}; the resume cannot tell which of the run's Slurm jobs still run, and "
        "resubmitting blind could run a trial twice (nothing was changed)",
        hint=f"find the run's jobs with `squeue --me --format='%i %j' | grep aorta-{run_name}-`, "
        f"`scancel` them (or let them end), then move {path} aside and resume again")


class SlurmExecutor:
    kind = "slurm"

    def __init__(self, recipe: Recipe) -> None:
        self.recipe = recipe
        self.spec = recipe.executor
        self.jobs: dict[str, TrialJob] = {}
        self.run_dir: Path | None = None
        self.store: _Jobs | None = None
        self._last_query = 0.0
        self._sacct_works = True
        self.warnings: list[str] = []  # said once the run's event bus is known (begin)
        self._bus: EventBus | None = None
        self._run_id = ""
        self._said: set[str] = set()
        self._lock = threading.Lock()
        self._placement_dirty = False  # slurm/jobs.json's per-trial node/state changed
        # the node's kernel log as the typed outcome read it, by job id, from the outcome's
        # reading to the classifier's placement(): taken as read, never rebuilt from its JSON
        self._node_logs: dict[str | None, NodeKernelLog | None] = {}

    # -- before anything is written ------------------------------------------------------------

    def check(self, sweep: ExecutorHost, *, dry_run: bool) -> list[str]:
        """sbatch/squeue/scancel on PATH, the partition, the capacity: nothing submitted.

        The account and the shared run directory are checked by the array itself (``begin``):
        its first task's marker, before any trial runs."""
        notes: list[str] = []
        r = self.recipe
        if r.trace is not None and r.trace.probes:
            raise UsageError("trace: probes attach on this machine, and with executor slurm the "
                             "trials run on compute nodes", hint="remove trace:, or use --executor local",
                             location=_where(r, "trace"))
        if r.mode == "triage" and r.trial_isolation == "warm":
            raise UsageError("trial_isolation: warm forks trials from zygotes on this machine, and "
                             "executor slurm runs them as jobs on compute nodes",
                             hint="use trial_isolation: process", location=_where(r, "trial_isolation"))
        if r.mode == "triage" and r.trial_isolation == "in_process":
            raise UsageError("trial_isolation: in_process runs trials inside the orchestrator, "
                             "and executor slurm runs them as jobs",
                             hint="use trial_isolation: process", location=_where(r, "trial_isolation"))
        self._check_distributed(sweep)
        try:
            self._require_tools()
            self._require_partition()
            self._require_capacity()
        except EnvironmentProblem as exc:
            if not dry_run:
                raise
            return [f"{exc.message}; a real run stops here (exit 3)"]
        if dry_run:
            n = len(sweep.plan.trials)
            opts = " ".join(self._options()) or "the cluster's defaults"
            return [f"executor slurm: {n} trials as {-(-n // ARRAY_MAX)} job array(s), sbatch "
                    f"{opts}; a real run's first task checks the shared run dir before any trial runs"]
        return notes

    def _require_tools(self) -> None:
        for tool in ("sbatch", "squeue", "scancel"):
            if sc.which(tool) is None:
                raise EnvironmentProblem(
                    f"executor slurm needs {tool}, and there is no `{tool}` on PATH",
                    hint="run from a Slurm login node (or load Slurm: `module load slurm`), "
                    "or use --executor local")

    def _require_partition(self) -> None:
        part = self.spec.partition
        if part is None:
            return
        try:
            proc = sc.call(["sinfo", "-h", "-o", "%R"])
        except sc.SlurmCallError as exc:
            raise EnvironmentProblem(f"Slurm does not answer: {exc.message}",
                                     hint="check that slurmctld runs (`sinfo`), then run again") from None
        known = sorted({ln.strip() for ln in proc.stdout.splitlines() if ln.strip()})
        if part not in known:
            raise EnvironmentProblem(
                f"Slurm has no partition {part!r} (executor.partition)",
                hint=f"use one of {', '.join(known) or '(none listed)'} (`sinfo -s` lists them), "
                f"in {_where(self.recipe, 'executor.partition') or 'the recipe'}",
                location=_where(self.recipe, "executor.partition"))

    def _check_distributed(self, sweep: ExecutorHost) -> None:
        """``nodes`` / ``gpus_per_node``: only a torchrun workload spreads over nodes, and its
        cells' world_size (where given) is nodes x gpus_per_node (exit 2, located)."""
        shape = distributed_shape(self.spec)
        if shape is None:
            return
        nodes, per_node = shape
        r = self.recipe
        launch = None if sweep.workload_cls is None else sweep.workload_cls.launch
        torchrun = r.mode == "triage" and launch is not None and launch.mode == "torchrun"
        if not torchrun:
            if nodes > 1:
                what = f"workload {r.workload!r}" if r.mode == "triage" else "a probe command"
                raise UsageError(
                    f"executor.nodes {nodes}: {what} runs as one process, and only a torchrun "
                    "workload spreads over nodes",
                    hint="set nodes: 1 (or remove it), or sweep a torchrun workload "
                    "(`aorta-tui sweep list-workloads`)", location=_where(r, "executor.nodes"))
            return
        for i, cell in enumerate(sweep.plan.cells):
            want = (cell.workload_config or {}).get("world_size")
            if want is not None and want != nodes * per_node:
                raise UsageError(
                    f"cell {cell.name!r}: world_size {want}, and executor nodes {nodes} x "
                    f"gpus_per_node {per_node} start {nodes * per_node} ranks",
                    hint=f"set world_size: {nodes * per_node} or remove it (the ranks are nodes x "
                    "gpus_per_node), or change nodes / gpus_per_node",
                    location=_where(r, f"cells[{i}]") or _where(r, "workload_config"))
            if cell.docker:
                raise UsageError(f"cell {cell.name!r} runs in docker, and a trial across Slurm "
                                 "nodes starts its ranks with srun on the nodes themselves",
                                 hint="use a local environment for it, or remove nodes / "
                                 "gpus_per_node", location=_where(r, f"cells[{i}]"))

    def _require_capacity(self) -> None:
        """A distributed trial asks for no more nodes, nor GPUs per node, than the partition has
        (exit 3 with the numbers; sbatch itself would only say "configuration not available")."""
        shape = distributed_shape(self.spec)
        if shape is None:
            return
        nodes, per_node = shape
        try:
            proc = sc.call(["sinfo", "-h", "-o", sc.SINFO_CAPACITY_FORMAT])
        except sc.SlurmCallError as exc:
            raise EnvironmentProblem(f"Slurm does not answer: {exc.message}",
                                     hint="check that slurmctld runs (`sinfo`), then run again") from None
        cap = sc.parse_capacity(proc.stdout, self.spec.partition)
        if cap is None:
            return  # no default partition to read: sbatch's own answer will do
        part, have_nodes, have_gpus = cap
        if nodes > have_nodes:
            raise EnvironmentProblem(
                f"partition {part!r} has {have_nodes} node(s), and the trial asks for {nodes} "
                "(executor.nodes / --nodes)",
                hint=f"set nodes to at most {have_nodes}, or pick a partition with more nodes "
                "(`sinfo -s`: executor.partition)", location=_where(self.recipe, "executor.nodes"))
        if self.spec.gpus_per_node is not None and per_node > have_gpus:
            raise EnvironmentProblem(
                f"the nodes of partition {part!r} have at most {have_gpus} GPU(s), and the trial "
                f"asks for {per_node} per node (executor.gpus_per_node / --gpus-per-node)",
                hint=f"set gpus_per_node to at most {have_gpus} (`sinfo -o '%P %G'` shows each "
                "partition's GRES)", location=_where(self.recipe, "executor.gpus_per_node"))

    def _open_gate(self, marker: Path, token: str, job_ids: list[str]) -> None:
        """Wait for a task's marker (it runs, and it and this process see the same run
        directory), then write the go every task waits for (slurm_job.pass_gate).

        Why in the array and not a probe job of its own: slurmctld starts jobs on its
        scheduling pass (about once a second), and the array, submitted once a probe job had
        passed, waited for the next one: a pass per sweep (docs/slurm.md, Overhead). A task
        that ended without a marker stops the run here, before any trial ran: the array is
        cancelled and the orchestrator removes the new run directory.
        """
        go = marker.with_name(marker.name + GATE_SUFFIX)
        deadline = time.monotonic() + PROBE_WAIT_S
        next_query = 0.0  # at once: a task cancelled while pending is then seen PENDING first
        infos: dict[str, sc.JobInfo] = {}
        try:
            while not _marker_ok(marker, token):
                now = time.monotonic()
                if now >= deadline:
                    started = sorted(j for j, i in infos.items() if i.state != "PENDING")
                    self._warn(f"no task of the run's job array had started after {PROBE_WAIT_S:g} s "
                               f"({', '.join(started) or 'all pending'}), so the shared-filesystem "
                               "check is left to the tasks: one that does not see the run "
                               "directory ends without an outcome, and its trial says so")
                    break
                if now < next_query:  # the marker is a stat; squeue a subprocess
                    time.sleep(PROBE_STAT_S)
                    continue
                next_query = now + PROBE_QUERY_S
                try:
                    infos = sc.squeue(job_ids) or infos
                except sc.SlurmCallError as exc:
                    raise EnvironmentProblem(
                        f"Slurm stopped answering while the run's first tasks started: {exc.message}",
                        hint="check `sinfo`, then run again; no trial ran") from None
                with self._lock:  # seen here counts as seen: one cancelled pending vanishes from PENDING
                    self._record_seen({j.job_id: j for j in self.jobs.values() if j.job_id and not j.done},
                                      infos, mark_gone=False)
                ran_out = sorted((i for i in infos.values() if not i.alive and i.state in _RAN_STATES),
                                 key=lambda i: i.job_id)
                if ran_out:
                    time.sleep(min(OUTCOME_LAG_S, 2.0))  # a late NFS attribute cache
                    if _marker_ok(marker, token):
                        break
                    raise self._gate_failed(ran_out[0], marker)  # begin() cancels the array
                if infos and not any(i.alive for i in infos.values()):
                    break  # every task ended unstarted (cancelled): nothing waits for the go
            atomic_write_bytes(go, b"")
        finally:
            with contextlib.suppress(OSError):
                marker.unlink()

    def _gate_failed(self, info: sc.JobInfo, marker: Path) -> EnvironmentProblem:
        node = info.node or "a compute node"
        out = f"{marker.parent}/<batch>.out/{info.job_id.rpartition('_')[2]}.out"
        return EnvironmentProblem(
            f"the run directory is not shared with the compute nodes, or aorta-tui cannot start "
            f"there: task {info.job_id} of the run's job array ended {info.state} on {node} "
            f"({info.reason or 'no reason given'}) before this machine saw its marker in "
            f"{marker.parent}; no trial ran",
            hint=f"put --output on a filesystem every node mounts (your home, /scratch, a project "
            f"directory), and check that {sys.executable} and aorta-tui exist on the compute nodes "
            f"at the same path; `scontrol show job {info.job_id}` and {out} say more")

    def _options(self) -> list[str]:
        s = self.spec
        out = [f"--{k}={v}" for k, v in (("partition", s.partition), ("account", s.account),
                                          ("gres", s.gres), ("constraint", s.constraint))
               if v is not None]
        shape = distributed_shape(s)
        if shape is not None:  # one task per node: its torchrun agent starts the node's ranks
            out += [f"--nodes={shape[0]}", "--ntasks-per-node=1"]
            if s.gpus_per_node is not None:
                out.append(f"--gres=gpu:{s.gpus_per_node}")
        limit = s.time or _default_time(self.recipe)
        if limit is not None:
            out.append(f"--time={limit}")
        out += list(s.extra_sbatch)
        return out

    def _submit(self, argv: list[str], script: str) -> str:
        try:
            proc = sc.call(argv, stdin=script)
        except sc.SlurmCallError as exc:
            raise self._refused(exc) from None
        job_id = sc.parse_sbatch_parsable(proc.stdout)
        if job_id is None:
            raise EnvironmentProblem(f"sbatch printed no job id ({proc.stdout.strip()[:120]!r})",
                                     hint="check `sbatch --version` and the Slurm installation")
        return job_id

    def _refused(self, exc: sc.SlurmCallError) -> EnvironmentProblem:
        msg, s, r = exc.message, self.spec, self.recipe
        low = msg.lower()
        if "account" in low:
            return EnvironmentProblem(
                f"Slurm refused the account {s.account or '(none given)'!r}: {msg}",
                hint="set executor.account to an account you may charge (`sacctmgr show assoc "
                "user=$USER format=account` lists yours)", location=_where(r, "executor.account"))
        if "partition" in low:
            return EnvironmentProblem(f"Slurm refused the partition {s.partition!r}: {msg}",
                                      hint="`sinfo -s` lists the partitions; set executor.partition",
                                      location=_where(r, "executor.partition"))
        if "gres" in low or "generic resource" in low:
            return EnvironmentProblem(f"Slurm refused gres {s.gres!r}: {msg}",
                                      hint="`sinfo -o '%P %G'` shows what each partition has",
                                      location=_where(r, "executor.gres"))
        return EnvironmentProblem(f"sbatch refused the job: {msg}",
                                  hint="fix the executor: block of the recipe (its options go to "
                                  "sbatch as written), then run again", location=_where(r, "executor"))

    # -- resume ----------------------------------------------------------------------------------

    def adopt(self, run_dir: Path, unfinished: set[str]) -> set[str]:
        """Trials (of ``unfinished``) whose job still runs or ended unrecorded: keep their files."""
        run_dir = run_dir.absolute()  # a relative --resume path: the nodes' paths are absolute
        self._open_store(run_dir, strict=True)
        assert self.store is not None
        store = self.store
        if left_out := store.read.left_out:  # said once the bus is known
            entries = "entry" if len(left_out) == 1 else "entries"
            self.warnings.append(
                f"{len(left_out)} damaged {entries} of {store.path} left out: a job they name is "
                f"not adopted, and its trial runs again ({left_out[0]})")
        _find_batch_ids(store.batches)
        store.save()
        try:
            infos = self._query_ids([job for tid in store.trials if tid in unfinished
                                     and (job := store.job_id(tid))])
        except sc.SlurmCallError as exc:  # resubmitting blind could run a live trial twice
            raise EnvironmentProblem(
                f"Slurm does not answer ({exc.message}), so the resume cannot tell which of the "
                "run's jobs still run", hint="resume again once `squeue` works (no trial was "
                "resubmitted; running jobs keep running)") from None
        adopted: set[str] = set()
        for tid in sorted(unfinished):
            rec, job_id = store.trials.get(tid), store.job_id(tid)
            if rec is None or job_id is None or rec.task is None or rec.cancelled_by_orchestrator:
                continue
            submitted = store.batches[rec.batch].submitted_at  # job_id: the batch is there
            trial_dir = run_dir / "trials" / tid
            info = infos.get(job_id)
            has_outcome = (trial_dir / OUTCOME).is_file()
            if (info is not None and (info.alive or info.state in TYPED_STATES)) or has_outcome:
                self.jobs[tid] = TrialJob(tid, rec.batch, rec.task, trial_dir,
                                          float(submitted if submitted is not None else time.time()),
                                          job_id=job_id, adopted=True, info=info)
                adopted.add(tid)
        self._open_adopted_gates(run_dir, {self.jobs[t].batch for t in adopted})
        return adopted

    def _open_adopted_gates(self, run_dir: Path, names: set[str]) -> None:
        """The go of every adopted batch: an orchestrator killed while its tasks waited at the
        gate never wrote it (they wait GATE_WAIT_S, then end running nothing). The gate is named
        in jobs.json and found in this run's own state directory, however the resume spells it."""
        assert self.store is not None
        for name in sorted(names):
            batch = self.store.batches.get(name)
            gate = batch.gate if batch is not None else None
            if gate is not None and _GATE_NAME.fullmatch(gate):  # jobs.json is a user's file
                with contextlib.suppress(OSError), RunDirFS(run_dir) as fs:
                    fs.atomic_write_bytes(f"{STATE_DIR}/{gate}{GATE_SUFFIX}", b"")

    @staticmethod
    def refuse_unsettled(run_dir: Path, unfinished: set[str], executor: str) -> None:
        """A resume with another executor (``--executor local``) of a run whose trials were
        Slurm jobs: refused (exit 2, with the commands) while a job that ``slurm/jobs.json``
        names for an unfinished trial is queued or running, since the other executor would run
        that trial a second time, in the same trial directory, and retire the files the job
        still reads (its ``slurm-job.json``). Jobs that ended (or that Slurm no longer knows)
        settle nothing: their trials run again on ``executor``."""
        store = _Jobs.load(run_dir, strict=True)
        wanted = {tid: rec for tid, rec in store.trials.items() if tid in unfinished
                  and rec.task is not None and not rec.cancelled_by_orchestrator}
        if not wanted:
            return
        resume = f"aorta-tui sweep run --resume {shlex.quote(str(run_dir))}"
        if sc.which("squeue") is None:
            raise UsageError(
                f"{len(wanted)} unfinished trial(s) of {run_dir} were Slurm jobs ({store.path}), and "
                f"there is no `squeue` here to tell whether they still run; --executor {executor} "
                "could run them a second time beside their jobs",
                hint=f"resume on the Slurm login node: `{resume} --executor slurm` adopts the "
                f"jobs that still run (or `scancel` them there, then `{resume} --executor {executor}`)")
        _find_batch_ids(store.batches)
        ids = {tid: job for tid in wanted if (job := store.job_id(tid))}
        try:
            infos = sc.squeue(list(ids.values()))
        except sc.SlurmCallError as exc:
            raise UsageError(
                f"Slurm does not answer ({exc.message}), so the resume cannot tell whether the "
                f"Slurm jobs of {len(ids)} unfinished trial(s) still run",
                hint=f"resume again once `squeue` works (nothing was changed): `{resume} "
                f"--executor {executor}`, or `{resume} --executor slurm` to adopt them") from None
        live = sorted(job for job in ids.values() if job in infos and infos[job].alive)
        if not live:
            return
        shown = " ".join(live[:20]) + (f" ... ({len(live) - 20} more)" if len(live) > 20 else "")
        raise UsageError(
            f"{len(live)} unfinished trial(s) of {run_dir} still have Slurm jobs queued or running "
            f"({shown}), and --executor {executor} would run them a second time in the same trial "
            "directories; nothing was changed",
            hint=f"adopt them: `{resume} --executor slurm` waits for those jobs and records them "
            f"(the other trials run as Slurm jobs too); or cancel them: `scancel {' '.join(live)}`, "
            f"then `{resume} --executor {executor}` runs them here")

    def _open_store(self, run_dir: Path, *, strict: bool = False) -> None:
        if self.store is None or self.run_dir != run_dir:
            self.run_dir = run_dir
            self.store = _Jobs.load(run_dir, strict=strict)

    # -- submission ------------------------------------------------------------------------------

    def begin(self, sweep: ExecutorHost, run_dir: Path, pending: Sequence[ExecutorTrial], session: int) -> None:
        """Prepare every pending trial that is not adopted and submit them, ARRAY_MAX a call.

        Every path a job is given is absolute: sbatch resolves a relative ``--output`` against
        ``--chdir``, and the job resolves the manifest's and its spec's paths against it too, so
        the default ``--output aorta-out`` sent every task to ``<run>/aorta-out/<run>/...``,
        where nothing exists (JobLaunchFailure)."""
        run_dir = run_dir.absolute()
        self._open_store(run_dir)
        assert self.store is not None
        self._bus, self._run_id = getattr(sweep, "bus", None), run_dir.name
        for note in self.warnings:
            self._warn(note)
        fresh = [t for t in pending if t.trial_id not in self.jobs]
        if not fresh:
            return
        token = secrets.token_hex(8)
        gate = run_dir / STATE_DIR / f"gate-s{session}-{token}"  # the tasks' marker; + .go
        submitted: list[str] = []
        try:
            for k in range(0, len(fresh), ARRAY_MAX):
                chunk = fresh[k:k + ARRAY_MAX]
                submitted.append(self._submit_batch(sweep, run_dir, chunk, session, k // ARRAY_MAX,
                                                    (gate, token)))
            self._open_gate(gate, token, submitted)
        except BaseException:
            # nothing submitted half-way: a later batch refused cancels the earlier ones
            ids = [j for j in submitted if j]
            if ids:
                self._mark_cancelled([t for t, j in self.jobs.items() if j.job_id
                                      and j.job_id.split("_")[0] in ids])
                sc.scancel(ids)
            raise

    def _submit_batch(self, sweep: ExecutorHost, run_dir: Path, chunk: list[Any], session: int, k: int,
                      gate: tuple[Path, str]) -> str:
        assert self.store is not None
        name = f"aorta-{run_dir.name}-s{session}-b{k}"
        state = run_dir / STATE_DIR
        out_dir = state / f"{name}.out"
        specs: list[str] = []
        with RunDirFS(run_dir) as fs:  # the run's file layer: no link followed out of it
            os.close(fs.make_dirs(out_dir))
            for task, trial in enumerate(chunk):
                cell, trial_dir, _env, _argv, pspec = sweep.prepare_trial(run_dir, trial)
                path = trial_dir / JOB_SPEC
                spec = _job_spec(pspec, cell, trial_dir, name)
                fs.atomic_write_bytes(path, json.dumps(spec.to_json()).encode(), mode=0o600)
                if fs.lstat(trial_dir / OUTCOME) is not None:
                    fs.remove_tree(trial_dir / OUTCOME)
                specs.append(str(path))
                self.jobs[trial.trial_id] = TrialJob(trial.trial_id, name, task, trial_dir, time.time())
            manifest = state / f"{name}.json"
            fs.atomic_write_json(manifest, SpecManifest(tuple(specs)).to_json())
        now = time.time()
        self.store.batches[name] = BatchRecord(job_id=None, session=session, submitted_at=now,
                                               tasks=len(chunk), gate=gate[0].name)
        for task, trial in enumerate(chunk):
            self.store.trials[trial.trial_id] = TrialRecord(batch=name, task=task)
        self.store.save()  # the name first: a kill during sbatch is found by it on resume
        script = ("#!/bin/sh\n# aorta-tui: one trial per array task (docs/slurm.md)\n"
                  f"exec {shlex.quote(sys.executable)} -m aorta_tui.executor.slurm_job --gate "
                  f"{shlex.quote(str(gate[0]))} {gate[1]} {shlex.quote(str(manifest))}\n")
        argv = ["sbatch", "--parsable", f"--job-name={name}", f"--array=0-{len(chunk) - 1}",
                # sbatch's default --export=ALL: the trial's environment comes from its spec
                # file whatever the job inherits, and --export=NONE doubled the time to start
                # an 8-task array on the local Slurm (6.5 s against 3.1 s, measured)
                f"--output={out_dir}/%a.out", "--no-requeue",
                f"--chdir={run_dir}", *self._options()]
        job_id = self._submit(argv, script)
        self.store.batches[name] = replace(self.store.batches[name], job_id=job_id,
                                           submitted_at=now)
        self.store.save()  # before any wait: a resume adopts these jobs
        for task, trial in enumerate(chunk):
            tj = self.jobs[trial.trial_id]
            tj.job_id, tj.submitted_at = f"{job_id}_{task}", now
        return job_id

    # -- waiting ---------------------------------------------------------------------------------

    def run(self, trial: ExecutorTrial, pspec: ProcessSpec, *, cancel: threading.Event,
            on_start: Callable[[int | None], None]) -> ProcessOutcome:
        job = self.jobs[trial.trial_id]
        outcome_path = job.trial_dir / OUTCOME
        terminal_at: float | None = None
        while True:
            if cancel.is_set():
                return self._cancelled_outcome(job, pspec)
            now = time.monotonic()
            if outcome_path.is_file():
                data = self._own_outcome(job, outcome_path)
                if data is not None:
                    if data.signal:
                        self._settle(job, cancel)
                    return self._settled(job, on_start, self._outcome_from_file(job, pspec, data))
            if now - self._last_query >= QUERY_EVERY_S:
                self._refresh()
            info = job.info
            if job.started_seen is None and info is not None and (
                    info.state in ("RUNNING", "COMPLETING") or (not info.alive and info.start)):
                job.started_seen = now
                self._place(job, info.state, info.node)
                on_start(None)  # the journal's trial_started: the job left the queue
            if self._past_backstop(job, pspec, now):
                job.orchestrator_state = "TIMEOUT"
                sc.scancel([job.job_id or ""])
            lost = info is None and now - self._mono(job.submitted_at) > VANISH_S
            if self._vanished(job, now):  # alive when last seen, listed nowhere since
                return self._settled(job, on_start, self._outcome_from_state(job, pspec, info))
            if (info is not None and not info.alive) or lost:
                terminal_at = terminal_at or now
                if now - terminal_at >= OUTCOME_LAG_S or (info is not None and info.state in TYPED_STATES
                                                          and info.state != "FAILED" and now - terminal_at >= 1.0):
                    return self._settled(job, on_start, self._outcome_from_state(job, pspec, info))
            cancel.wait(STAT_EVERY_S)

    def _own_outcome(self, job: TrialJob, path: Path) -> SlurmOutcome | None:
        """The job's outcome file, None while there is none of its own. A task of an earlier
        session's array, cancelled by a Ctrl-C that does not wait for it to end, can still
        write its outcome into the trial directory that the resume reused for the trial's new
        job: that file is not this job's result (the new task's own write replaces it), and
        it is read once, not at every look.

        A file that is no outcome (refused by the reader: not JSON, a field of the wrong type,
        over its size limit, a link) is not the trial's result either, as before the type: it
        is looked at again (the task's own atomic write may still replace it), and the trial is
        recorded from its job's state once Slurm ends it. Its located message is a warning
        (once), so the record's missing outcome has a reason."""
        try:
            st = path.stat()
        except OSError:
            return None
        seen = (st.st_ino, st.st_mtime_ns)
        if seen == job.foreign_outcome:
            return None
        try:
            data = SlurmOutcome.read(path)
        except FileNotFoundError:  # removed since the stat: none yet
            return None
        except AortaError as exc:
            self._warn(f"{exc.message}; it is not the trial's result")
            return None
        if data.node is not None and not data.node.written_by(job.job_id):
            job.foreign_outcome = seen
            return None
        return data

    def _settled(self, job: TrialJob, on_start: Callable[[int | None], None],
                 outcome: ProcessOutcome) -> ProcessOutcome:
        """A job that ended, whichever way it was seen to: announced if it never was (the
        journal still gets its trial_started), done, and placed in the grid by its outcome."""
        if job.started_seen is None:
            on_start(None)
        self._done(job)
        facts = outcome.executor
        assert facts is not None  # both readings of an ended job set the job's facts
        self._place(job, facts.state, facts.node)
        return outcome

    def _vanished(self, job: TrialJob, now: float) -> bool:
        """Alive when squeue last listed it, and listed by neither squeue nor sacct for
        VANISH_S since: LOST, with the state it vanished from (its outcome file, had it
        written one, was looked at first)."""
        info = job.info
        if info is None or not info.alive or job.gone_since is None or now - job.gone_since < VANISH_S:
            return False
        job.vanished_from, job.orchestrator_state = info.state, "LOST"
        return True

    def _warn(self, message: str) -> None:
        """A RunWarning event (journal first, then the front ends), each message once."""
        if self._bus is None:
            if message not in self.warnings:
                self.warnings.append(message)
            return
        if message in self._said:
            return
        self._said.add(message)
        from aorta_tui.core.events import RunWarning

        self._bus.emit(RunWarning(self._run_id, message=f"slurm: {message}", code="slurm"))

    def _place(self, job: TrialJob, state: str | None, node: str | None) -> None:
        """Where the trial runs and its job's state, for the TUI's grid (``slurm/jobs.json``):
        written at most once per squeue round (``_refresh``) and at the end, not per trial."""
        if self.store is None:
            return
        rec, place = self.store.trials.get(job.trial_id), JobPlace(state, node)
        if rec is not None and (rec.place or JobPlace(None, None)) != place:
            self.store.trials[job.trial_id] = replace(rec, place=place)
            self._placement_dirty = True

    def _save_placement(self) -> None:
        if self._placement_dirty and self.store is not None:
            self._placement_dirty = False
            self.store.save()

    def _done(self, job: TrialJob) -> None:
        job.done = True
        # a job that never started leaves its spec (the trial's environment, maybe tokens)
        (job.trial_dir / JOB_SPEC).unlink(missing_ok=True)

    def _settle(self, job: TrialJob, cancel: threading.Event) -> None:
        """A job that was signalled: wait (bounded) until Slurm says how it ended."""
        end = time.monotonic() + SETTLE_S
        while time.monotonic() < end and not cancel.is_set():
            self._refresh()
            if job.info is not None and not job.info.alive:
                return
            cancel.wait(0.2)

    def _mono(self, epoch: float) -> float:
        return time.monotonic() - (time.time() - epoch)

    def _past_backstop(self, job: TrialJob, pspec: ProcessSpec, now: float) -> bool:
        limit = pspec.timeout_s
        if limit is None or job.started_seen is None or job.orchestrator_state:
            return False
        return now - job.started_seen > limit + pspec.kill_grace_s + BACKSTOP_S

    def _refresh(self) -> None:
        with self._lock:
            self._last_query = time.monotonic()
            open_jobs = {j.job_id: j for j in self.jobs.values() if j.job_id and not j.done}
            try:
                infos = self._query_ids(list(open_jobs))
            except sc.SlurmCallError as exc:  # slurmctld restarting: keep the last view
                self._warn(f"squeue failed ({exc.message}); the jobs are asked again in "
                           f"{QUERY_EVERY_S:g} s")
                return
            self._record_seen(open_jobs, infos, mark_gone=True)
            self._save_placement()

    def _record_seen(self, open_jobs: dict[str, TrialJob], infos: dict[str, sc.JobInfo], *,
                     mark_gone: bool) -> None:
        """What squeue (or sacct) said of each open job; with ``mark_gone``, when one that it no
        longer lists was first missed (the gate's early queries do not: not listed *yet*)."""
        for job_id, job in open_jobs.items():
            if job_id in infos:
                job.info, job.gone_since = infos[job_id], None
            elif mark_gone and job.gone_since is None:
                job.gone_since = self._last_query

    def _query_ids(self, ids: list[str]) -> dict[str, sc.JobInfo]:
        if not ids:
            return {}
        infos = sc.squeue(ids)
        missing = [j for j in ids if j not in infos]
        if missing and self._sacct_works:
            got = sc.sacct(missing)
            if got is None:  # no accounting database here: squeue is all there is
                self._sacct_works = False
            else:
                infos.update(got)
        return infos

    # -- outcomes --------------------------------------------------------------------------------

    def _facts(self, job: TrialJob, data: SlurmOutcome | None) -> ExecutorFacts:
        """Where the trial ran, as result.json's ``process.executor`` records it (``run_s``
        is the caller's: the process's own wall time, or the job's)."""
        info = job.info
        node = (data.node if data is not None else None) or NodeFacts()  # absent: all None
        started = data.wrapper_started_at if data is not None else None
        state = job.orchestrator_state or (info.state if info else "LOST")
        if data is not None and not data.signal and (info is None or info.alive):
            state = "COMPLETED"  # the job wrote its outcome unsignalled; squeue has not caught up
        first_node = node.node or (info.node if info else None)
        ended = data.wrapper_ended_at if data is not None else None
        shape = distributed_shape(self.spec)
        return ExecutorFacts(
            kind="slurm", job_id=job.job_id, batch=job.batch, task=job.task,
            slurm_job_id=node.job_id,  # an array task's own id (SLURM_JOB_ID)
            state=state, node=first_node,
            # every node of the job (a distributed trial's srun torchrun ran on all of them)
            nodes=tuple(node.nodes) or ((first_node,) if first_node else ()),
            gpus={"SLURM_JOB_GPUS": node.job_gpus,
                  "CUDA_VISIBLE_DEVICES": node.cuda_visible_devices,
                  "ROCR_VISIBLE_DEVICES": node.rocr_visible_devices},
            submitted_at=job.submitted_at,
            started_at=started if started is not None else (info.start if info else None),
            ended_at=ended or (info.end if info else None),
            slurm_times=({"submit": info.submit, "start": info.start, "end": info.end}
                         if info else None),
            reason=_vanished_reason(job) or (info.reason if info else None),
            signal=data.signal if data is not None else None,
            adopted=job.adopted,
            # the task's wait at the gate for the orchestrator's go (the shared-filesystem check)
            gate_waited_s=data.gate_waited_s if data is not None else None,
            # srun torchrun across the job's nodes (slurm_launch); None: not written
            distributed=None if shape is None else {"nodes": shape[0], "ranks_per_node": shape[1],
                                                    "world_size": shape[0] * shape[1]},
            queue_wait_s=_queue_wait(job, info, started))

    def _outcome_from_file(self, job: TrialJob, pspec: ProcessSpec, data: SlurmOutcome
                           ) -> ProcessOutcome:
        # a copy: the read value stays as the file has it; Slurm's cancel, not this sweep's
        outcome = replace(data.process, cancelled=False,
                          executor=replace(self._facts(job, data), run_s=data.process.wall_s))
        # the node's kernel log stays out of the facts (result.json never held it): placement()
        # hands the classifier the typed value read here
        self._node_logs[job.job_id] = data.kernel_log
        return outcome

    def _outcome_from_state(self, job: TrialJob, pspec: ProcessSpec, info: sc.JobInfo | None
                            ) -> ProcessOutcome:
        """A job that ended without an outcome file (node failure, preemption, lost)."""
        from aorta_tui.trial.supervisor import ProcessOutcome

        for p in (pspec.stdout_path, pspec.stderr_path):
            p.parent.mkdir(parents=True, exist_ok=True)
            p.touch(exist_ok=True)  # the classifier reads both; the job never made them
        start = info.start if info and info.start else job.submitted_at
        end = info.end if info and info.end else time.time()
        facts = replace(self._facts(job, None),
                        run_s=max(0.0, end - start) if info and info.start else None)
        return ProcessOutcome(
            pid=None, exit_code=None, signal=None, core_dumped=False, timed_out=False,
            cancelled=False, hang=None, exec_error=None, wall_s=max(0.0, end - start),
            started_at=start, ended_at=end, peak_rss_kb=None, gpu_peak_mem_bytes=None,
            gpu_mem_reason="the Slurm job wrote no outcome", stdout_bytes=_size(pspec.stdout_path),
            stderr_bytes=_size(pspec.stderr_path), truncated=False,
            peak_rss_reason="the Slurm job wrote no outcome", timeout_s=pspec.timeout_s,
            # no hang_note: the trial's process was never seen, so there is no hang detector
            # that "could not fire" to report (its tier-2 info line said so for trials that
            # never launched); the typed job state is the verdict
            executor=facts,
        )

    def _cancelled_outcome(self, job: TrialJob, pspec: ProcessSpec) -> ProcessOutcome:
        """Ctrl-C of the sweep: no result (the resume runs it again); end() scancels it."""
        from aorta_tui.trial.supervisor import ProcessOutcome

        now = time.time()
        return ProcessOutcome(
            pid=None, exit_code=None, signal=None, core_dumped=False, timed_out=False,
            cancelled=True, hang=None, exec_error=None, wall_s=0.0, started_at=now, ended_at=now,
            peak_rss_kb=None, gpu_peak_mem_bytes=None, gpu_mem_reason=None, stdout_bytes=0,
            stderr_bytes=0, truncated=False,
            # no run_s: the job never ran for this sweep (and a cancelled trial has no result)
            executor=replace(self._facts(job, None), absent=frozenset({"run_s"})))

    def placement(self, outcome: Outcome | None) -> Placement | None:
        """Where the trial ran, for the classifier: the job's final state (the outcome's facts)
        and the node's kernel log (the typed value ``_outcome_from_file`` read and kept apart,
        taken once: the trial's record never holds it)."""
        facts = getattr(outcome, "executor", None)
        if not isinstance(facts, ExecutorFacts) or facts.kind != "slurm":
            return None
        klog = self._node_logs.pop(facts.job_id, None)  # as _outcome_from_file read it
        return Placement(job_id=facts.job_id, node=facts.node, state=facts.state,
                         reason=facts.reason, signal=facts.signal,
                         # a Slurm trial's outcome is a ProcessOutcome (its facts say so)
                         outcome_written=getattr(outcome, "pid", None) is not None,
                         kernel_events=None if klog is None else klog.events,
                         kernel_unavailable=None if klog is None else klog.unavailable)

    # -- the end ---------------------------------------------------------------------------------

    def end(self, *, interrupted: bool) -> None:
        """Jobs of this sweep whose result will not be recorded (Ctrl-C, stop_after): scancel."""
        self._save_placement()
        left = [t for t, j in self.jobs.items() if not j.done and j.job_id]
        if not left:
            return
        self._mark_cancelled(left)
        problem = sc.scancel([self.jobs[t].job_id or "" for t in left])
        if problem:
            self._warn(f"scancel failed ({problem}): cancel the run's jobs with `scancel "
                       f"--name=<batch>` (slurm/jobs.json names them)")
        # none of these jobs is to run any more: their specs go too (scancel does not wait, and
        # a task still starting then finds none; one of a later session's is not its own either)
        for t in left:
            (self.jobs[t].trial_dir / JOB_SPEC).unlink(missing_ok=True)

    def _mark_cancelled(self, trial_ids: list[str]) -> None:
        if self.store is None:
            return
        for tid in trial_ids:
            rec = self.store.trials.get(tid)
            if rec is not None:
                self.store.trials[tid] = replace(rec, cancelled_by_orchestrator=True)
        self.store.save()  # before scancel: a resume must not adopt them as cancelled by others


def _find_batch_ids(batches: dict[str, BatchRecord]) -> None:
    """A batch whose job id was never written (a kill between its sbatch call and the write):
    found by its job name, which was written before the call."""
    for name, batch in batches.items():
        if not batch.job_id:
            found = sc.squeue_by_name(name) or sc.sacct(name=name) or {}
            ids = {j.split("_", 1)[0] for j in found if "_" in j}
            if len(ids) == 1:
                batches[name] = replace(batch, job_id=ids.pop())  # the same key: no resize


def _queue_wait(job: TrialJob, info: sc.JobInfo | None, started: float | None) -> float | None:
    """Seconds from the submission to the task's start (the wrapper's own clock, else
    Slurm's); None: it never started."""
    if isinstance(started, (int, float)):
        return round(max(0.0, started - job.submitted_at), 3)
    if info is not None and info.start and info.submit and info.node:  # it did start
        return max(0.0, info.start - info.submit)
    return None


def _vanished_reason(job: TrialJob) -> str | None:
    if job.vanished_from is None:
        return None
    why = (" (Slurm drops an array task cancelled while pending without a final state)"
           if job.vanished_from == "PENDING" else "")
    return (f"it left squeue while {job.vanished_from} and was not listed again for "
            f"{VANISH_S:g} s{why}")


def _job_spec(pspec: ProcessSpec, cell: ExecutorCell, trial_dir: Path, batch: str) -> JobSpec:
    hang = pspec.hang
    return JobSpec(
        # whose spec it is: a resume writes the same path again for the trial's new job, and a
        # task of the cancelled array that starts late must not take it (slurm_job.run_trial)
        batch=batch,
        argv=tuple(pspec.argv), env=dict(pspec.env), cell_keys=tuple(sorted(cell.env)),
        cwd=str(pspec.cwd), stdout_path=str(pspec.stdout_path),
        stderr_path=str(pspec.stderr_path), timeout_s=pspec.timeout_s,
        kill_grace_s=pspec.kill_grace_s, trial_dir=str(trial_dir),
        hang=None if hang is None else HangSpec(window_s=hang.window_s, grace_s=hang.grace_s,
                                                disabled=tuple(sorted(hang.disabled))))


def _default_time(recipe: Recipe) -> str | None:
    """sbatch --time from timeout_per_trial: the limit plus 5 minutes, in whole minutes."""
    t = recipe.timeout_per_trial
    if not t:
        return None
    return str(int(-(-(float(t) + 300) // 60)))


def _marker_ok(marker: Path, token: str) -> bool:
    try:
        return marker.read_text().split()[0] == token
    except (OSError, IndexError, UnicodeDecodeError):
        return False


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _where(recipe: Recipe, path: str) -> str | None:
    try:
        return recipe.where(path)
    except Exception:
        return None
