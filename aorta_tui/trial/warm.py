"""``trial_isolation: warm``: trials forked from a zygote that paid start-up and ``import torch``.

The orchestrator starts one zygote (:mod:`aorta_tui.trial.warm_zygote`) per (environment,
import-time variables) when the trials begin - all of them at once, so they import in
parallel - and each trial is then forked from its zygote instead of exec'd. What a trial worker
does is unchanged (:mod:`aorta_tui.trial.worker` runs in the fork); what the supervisor
does is unchanged too (:func:`aorta_tui.trial.supervisor.run_process` with a ``launcher``): the forked
trial is re-parented to the orchestrator, which is a subreaper, so it waits for it, reads its
status and rusage, pumps its pipes, times it out, detects its hangs and kills its process group
as for any trial. It is put into its trial's cgroup (or made a subreaper) before it runs.

Which variables can differ between the trials of one zygote is :mod:`aorta_tui.trial.warm_vars`;
:func:`check_warm` refuses a recipe whose cells change an import-time variable, and recipes warm
mode cannot serve (probe commands, docker environments, torchrun launches), exit 2.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_tui.core import spawn_gate
from aorta_tui.core.errors import EnvironmentProblem, UsageError
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.trial import containment, orphans
from aorta_tui.trial.host import CellLike, PlanLike, TrialHost
from aorta_tui.trial.supervisor import peak_rss_kb
from aorta_tui.trial.warm_vars import import_time_items, import_time_reader, zygote_env
from aorta_tui.trial.warm_zygote import recv_message, send_message

if TYPE_CHECKING:
    from aorta_tui.recipe.model import Recipe
    from aorta_tui.registry.workload import Workload
    from aorta_tui.trial.supervisor import ProcessSpec

# One zygote per (environment, import-time variables): cells that differ in an import-time
# variable each get one, all started at once. Each holds torch and the workload's imports
# (0.5-1 GB); past this many the recipe is refused rather than filling the machine.
MAX_ZYGOTES = 4
READY_TIMEOUT_S = 600.0  # a cold `import torch` over a network filesystem can take minutes
REPLY_TIMEOUT_S = 30.0
_CLOSE_WAIT_S = 2.0


class WarmError(Exception):
    """A zygote could not fork a trial (the trial is reported as not started, with this)."""


# -- the recipe check ---------------------------------------------------------------------------


def warm_problems(recipe: Recipe, plan: PlanLike, workload_cls: type[Workload] | None) -> list[str]:
    """Why no trial of the recipe can be forked from a zygote (each reason once), for warm mode
    and for the default's trials prepared ahead (trial/prepared.py)."""
    problems: list[str] = []
    if recipe.mode != "triage":
        problems.append("a probe recipe runs an opaque command: there is no trial worker to fork")
    executor = recipe.executor.kind
    if executor != "local":
        problems.append(f"executor: {executor} runs each trial on another machine (no zygote there)")
    launch = None if workload_cls is None else workload_cls.launch
    for i, cell in enumerate(plan.cells):
        if cell.docker:
            problems.append(f"cells[{i}] ({cell.name}): environment {cell.environment!r} runs in "
                            "docker (a container per trial cannot be forked from a zygote)")
        world = int((cell.workload_config or {}).get("world_size", 1) or 1)
        if launch is not None and launch.mode == "torchrun" and world > 1:
            problems.append(f"cells[{i}] ({cell.name}): world_size {world} runs under torchrun")
    return problems


def check_warm(recipe: Recipe, plan: PlanLike, workload_cls: type[Workload] | None) -> None:
    """Raise a located UsageError (exit 2) listing every reason the recipe cannot run warm."""
    where = _where(recipe, "trial_isolation")
    problems = warm_problems(recipe, plan, workload_cls) + _import_time_changes(plan)
    if problems:
        raise UsageError(
            f"trial_isolation: warm cannot run this recipe ({len(problems)} problem(s)):\n  - "
            + "\n  - ".join(problems),
            hint="use trial_isolation: process (the default) for it; an import-time variable "
            "set in extra_env or the environment (the same for every trial) is fine",
            location=where,
        )


