"""Slurm's commands, run without a shell, and the parsers of what they print.

Every call is an argv list (``subprocess.run``, never ``shell=True``) with a timeout; every
parser takes text and returns plain data or ``None`` for a line it cannot read (never raises),
so a Slurm version that prints one more field or an odd state costs a skipped line, not a crash.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aorta_tui.core import spawn_gate
from aorta_tui.core.numerals import ascii_digits

CALL_TIMEOUT_S = 60.0  # slurmctld answers in milliseconds; a busy one in seconds
# squeue's columns, in this order (``|`` cannot appear in any of them)
SQUEUE_FORMAT = "%i|%T|%N|%V|%S|%e|%r|%j"
# sinfo's partition (default marked *), node count and GRES per line of equal nodes
SINFO_CAPACITY_FORMAT = "%P|%D|%G"
SACCT_FIELDS = "JobID,State,NodeList,Submit,Start,End,Reason,JobName"
# states after which the job does nothing more (squeue/sacct spellings)
TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                      "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "SPECIAL_EXIT", "REVOKED"})
ALIVE = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED",
                   "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT",
                   "STOPPED", "RESV_DEL_HOLD"})
_JOB_ID = re.compile(r"^\d{1,12}(_\d{1,9})?$")
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")


class SlurmCallError(Exception):
    """A Slurm command failed; ``message`` is its last stderr line (what the user needs)."""

    def __init__(self, argv: Sequence[str], message: str, returncode: int | None) -> None:
        super().__init__(message)
        self.argv = list(argv)
        self.message = message
        self.returncode = returncode


@dataclass(frozen=True)
class JobInfo:
    """One job (or array task) as squeue or sacct reports it."""

    job_id: str  # "123" or "123_4"
    state: str  # first word, upper case: RUNNING, CANCELLED ("CANCELLED by 0" -> CANCELLED)
    node: str | None
    submit: float | None  # epoch seconds (Slurm prints local time, 1 s resolution)
    start: float | None
    end: float | None
    reason: str | None
    name: str | None

    @property
    def alive(self) -> bool:
        return self.state not in TERMINAL


def parse_time(text: str) -> float | None:
    """``2026-12-01T13:07:53`` (local time) -> epoch seconds; N/A, NONE, Unknown -> None."""
    text = text.strip()
    if not _TIME.fullmatch(text):
        return None
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except (ValueError, OverflowError):
        return None


def parse_state(text: str) -> str | None:
    """``CANCELLED by 1000`` -> ``CANCELLED``; anything that is not a state word -> None."""
    words = text.strip().split()
    if not words or not re.fullmatch(r"[A-Z_]{2,32}\+?", words[0]):
        return None
    return words[0].rstrip("+")


def parse_job_line(line: str) -> JobInfo | None:
    """One line of ``squeue -o SQUEUE_FORMAT`` or ``sacct -P -o SACCT_FIELDS``."""
    parts = line.rstrip("\n").split("|")
    if len(parts) < 8:
        return None
    job_id, state_text, node, submit, start, end, reason, name = (p.strip() for p in parts[:8])
    state = parse_state(state_text)
    if not _JOB_ID.fullmatch(job_id) or state is None:
        return None
    bad_node = node in ("", "None assigned", "(null)", "n/a") or not re.fullmatch(r"[\w.\[\],-]{1,256}", node)
    return JobInfo(job_id=job_id, state=state, node=None if bad_node else node,
                   submit=parse_time(submit), start=parse_time(start), end=parse_time(end),
                   reason=None if reason in ("", "None", "(null)") else reason,
                   name=name or None)


def parse_jobs(text: str) -> dict[str, JobInfo]:
    """Every readable line, by job id (an array's own summary line ``123_[4-9]`` is skipped)."""
    out: dict[str, JobInfo] = {}
    for line in text.splitlines():
        info = parse_job_line(line)
        if info is not None:
            out[info.job_id] = info
    return out


def parse_sbatch_parsable(text: str) -> str | None:
    """``sbatch --parsable`` prints ``JOBID`` or ``JOBID;CLUSTER``; the job id or None."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    job_id = first.split(";", 1)[0].strip()
    return job_id if re.fullmatch(r"\d{1,12}", job_id) else None


def gres_gpus(gres: str) -> int:
    """GPUs in one node's GRES (``gpu:4``, ``gpu:a100:2(S:0-1),gpu:v100:2``, ``(null)``)."""
    text = re.sub(r"\([^)]*\)", "", gres)  # socket affinity "(S:0,1)" holds commas of its own
    total = 0
    for item in text.split(","):
        m = re.fullmatch(r"\s*gpu(?::[\w.-]{1,64})?:(\d{1,6})\s*", item)
        if m:
            total += int(m.group(1))
    return total


def parse_capacity(text: str, partition: str | None) -> tuple[str, int, int] | None:
    """``sinfo -h -o SINFO_CAPACITY_FORMAT`` -> (partition, its nodes, most GPUs on one of them)
    for ``partition`` (None: the default one, marked ``*``); None when it is not listed."""
    nodes: dict[str, int] = {}
    gpus: dict[str, int] = {}
    default: str | None = None
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3 or not ascii_digits(parts[1].strip()):
            continue
        name = parts[0].strip()
        if name.endswith("*"):
            name = name[:-1]
            default = default or name
        if not name:
            continue
        nodes[name] = nodes.get(name, 0) + int(parts[1])
        gpus[name] = max(gpus.get(name, 0), gres_gpus(parts[2]))
    want = partition if partition is not None else default
    if want is None or want not in nodes:
        return None
    return want, nodes[want], gpus[want]


def expand_array_ids(job_id: str, count: int) -> list[str]:
    """The task ids of array job ``job_id`` with tasks ``0..count-1``."""
    return [f"{job_id}_{i}" for i in range(count)]


def which(name: str) -> str | None:
    return shutil.which(name)


def call(argv: Sequence[str], *, stdin: str | None = None, timeout_s: float = CALL_TIMEOUT_S,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a Slurm command (argv, no shell). ``check``: a non-zero exit raises SlurmCallError."""
    try:
        proc = spawn_gate.run(list(argv), input=stdin, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except FileNotFoundError:
        raise SlurmCallError(argv, f"{argv[0]} is not on PATH", None) from None
    except subprocess.TimeoutExpired:
        raise SlurmCallError(argv, f"{argv[0]} did not answer within {timeout_s:g} s "
                             "(is slurmctld up?)", None) from None
    except OSError as exc:
        raise SlurmCallError(argv, f"{argv[0]} could not run: {exc}", None) from None
    if check and proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        raise SlurmCallError(argv, lines[-1] if lines else f"exit code {proc.returncode}",
                             proc.returncode)
    return proc


def squeue(job_ids: Iterable[str]) -> dict[str, JobInfo]:
    """What squeue knows of these jobs (finished ones for MinJobAge seconds), tasks expanded."""
    ids = sorted({j.split("_", 1)[0] for j in job_ids})
    if not ids:
        return {}
    out: dict[str, JobInfo] = {}
    for chunk in _chunks(ids, 500):  # an argv of bounded length
        proc = call(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(chunk), "-o", SQUEUE_FORMAT],
                    check=False)
        if proc.returncode != 0 and "Invalid job id" not in proc.stderr:
            raise SlurmCallError(["squeue"], (proc.stderr.strip().splitlines() or ["failed"])[-1],
                                 proc.returncode)
        out.update(parse_jobs(proc.stdout))
    return out


def squeue_by_name(name: str) -> dict[str, JobInfo]:
    try:
        proc = call(["squeue", "-h", "-r", "-t", "all", "-n", name, "-o", SQUEUE_FORMAT], check=False)
    except SlurmCallError:
        return {}
    return parse_jobs(proc.stdout) if proc.returncode == 0 else {}


def sacct(job_ids: Iterable[str] = (), *, name: str | None = None) -> dict[str, JobInfo] | None:
    """The accounting database's view (jobs squeue forgot); None where sacct does not work."""
    if which("sacct") is None:
        return None
    argv = ["sacct", "-n", "-P", "-X", "-o", SACCT_FIELDS]
    ids = sorted(set(job_ids))
    if ids:
        argv += ["-j", ",".join(ids)]
    elif name:
        argv += ["--name", name, "-S", "now-7days"]
    else:
        return {}
    try:
        proc = call(argv, check=False)
    except SlurmCallError:
        return {}  # no answer now: not "no accounting"; asked again next time
    if proc.returncode != 0 and "accounting storage is disabled" in proc.stderr.lower():
        return None
    return parse_jobs(proc.stdout) if proc.returncode == 0 else {}


def scancel(job_ids: Iterable[str], *, signal: str | None = None) -> str | None:
    """Cancel (or signal) jobs; a job that already ended is no error. Returns what failed."""
    ids = sorted(j for j in set(job_ids) if j)
    problem = None
    for chunk in _chunks(ids, 500):
        argv = ["scancel"] + ([f"--signal={signal}"] if signal else []) + chunk
        try:
            call(argv, check=False)
        except SlurmCallError as exc:
            problem = exc.message
    return problem


def _chunks(items: list[str], n: int) -> list[list[str]]:
    return [items[i:i + n] for i in range(0, len(items), n)]
