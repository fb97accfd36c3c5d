"""Tier 2: decide that a running trial hangs, from three signals held over a window.

A trial hangs when at least two of these hold for ``window_s``, counted only after the
first ``grace_s`` seconds of the trial (start-up - imports, data loading, compilation - is
often silent and is never held against it):

- ``output_silence``: no byte on stdout or stderr.
- ``gpu_idle``: every GPU the process tree has a context on reports 0 % utilisation (vendor
  tool, device-wide). Not available without a tool, or when the tree has no GPU context.
- ``io_idle``: ``rchar + wchar`` summed over ``/proc/<pid>/io`` of the tree's *workers* is
  unchanged. A launcher (torchrun, ``python -m torch.distributed.run``, mpirun, ...; see
  :func:`proctree.launcher_name`) and the processes above it (a wrapping shell) are
  supervisors, not workers: their I/O is bookkeeping - torchrun's agent polls the rendezvous
  store it hosts about once a second, for as long as the ranks run - so it is not counted.
  While no worker runs (only a launcher: rendezvous, restart, teardown) the signal is not
  available, so a launcher that is slow to notice its ranks finished is never called a hang.
  Inside a worker, the I/O of a TCPStore server thread (``pt_tcpstore*``: a rank that hosts
  the store answers the other ranks' once-a-second polls) is not counted either.

When a signal is not available or disabled, the remaining two must both hold; with fewer
than two usable signals the detector cannot fire (``HangMonitor.cannot_fire`` says why).

CPU time is deliberately *not* an activity signal: a hung NCCL/RCCL collective busy-polls at
100 % CPU, so counting CPU would hide exactly the hangs this tier is for. The report still
records the tree's CPU seconds over the window, so a reader can tell a spinning hang from a
blocked one.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aorta_tui.classify.model import GPU_IDLE, IO_IDLE, OUTPUT_SILENCE, SIGNAL_NAMES
from aorta_tui.core.hang_report import HangReport
from aorta_tui.trial import proctree

if TYPE_CHECKING:
    from aorta_tui.trial.gpu_probe import GpuSampler

SIGNAL_DESCRIPTIONS = {
    OUTPUT_SILENCE: "no output on stdout/stderr",
    GPU_IDLE: "GPU utilisation 0 % on the tree's GPUs",
    IO_IDLE: "no read/write bytes by the tree's workers (/proc/<pid>/io rchar+wchar; launchers not counted)",
}
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class HangPolicy:
    """``window_s``/``grace_s`` are the recipe's ``hang_window_sec``/``hang_grace_period_at_start``.

    ``disabled`` may be the recipe's whole ``disable_detectors``: only the hang signal names
    (bare or ``tier2:``-prefixed) are kept; ids of other tiers are not this policy's business
    (the recipe layer validates names against ``classify.builtin_detector_ids()``).
    """

    window_s: float = 30.0
    grace_s: float = 60.0
    disabled: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.window_s > 0:
            raise ValueError(f"hang window must be > 0 seconds, got {self.window_s!r}")
        if not self.grace_s >= 0:
            raise ValueError(f"hang grace period must be >= 0 seconds, got {self.grace_s!r}")
        names = {n.strip().removeprefix("tier2:") for n in self.disabled}
        object.__setattr__(self, "disabled", frozenset(names & set(SIGNAL_NAMES)))

    @property
    def check_interval_s(self) -> float:
        """How often the monitor looks: a quarter window, between 50 ms and 2 s."""
        return min(max(self.window_s / 4.0, 0.05), 2.0)

    @property
    def wants_gpu(self) -> bool:
        return GPU_IDLE not in self.disabled


class HangMonitor:
    """Evaluated by the worker's event loop at ``next_check`` (monotonic seconds).

    The worker tells it about output (``note_output``); I/O is sampled from ``/proc`` at each
    check; GPU idleness comes from the trial's :class:`GpuSampler` when one runs.
    """

    def __init__(
        self,
        policy: HangPolicy,
        root_pid: int,
        started: float,
        *,
        gpu: GpuSampler | None = None,
        gpu_unavailable: str | None = None,
    ) -> None:
        self.policy = policy
        self.root_pid = root_pid
        self.started = started
        self.hold_from = started + policy.grace_s
        self.next_check = self.hold_from  # nothing to decide during the grace period
        self.gpu = gpu
        self.gpu_unavailable = gpu_unavailable or (
            None if gpu is not None else "no GPU sampler for this trial"
        )
        self._last_output = started
        self._last_io: tuple[frozenset[int], int] | None = None
        self._io_scope: str | None = None
        self._io_since: float | None = None
        self._io_reason: str | None = None
        self._cpu: deque[tuple[float, int]] = deque()

    def note_output(self, now: float) -> None:
        self._last_output = now

    def cannot_fire(self) -> str | None:
        """Why the detector can never fire under this policy (fewer than two signals)."""
        usable = [n for n in SIGNAL_NAMES if n not in self.policy.disabled]
        if GPU_IDLE in usable and self.gpu is None:
            usable.remove(GPU_IDLE)
        if len(usable) < 2:
            return f"only {usable or 'no signal'} usable; a hang needs two of {list(SIGNAL_NAMES)}"
        return None

    def check(self, now: float) -> HangReport | None:
        """Sample, update the held times, and return a report when two signals hold."""
        self.next_check = now + self.policy.check_interval_s
        if now < self.hold_from:
            return None
        signals: dict[str, float | None] = {}
        unavailable: dict[str, str] = {}
        for name in self.policy.disabled:
            unavailable[name] = "disabled (disable_detectors)"

        if OUTPUT_SILENCE not in self.policy.disabled:
            signals[OUTPUT_SILENCE] = now - max(self._last_output, self.hold_from)

        cpu_s = self._sample_tree(now)
        if IO_IDLE not in self.policy.disabled:
            if self._io_since is None:
                unavailable[IO_IDLE] = self._io_reason or "process I/O counters unreadable"
            else:
                signals[IO_IDLE] = now - max(self._io_since, self.hold_from)

        if GPU_IDLE not in self.policy.disabled:
            held, reason = self._gpu_idle_held(now)
            if reason is not None:
                unavailable[GPU_IDLE] = reason
            else:
                signals[GPU_IDLE] = held

        holding = [n for n, v in signals.items() if v is not None and v >= self.policy.window_s]
        if len(holding) < 2:
            return None
        return HangReport(
            signals={n: signals.get(n) for n in SIGNAL_NAMES if n not in unavailable},
            unavailable=unavailable,
            window_s=self.policy.window_s,
            grace_s=self.policy.grace_s,
            elapsed_s=now - self.started,
            cpu_s_in_window=cpu_s,
            io_scope=self._io_scope,
        )

    def _sample_tree(self, now: float) -> float | None:
        """Update the I/O baseline; return the tree's CPU seconds over the last window."""
        stats = proctree.all_stats()
        pids = proctree.tree_pids(self.root_pid, pgid=self.root_pid, stats=stats)
        supervisors = _supervisors(pids, stats)
        workers = pids - supervisors.keys()
        io_total = 0
        io_seen: set[int] = set()
        ticks = 0
        for pid in pids:
            cpu = proctree.cpu_ticks(pid)
            if cpu is not None:
                ticks += cpu
            if pid in workers:
                value = proctree.io_bytes(pid, exclude_threads=proctree.STORE_SERVER_THREADS)
                if value is not None:
                    io_total += value
                    io_seen.add(pid)
        self._io_scope = _describe_scope(len(io_seen), supervisors) if supervisors else None
        if not io_seen:
            self._io_since = None
            self._last_io = None
            if not pids:
                self._io_reason = "no process of the tree left to sample"
            elif not workers:
                names = ", ".join(f"{n} (pid {p})" for p, n in sorted(supervisors.items()) if n)
                self._io_reason = (f"only the launcher runs ({names}): no worker process to watch "
                                   "(rendezvous, restart or teardown)")
            else:
                self._io_reason = "/proc/<pid>/io is not readable (needs ptrace rights on the process)"
        elif self._last_io != (frozenset(io_seen), io_total) or self._io_since is None:
            # Any change (including a worker joining or leaving) is activity.
            self._last_io = (frozenset(io_seen), io_total)
            self._io_since = now
        self._cpu.append((now, ticks))
        while len(self._cpu) > 1 and self._cpu[0][0] < now - self.policy.window_s:
            self._cpu.popleft()
        if len(self._cpu) < 2:
            return None
        return max(0, self._cpu[-1][1] - self._cpu[0][1]) / _CLK_TCK

    def _gpu_idle_held(self, now: float) -> tuple[float | None, str | None]:
        if self.gpu is None:
            return None, self.gpu_unavailable or "no GPU sampler"
        reading = self.gpu.latest_utilisation()
        if reading is None:
            return None, "no GPU utilisation sample yet"
        if reading.idle is None:
            return None, reading.reason or "GPU utilisation not measurable"
        stale_after = 3 * self.gpu.interval_s + 5.0  # the tool may take up to 5 s to answer
        if now - reading.at > stale_after:
            return None, f"the last GPU sample is {now - reading.at:.0f} s old (the tool is slow)"
        if not reading.idle or reading.idle_since is None:
            return None, None
        return now - max(reading.idle_since, self.hold_from), None


def _supervisors(pids: set[int], stats: list[proctree.ProcStat]) -> dict[int, str]:
    """Launchers in ``pids`` and their ancestors inside ``pids`` -> the launcher name (``""``
    for an ancestor, e.g. the shell that started torchrun and waits for it)."""
    parent = {st.pid: st.ppid for st in stats}
    out: dict[int, str] = {}
    for pid in pids:
        name = proctree.launcher_name(proctree.cmdline(pid))
        if name is None:
            continue
        out[pid] = name
        up = parent.get(pid)
        while up is not None and up in pids and up not in out:
            out[up] = ""
            up = parent.get(up)
    return out


def _describe_scope(n_workers: int, supervisors: dict[int, str]) -> str:
    launchers = ", ".join(f"{n} pid {p}" for p, n in sorted(supervisors.items()) if n)
    others = sum(1 for n in supervisors.values() if not n)
    text = f"{n_workers} worker process(es), not the launcher ({launchers})"
    if others:
        text = text[:-1] + f" and {others} process(es) above it)"
    return text
