"""Which processes a run started, proved by a secret they carry, and ending them on resume.

A SIGKILLed orchestrator (a lost SSH session, the OOM killer) leaves its running trial behind.
The resume must end it before it runs that trial again, and must end nothing else: a journal
line is only text, and anyone who can write the run directory can write one naming any pid
(a process group leader's pid and start time are readable by anyone in ``/proc``). So a pid
in the journal is never a reason to signal anything.

Instead, every process a run starts carries a secret token in its environment, minted just
before the process is created:

* ``AORTA_TRIAL_TOKEN``: one per trial attempt, in the trial's environment (every process of
  the trial inherits it);
* ``AORTA_ZYGOTE_TOKEN``: one per warm zygote (``trial_isolation: warm``), in the zygote's
  exec-time environment. A trial forked from a zygote shows the zygote's exec-time environment
  in ``/proc/<pid>/environ`` (its own environment is set with ``putenv`` after the fork, which
  ``/proc`` does not show), so the zygote's token is what proves a forked trial is the run's.

The journal's ``trial_launch`` line, written *before* the process exists, holds only digests:
``sha256(run id, token)``. A resume reads ``/proc/*/environ`` and ends exactly the processes
whose token hashes, with its own run's id, to a digest of a trial that did not finish - with
their descendants, and their trial cgroup when they run in one. The run id, not the run
directory's path: a run directory moved or renamed while its trial still ran (``mv RUN
renamed``, issue 37 item 1) is the same run, and its orphan must be ended, not called forged.
A forger can neither plant a token in an unrelated process's environment nor compute a digest
for a token only a live trial's environment holds (a digest copied from another run's journal
names the other run's id, and does not match). A line naming a live process that carries no
such token is refused, and the resume says so. Runs made before the id was the key (their
digests bound to the directory's real path) are still matched by that path.

No ``fsync`` for the ``trial_launch`` line: it reaches the kernel before the process is
created (one ``write``), which no process death can undo; a machine crash ends the trial too.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import signal as _signal
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from aorta_tui.core.events import Event, TrialLaunch, TrialStarted
from aorta_tui.core.numerals import ascii_digits
from aorta_tui.trial import containment, proctree

TOKEN_VAR = "AORTA_TRIAL_TOKEN"
ZYGOTE_TOKEN_VAR = "AORTA_ZYGOTE_TOKEN"
_VARS = (TOKEN_VAR.encode() + b"=", ZYGOTE_TOKEN_VAR.encode() + b"=")
_MAX_ENVIRON = 4 << 20  # bytes of one /proc/<pid>/environ read (ARG_MAX-sized at most)
GRACE_S = 2.0  # SIGTERM -> SIGKILL, as a trial's own end (ProcessSpec.kill_grace_s)


def new_token() -> str:
    """A fresh secret (128 bits): it lives only in the environment of the processes it marks."""
    return secrets.token_hex(16)


def run_key(run_id: str) -> str:
    """What binds a digest to one run: its id, which a rename of its directory keeps (a NUL
    in front: no path, the key of older runs, can spell it)."""
    return f"\0run-id\0{run_id}"


def legacy_key(run_dir: str | os.PathLike[str]) -> str:
    """The key of runs made before the run id was (their directory's real path)."""
    return os.path.realpath(run_dir)


def digest(key: str, token: str) -> str:
    """The journal's form of ``token`` for the run whose key is ``key``."""
    text = f"aorta-tui trial identity\0{key}\0{token}"
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Identity:
    """One trial attempt's token (into its environment) and the digests for its journal line."""

    token: str
    digests: tuple[str, ...]

    @property
    def env(self) -> dict[str, str]:
        return {TOKEN_VAR: self.token}


def mint(run_id: str, *, zygote_token: str | None = None) -> Identity:
    """A new identity for a trial of run ``run_id``; ``zygote_token``: the zygote the trial is
    forked from."""
    key = run_key(run_id)
    token = new_token()
    digests = [digest(key, token)]
    if zygote_token:
        digests.append(digest(key, zygote_token))
    return Identity(token, tuple(digests))


# -- finding the run's processes -------------------------------------------------------------


def _tokens_of(pid: int) -> list[str]:
    """The identity tokens in ``/proc/<pid>/environ`` (empty when unreadable or none)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read(_MAX_ENVIRON)
    except OSError:
        return []
    out = []
    for entry in raw.split(b"\0"):
        for prefix in _VARS:
            if entry.startswith(prefix):
                with contextlib.suppress(UnicodeDecodeError):
                    out.append(entry[len(prefix):].decode("ascii"))
    return out


def carriers(keys: Iterable[str], digests: set[str]) -> dict[str, set[int]]:
    """``digest -> live pids`` whose environment holds a token with that digest under one of
    the run's ``keys``.

    One pass over ``/proc`` (a resume, not a trial, pays it). A process whose environment is
    not readable (another user's, without root) is not this run's to end anyway."""
    found: dict[str, set[int]] = {}
    if not digests:
        return found
    keys = tuple(keys)
    me = os.getpid()
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not ascii_digits(name) or int(name) == me:
            continue
        pid = int(name)
        for token in _tokens_of(pid):
            for d in {digest(key, token) for key in keys} & digests:
                if proctree.is_alive(pid):
                    found.setdefault(d, set()).add(pid)
    return found


# -- what the journal says -------------------------------------------------------------------


@dataclass
class _Claim:
    digests: set[str] = field(default_factory=set)
    pids: set[int] = field(default_factory=set)  # what trial_started lines name (unproven)


def _claims(events: Iterable[Event], unfinished: set[str]) -> dict[str, _Claim]:
    out: dict[str, _Claim] = {}
    for ev in events:
        tid = getattr(ev, "trial_id", None)
        if tid not in unfinished:
            continue
        if isinstance(ev, TrialLaunch):
            out.setdefault(tid, _Claim()).digests.update(d for d in ev.identity if isinstance(d, str))
        elif isinstance(ev, TrialStarted) and isinstance(ev.pid, int) and ev.pid > 0:
            out.setdefault(tid, _Claim()).pids.add(ev.pid)
    return out


@dataclass
class OrphanReport:
    """What a resume did about the processes of its unfinished trials."""

    notes: dict[str, list[str]] = field(default_factory=dict)  # trial id -> what was done
    ended: int = 0  # processes ended
    refused: int = 0  # pids the journal named that are not the run's (left alone)
    survivors: list[int] = field(default_factory=list)

    def warnings(self) -> list[str]:
        return [f"{tid}: {note}" for tid, notes in sorted(self.notes.items()) for note in notes]


def end_unfinished(run_dir: str | os.PathLike[str], run_id: str, events: Iterable[Event],
                   unfinished: set[str], *, grace_s: float = GRACE_S) -> OrphanReport:
    """End every process of the run's ``unfinished`` trials that is still running (``run_id``:
    the run's own id, as its creation recorded it; ``run_dir``: where it is now).

    Call it under the run's lock (so no live orchestrator owns these trials) and before the
    trials' directories are retired or reused. Only processes proved by their token are
    signalled; a pid the journal names without that proof is reported and left alone.
    """
    report = OrphanReport()
    claims = _claims(events, unfinished)
    wanted = {d for c in claims.values() for d in c.digests}
    found = carriers((run_key(run_id), legacy_key(run_dir)), wanted)
    for tid, claim in sorted(claims.items()):
        proved: set[int] = set()
        for d in claim.digests:
            proved |= found.get(d, set())
        notes: list[str] = []
        for pid in sorted(claim.pids - proved):
            if proctree.is_alive(pid) and not _descends_from(pid, proved):
                report.refused += 1
                notes.append(
                    f"the journal names pid {pid}, which does not carry this trial's "
                    f"{TOKEN_VAR}: it was not started by this run, so it was left alone "
                    "(a forged or stale journal line)")
        if proved:
            ended, left = end_processes(proved, grace_s=grace_s)
            report.ended += ended
            report.survivors += sorted(left)
            what = (f"ended {ended} process{'es' if ended != 1 else ''} of this trial that "
                    f"the dead orchestrator left running (pid {', '.join(map(str, sorted(proved)))})")
            if left:
                what += f"; still running after SIGKILL: pid {', '.join(map(str, sorted(left)))}"
            notes.append(what + "; the trial runs again from the start")
        if notes:
            report.notes[tid] = notes
    return report


def _descends_from(pid: int, roots: set[int]) -> bool:
    """Whether ``pid`` is one of ``roots`` or below one (a proved trial's own child)."""
    seen = set()
    while pid > 1 and pid not in seen:
        if pid in roots:
            return True
        seen.add(pid)
        st = proctree.read_stat(pid)
        if st is None:
            return False
        pid = st.ppid
    return False


def end_processes(pids: set[int], *, grace_s: float = GRACE_S) -> tuple[int, set[int]]:
    """SIGTERM ``pids`` (proved processes of the run), with their descendants, the process
    groups they lead and the trial cgroups they run in; SIGKILL what is left after
    ``grace_s``. Returns (how many were signalled and ended, pids still alive after SIGKILL)."""
    from aorta_tui.trial.supervisor import _wait_dead

    cgroups = cgroup_dirs(pids)
    everything: set[int] = set()
    left: set[int] = set()
    for sig, wait in ((_signal.SIGTERM, grace_s), (_signal.SIGKILL, 1.0)):
        targets = _reach(pids | left, cgroups)
        everything |= targets
        if sig == _signal.SIGKILL:
            for cg in cgroups:  # one write ends the whole cgroup (Linux 5.14+)
                with contextlib.suppress(OSError):
                    (cg / "cgroup.kill").write_bytes(b"1")
        for pid in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        left = _wait_dead(targets, wait)
        if not left:
            break
        pids = set()
    return len(everything - left), left


def _reach(pids: set[int], cgroups: set[Path]) -> set[int]:
    """``pids``, their live descendants, members of the groups they lead, their cgroups."""
    stats = proctree.all_stats()
    leaders = {st.pid for st in stats if st.pid in pids and st.pgid == st.pid}
    out = set(pids)
    for pid in pids:
        out |= proctree.tree_pids(pid, stats=stats)
    out |= {st.pid for st in stats if st.pgid in leaders and st.state != "Z"}
    for cg in cgroups:
        out |= {p for p in containment.cgroup_pids(cg) if proctree.is_alive(p)}
    out.discard(os.getpid())
    return {p for p in out if proctree.is_alive(p)}


def cgroup_dirs(pids: Iterable[int]) -> set[Path]:
    """The trial cgroups ``pids`` run in (for reports)."""
    return {c for p in pids if (c := containment.trial_cgroup_of(p)) is not None}