def zygote_keys(plan: PlanLike) -> dict[tuple[Any, ...], list[int]]:
    """The zygotes a plan needs (environment, import-time values of the cell) -> its cells.
    A variable read before a fork could change it (warm_vars.IMPORT_TIME) is honoured by giving
    each distinct value a zygote started with it, as a fresh process would be."""
    keys: dict[tuple[Any, ...], list[int]] = {}
    for i, cell in enumerate(plan.cells):
        keys.setdefault((cell.environment, import_time_items(cell.env)), []).append(i)
    return keys


def _import_time_changes(plan: PlanLike) -> list[str]:
    """More distinct import-time sets than zygotes allowed: each listed with its cells."""
    keys = zygote_keys(plan)
    if len(keys) <= MAX_ZYGOTES:
        return []
    out = [f"the cells need {len(keys)} zygotes (at most {MAX_ZYGOTES}): one per environment and "
           "set of import-time variables"]
    for (environment, items), cells in keys.items():
        names = ", ".join(f"{k} (read by {import_time_reader(k)})" for k, _ in items) or "none"
        where = ", ".join(f"cells[{i}] ({plan.cells[i].name})" for i in cells)
        out.append(f"environment {environment!r}, import-time variables {names}: {where}")
    return out


def _where(recipe: Recipe, path: str) -> str | None:
    try:
        return recipe.where(path)
    except Exception:
        return None


# -- the zygotes --------------------------------------------------------------------------------


