"""The default isolation's trials, prepared ahead: a zygote of its own for every trial.

A trial of ``trial_isolation: process`` (the default) runs in a process no other trial touched.
What makes that slow is not the process but what it imports before its first step (torch and
``torch._dynamo``: 2-4 s per trial on the H200, all of it on one CPU), which upstream pays once
per sweep. Here each trial gets a zygote (:mod:`aorta_tui.trial.warm_zygote`) started for it
alone, with its cell's whole environment, which imports the workload's modules, forks exactly one
trial and leaves. The zygotes of the next ``ahead`` trials are started together, so their imports
run in parallel on the machine's cores, and a trial starts only once every zygote of its batch is
loaded: no import runs beside a trial's steps, whose timings stay the machine's alone.

What a trial can tell: it is a forked child of a process that was exec'd with its cell's
environment (every variable a fresh process would read at start-up or import is there from the
exec), imported modules, never initialised CUDA (the zygote refuses to fork otherwise) and
served nobody else. The per-trial variables (its id, directories, identity token, a trace's
collector) are set with ``putenv`` before it runs, as in warm mode, whose GPU check
(scripts/gpu_warm_check.py) shows each variable acting as in a fresh process.

A trial falls back to an exec'd process, said once per run, when its zygote could not load (an
import that fails, a workload whose import initialises CUDA) or when its final environment's
import-time variables differ from the prepared one's. ``trial_isolation: exec`` execs every trial.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_tui.trial.host import PlanLike, TrialHost
from aorta_tui.trial.supervisor import LaunchDeclined
from aorta_tui.trial.warm import WarmError, WarmLauncher, WarmPool, Zygote, start_zygote

if TYPE_CHECKING:
    from aorta_tui.recipe.model import Recipe
    from aorta_tui.registry.workload import Workload
    from aorta_tui.trial import containment
    from aorta_tui.trial.supervisor import ProcessSpec
    from aorta_tui.trial.warm import _ForkedProc

# Each prepared zygote holds torch and the workload's imports (0.5-1 GB) until its trial runs,
# and its import takes one core: the batch is bounded by both.
MAX_AHEAD = 8
_GIB_PER_ZYGOTE = 2.0  # MemAvailable per prepared zygote, with margin for the running trial


def default_ahead(cpus: int | None = None, mem_available_gib: float | None = None) -> int:
    """How many trials to prepare at once: half the usable cores (the other half for the
    orchestrator and the trial's own start), at most one per ``_GIB_PER_ZYGOTE`` of free
    memory, at most MAX_AHEAD, at least 1."""
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if mem_available_gib is None:
        mem_available_gib = _mem_available_gib()
    by_mem = MAX_AHEAD if mem_available_gib is None else int(mem_available_gib // _GIB_PER_ZYGOTE)
    return max(1, min(MAX_AHEAD, cpus // 2, by_mem))


def _mem_available_gib() -> float | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / (1 << 20)
    except (OSError, ValueError, IndexError):
        return None
    return None


class OwnZygoteLauncher(WarmLauncher):
    """A warm launcher whose zygote serves this one trial: it waits for the trial's whole batch
    (in `spawned` and ``waited_for_zygote_ms``, as a warm trial's wait for its zygote), declines
    (the trial is exec'd) when its zygote did not load, and releases the zygote once forked."""

    zygote_kind = "own"

    def __init__(self, zygote: Zygote, pool: PreparedPool) -> None:
        super().__init__(zygote, pool.cancel)
        self.pool = pool

    def _wait(self) -> None:
        z = self.zygote
        try:
            for other in (z, *self.pool.prepared.values()):  # no import may run beside the trial
                other.wait_ready(self.cancel)
        except WarmError:  # cancelled while they load: exec'd, and the cancel ends it at once
            z.close()
            raise LaunchDeclined("cancelled while its zygote was loading") from None
        if not z.ready:
            self.pool.note(f"its zygote did not load ({z.error})")
            z.close()
            raise LaunchDeclined(z.error or "its zygote did not load")

    def launch(self, spec: ProcessSpec, scope: containment.Scope) -> _ForkedProc:
        try:
            return super().launch(spec, scope)
        finally:  # forked, declined or failed: the pool reaps it at close (it left no list)
            self.pool.release(self.zygote)


class PreparedPool:
    """The zygotes of the next trials of one sweep session, each for one trial."""

    def __init__(self, run_dir: Path, modules: list[str], cancel: threading.Event | None,
                 order: list[tuple[str, str, dict[str, str]]], ahead: int) -> None:
        self.run_dir = run_dir
        self.modules = modules
        self.cancel = cancel
        self.ahead = max(1, ahead)
        # (trial_id, environment, its cell's trial environment without per-trial variables)
        self.order = order
        self.index = {tid: i for i, (tid, _e, _env) in enumerate(order)}
        self.prepared: dict[str, Zygote] = {}
        self.spent: list[Zygote] = []
        self.notes: list[str] = []
        self._said: set[str] = set()
        self._started = 0

    def start_batch(self, first: int) -> None:
        """Start the zygotes of trials ``first .. first + ahead - 1`` of the order, together."""
        for tid, environment, env in self.order[first:first + self.ahead]:
            self._started += 1
            log = self.run_dir / "warm" / f"prepared-{self._started}.log"
            # torch only where the workload's preload names it (Workload.preload): a trial
            # whose workload never imports torch must not find it imported
            self.prepared[tid] = start_zygote(WarmPool.key(environment, env), env, self.modules,
                                              Path.cwd(), log, run_dir=self.run_dir, with_torch=False)

    def launcher_for(self, trial_id: str, environment: str, env: dict[str, str]) -> WarmLauncher | None:
        """The launcher of ``trial_id``, forked from its own zygote, or None: exec it (why is in
        :attr:`notes`). Starts the next batch when this trial's is used up; never waits."""
        i = self.index.get(trial_id)
        if i is None:
            return None
        for tid in [t for t in self.prepared if self.index[t] < i]:  # skipped trials (stop_after)
            self.prepared.pop(tid).close()
        z = self.prepared.pop(trial_id, None)
        if z is None:  # the batch is used up: the next one starts here
            self.start_batch(i)
            z = self.prepared.pop(trial_id)
        if z.key != WarmPool.key(environment, env):
            self.note("its environment's import-time variables differ from its cell's "
                      "(e.g. a trace's injected variable)")
            z.close()
            return None
        return OwnZygoteLauncher(z, self)

    def note(self, why: str) -> None:
        if why not in self._said:
            self._said.add(why)
            self.notes.append(f"a trial runs as an exec'd process, not prepared ahead: {why}")

    def take_notes(self) -> list[str]:
        notes, self.notes = self.notes, []
        return notes

    def release(self, z: Zygote) -> None:
        """The zygote forked its trial: end of its stream, so it leaves; reaped at close."""
        with contextlib.suppress(OSError):
            z.sock.close()
        self.spent = [s for s in [*self.spent, z] if s.proc.poll() is None]

    def close(self) -> None:
        for z in [*self.prepared.values(), *self.spent]:
            z.close()
        self.prepared.clear()
        self.spent.clear()


def prepared_problem(recipe: Recipe, plan: PlanLike, workload_cls: type[Workload] | None
                     ) -> str | None:
    """Why this run's trials cannot be prepared ahead (they are exec'd then), or None."""
    from aorta_tui.trial.warm import require_fork, warm_problems

    if recipe.trial_isolation != "process":
        return f"trial_isolation: {recipe.trial_isolation}"
    if workload_cls is None:
        return "no registered workload"
    if recipe.collect:  # ncu / rocprofv3 / proton wrap the trial's exec'd argv
        return f"collectors ({', '.join(recipe.collect)}) wrap each trial's command"
    try:
        require_fork()
    except Exception as exc:
        return str(exc)
    problems = warm_problems(recipe, plan, workload_cls)
    return problems[0] if problems else None


@contextlib.contextmanager
def prepared_pool(sweep: TrialHost, run_dir: Path, pending: list[Any]) -> Iterator[PreparedPool | None]:
    """The session's prepared zygotes (None where the trials are exec'd), the first batch
    started at once, so its imports overlap the journal's set-up and the snapshots."""
    from aorta_tui.trial.warm import preload_modules, trial_base_env

    if not pending or prepared_problem(sweep.recipe, sweep.plan, sweep.workload_cls) is not None:
        yield None
        return
    cells = {t.cell: sweep.plan.cell(t.cell) for t in pending}
    envs = {name: trial_base_env(sweep, c) for name, c in cells.items()}  # one per cell, not per trial
    order = [(t.trial_id, cells[t.cell].environment, envs[t.cell]) for t in pending]
    pool = PreparedPool(run_dir, preload_modules(sweep.workload_cls, list(cells.values())), sweep.cancel,
                        order, default_ahead())
    try:
        pool.start_batch(0)
        yield pool
    finally:
        pool.close()