@dataclass
class Zygote:
    key: tuple[Any, ...]
    proc: subprocess.Popen[bytes]
    sock: socket.socket
    log_path: Path
    info: dict[str, Any] = field(default_factory=dict)
    ready: bool = False
    error: str | None = None
    forks: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    token: str = ""  # in its exec-time environ, which its forks show: trial/orphans.py

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, cancel: threading.Event | None = None) -> None:
        if self.ready or self.error:
            return
        end = time.monotonic() + READY_TIMEOUT_S
        while not _readable(self.sock, 0.1):
            if cancel is not None and cancel.is_set():
                raise WarmError("cancelled while the warm zygote was starting")
            if self.proc.poll() is not None:
                break
            if time.monotonic() > end:
                self.error = f"not ready after {READY_TIMEOUT_S:g} s"
                return
        try:
            msg, _ = recv_message(self.sock)
        except (OSError, ValueError) as exc:
            msg = None
            self.error = str(exc)
        if msg is None or msg.get("error"):
            self.error = (msg or {}).get("error") or self.error or (
                f"exited before it was ready ({self.exit_status()}; {self._log_tail()})")
            return
        if msg.get("problem"):
            self.error = msg["problem"]
            return
        self.info, self.ready = msg, True

    def exit_status(self, wait_s: float = 1.0) -> str:
        """How the zygote ended, in words ("killed by SIGKILL", "exit status 1"): its socket
        closes a moment before the kernel lets it be reaped, so wait that moment."""
        try:
            code = self.proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            return "still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"

    def _log_tail(self) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return f"no log at {self.log_path}"
        return f"last line of {self.log_path}: {text[-1][:300]}" if text else f"{self.log_path} is empty"

    def fork(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        with self.lock:
            try:
                send_message(self.sock, request, fds)
                if not _readable(self.sock, REPLY_TIMEOUT_S):
                    raise WarmError(f"the warm zygote (pid {self.pid}) did not answer in "
                                    f"{REPLY_TIMEOUT_S:g} s")
                reply, _ = recv_message(self.sock)
            except OSError as exc:
                raise WarmError(f"the warm zygote (pid {self.pid}) is gone ({exc}; "
                                f"{self.exit_status()}; {self._log_tail()})") from None
        if reply is None:
            raise WarmError(f"the warm zygote (pid {self.pid}) is gone ({self.exit_status()}; "
                            f"{self._log_tail()})")
        if reply.get("error"):
            raise WarmError(f"the warm zygote (pid {self.pid}) refused to fork: {reply['error']}")
        self.forks += 1
        return reply

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()  # end of stream: the zygote leaves
        try:
            self.proc.wait(_CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(_CLOSE_WAIT_S)


def _readable(sock: socket.socket, timeout_s: float) -> bool:
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(poller.poll(int(timeout_s * 1000)))


def start_zygote(key: tuple[Any, ...], env: dict[str, str], modules: list[str], cwd: Path,
                 log_path: Path, *, run_dir: Path, with_torch: bool = True) -> Zygote:
    """A zygote whose output goes to ``log_path`` (beneath ``run_dir``, reached through the
    run's file layer: no link followed)."""
    with RunDirFS(run_dir) as fs:
        log_fd = fs.open_log(log_path, append=True)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    token = orphans.new_token()
    log = os.fdopen(log_fd, "ab")  # handed to the child, closed here after the start
    try:
        proc = spawn_gate.popen(
            [sys.executable, "-m", "aorta_tui.trial.warm_zygote", *([] if with_torch else ["--no-torch"]),
             str(theirs.fileno()), *modules],
            env={**zygote_env(env), orphans.ZYGOTE_TOKEN_VAR: token}, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            pass_fds=(theirs.fileno(),), start_new_session=True, close_fds=True,
        )
    finally:
        log.close()
        theirs.close()
    return Zygote(key, proc, ours, log_path, token=token)


class WarmLauncher:
    """What :func:`aorta_tui.trial.supervisor.run_process` calls instead of ``Popen`` for one trial."""

    zygote_kind = "shared"  # the trial's timeline says whose zygote it was forked from

    def __init__(self, zygote: Zygote, cancel: threading.Event | None = None) -> None:
        self.zygote = zygote
        self.cancel = cancel

    def _wait(self) -> None:
        """The first trial of a zygote waits for its import (in `spawned`)."""
        self.zygote.wait_ready(self.cancel)

    def launch(self, spec: ProcessSpec, scope: containment.Scope) -> _ForkedProc:
        z = self.zygote
        waited = time.monotonic_ns()
        self._wait()
        waited = time.monotonic_ns() - waited
        if not z.ready:
            raise WarmError(f"the warm zygote (pid {z.pid}) did not start: {z.error}")
        ok, why = containment._become_subreaper()
        if not ok:
            raise WarmError(f"the orchestrator cannot become a subreaper ({why}): a forked trial "
                            "would not be its child")
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        go_r, go_w = os.pipe2(os.O_CLOEXEC)
        request = {
            "op": "fork", "spec": spec.argv[-1], "env": spec.env, "cwd": str(spec.cwd),
            "subreaper": isinstance(scope, containment.SubreaperScope),
            "warm": {"zygote": self.zygote_kind, "zygote_pid": z.pid, "torch_import_ns": z.info.get("torch_import_ns"),
                     "zygote_loaded_ns": z.info.get("loaded_ns"), "trial_in_zygote": z.forks + 1,
                     "waited_for_zygote_ms": round(waited / 1e6, 3)},
        }
        try:
            reply = z.fork(request, [out_w, err_w, go_r])
        except BaseException:
            for fd in (out_r, err_r, go_w):
                os.close(fd)
            raise
        finally:
            for fd in (out_w, err_w, go_r):
                os.close(fd)
        pid = int(reply["pid"])
        if isinstance(scope, containment.CgroupScope):
            with contextlib.suppress(OSError):  # checked by the caller (scope.inside)
                os.write(scope.procs_fd, str(pid).encode())
        proc = _ForkedProc(pid, out_r, err_r, rss_floor_kb=peak_rss_kb(z.pid))
        proc.spawned_ns = time.monotonic_ns()  # before the go: the trial's marks come after it
        try:
            os.write(go_w, b"g")
        finally:
            os.close(go_w)
        return proc


class _ForkedProc:
    """The parts of ``subprocess.Popen`` the supervisor uses, for a trial forked by a zygote."""

    def __init__(self, pid: int, out_fd: int, err_fd: int, *, rss_floor_kb: int | None) -> None:
        self.pid = pid
        self.stdout = os.fdopen(out_fd, "rb", buffering=0)
        self.stderr = os.fdopen(err_fd, "rb", buffering=0)
        self.returncode: int | None = None
        self.rss_floor_kb = rss_floor_kb
        self.spawned_ns = 0
        self.rss_floor_reason = "a forked trial starts with the warm zygote's pages"


class WarmPool:
    """The zygotes of one sweep session, started together, closed at its end."""

    def __init__(self, run_dir: Path, modules: list[str], cancel: threading.Event | None) -> None:
        self.run_dir = run_dir
        self.modules = modules
        self.cancel = cancel
        self.zygotes: dict[tuple[Any, ...], Zygote] = {}

    @staticmethod
    def key(environment: str, env: dict[str, str]) -> tuple[Any, ...]:
        return (environment, import_time_items(zygote_env(env)))

    def start(self, environment: str, env: dict[str, str]) -> Zygote:
        key = self.key(environment, env)
        z = self.zygotes.get(key)
        if z is None or z.error or z.proc.poll() is not None:
            if z is not None:
                z.close()
            n = len(self.zygotes) + 1
            z = start_zygote(key, env, self.modules, Path.cwd(), self.run_dir / "warm" / f"zygote-{n}.log",
                             run_dir=self.run_dir)
            self.zygotes[key] = z
        return z

    def launcher(self, environment: str, env: dict[str, str]) -> WarmLauncher:
        """The launcher of a trial with ``env``: its zygote is the one started with env's own
        import-time values (a new one for a set not seen yet, e.g. a trace's injected variable)."""
        return WarmLauncher(self.start(environment, env), self.cancel)

    def launcher_for(self, trial_id: str, environment: str, env: dict[str, str]) -> WarmLauncher:
        """The orchestrator's call, as for a prepared pool (trial/prepared.py): any trial of a
        zygote's key is forked from it."""
        return self.launcher(environment, env)

    def take_notes(self) -> list[str]:
        return []

    def close(self) -> None:
        for z in self.zygotes.values():
            z.close()
        self.zygotes.clear()


@contextlib.contextmanager
def warm_pool(sweep: TrialHost, run_dir: Path, pending: list[Any]) -> Iterator[WarmPool | None]:
    """The sweep's zygotes (``None`` unless the recipe asks for warm trials), pre-started for
    every (environment, import-time variables) of the pending trials."""
    recipe = sweep.recipe
    if recipe.trial_isolation != "warm" or recipe.mode != "triage" or not pending:
        yield None
        return
    cls = sweep.workload_cls
    modules = preload_modules(cls, [sweep.plan.cell(t.cell) for t in pending])
    pool = WarmPool(run_dir, modules, sweep.cancel)
    try:
        for spec in pending:
            cell = sweep.plan.cell(spec.cell)
            pool.start(cell.environment, trial_base_env(sweep, cell))
        yield pool
    finally:
        pool.close()


def preload_modules(cls: type[Workload] | None, cells: list[CellLike]) -> list[str]:
    """What the zygote imports before it forks: the workload's module and what its trials'
    setup and first step import (``Workload.preload_modules``), so no forked trial imports them."""
    if cls is None:
        return []
    from aorta_tui.registry.workload import validate_config

    configs = []
    for cell in {id(c): c for c in cells}.values():
        try:
            configs.append(validate_config(cls.config_schema, cell.workload_config or {}))
        except Exception:  # a bad config fails its own trial, with its own message
            continue
    return list(dict.fromkeys([cls.__module__, *cls.preload_modules(configs)]))


def trial_base_env(sweep: TrialHost, cell: CellLike) -> dict[str, str]:
    """A cell's trial environment without the per-trial variables (the zygote's key)."""
    return zygote_env({**sweep.base_env(), **cell.env, "PYTHONUNBUFFERED": "1"})


def require_fork() -> None:
    if not hasattr(os, "fork") or not hasattr(socket, "send_fds"):
        raise EnvironmentProblem("trial_isolation: warm needs fork() and descriptor passing "
                                 "(Linux, Python 3.9+)")
