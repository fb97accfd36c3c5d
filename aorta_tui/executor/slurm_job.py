"""What a Slurm job runs on its node: one trial, supervised exactly as a local trial is.

``python -m aorta_tui.executor.slurm_job MANIFEST`` (one task of a job array): the manifest
lists each task's job spec (``trials/<cell>/trial-NNN/slurm-job.json``, written by the
orchestrator, mode 0600 because it holds the trial's environment). This process reads its
spec, deletes it, and runs the trial's command through :func:`aorta_tui.trial.supervisor.run_process`
on this node - the same process group/cgroup, bounded logs, timeout, hang detector and GPU
sampling as a local trial, with the trial's environment set at process creation - then
reads this node's kernel log for tier 3 and writes ``slurm-outcome.json`` atomically. It
never writes the journal: the orchestrator reads the outcome file and records the trial.

``--gate MARKER TOKEN`` first (the shared-filesystem check, done by the array's own tasks so
that it costs no scheduler pass of its own): the task writes ``TOKEN HOST`` to MARKER, then waits
for ``MARKER.go``, which the orchestrator writes once it sees a marker. A task that cannot write
the marker (the run directory is not on this node) ends at once; one whose marker the
orchestrator never sees (a directory of the same name that is not the same one) gets no go and
ends after ``GATE_WAIT_S``, running nothing. Either way the orchestrator sees a task end without
its marker: the run stops before any trial runs (docs/slurm.md). Tasks that start once the go
exists do not wait.

Slurm signals a job it ends (scancel, the time limit, preemption) with SIGTERM first: the
handler cancels the run, which ends the trial's process tree and still writes the outcome,
naming the signal, so the orchestrator can type the verdict from the job's final state.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aorta_tui.core.rundir_fs import RunDirFS
    from aorta_tui.executor.slurm_outcome_doc import NodeFacts, NodeKernelLog, SlurmOutcome
    from aorta_tui.trial.supervisor import ProcessOutcome

# The node's facts that replace the orchestrator's copy in the trial's environment (unless the
# cell sets them itself): the job's own ids and the devices Slurm gave it.
NODE_VARS = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
             "GPU_DEVICE_ORDINAL", "SLURMD_NODENAME", "TMPDIR")
OUTCOME = "slurm-outcome.json"
JOB_SPEC = "slurm-job.json"
_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)
GATE_SUFFIX = ".go"
# The orchestrator answers a marker it sees within its 20 ms poll; past this, it never will
# (it does not see this node's files, or it is gone: a resume writes the go of the batches it
# adopts).
GATE_WAIT_S = float(os.environ.get("AORTA_SLURM_GATE_WAIT_S", "60"))
GATE_POLL_S = 0.01
_early: list[str] = []  # signals that came while this process was still importing


def _note_early(signum: int, _frame: FrameType | None) -> None:
    _early.append(signal.Signals(signum).name)


def node_facts(environ: dict[str, str]) -> NodeFacts:
    """Where this task runs: host, job ids, the GPUs Slurm allocated to it."""
    from aorta_tui.executor.slurm_outcome_doc import NodeFacts

    return NodeFacts(
        host=socket.gethostname(),
        node=environ.get("SLURMD_NODENAME") or socket.gethostname(),
        job_id=environ.get("SLURM_JOB_ID"),
        array_job_id=environ.get("SLURM_ARRAY_JOB_ID"),
        array_task_id=environ.get("SLURM_ARRAY_TASK_ID"),
        job_gpus=environ.get("SLURM_JOB_GPUS"),
        cuda_visible_devices=environ.get("CUDA_VISIBLE_DEVICES"),
        rocr_visible_devices=environ.get("ROCR_VISIBLE_DEVICES"),
        partition=environ.get("SLURM_JOB_PARTITION"),
        nodelist=environ.get("SLURM_JOB_NODELIST"),
        nodes=tuple(job_nodes(environ)),
        account=environ.get("SLURM_JOB_ACCOUNT"),
    )


def trial_outcome(outcome: ProcessOutcome, environ: dict[str, str], got: list[str],
                  started_at: float, ended_at: float, gate_waited_s: float | None,
                  kernel: NodeKernelLog) -> SlurmOutcome:
    """What the task writes into the trial directory once the trial ended (slurm_outcome_doc)."""
    from aorta_tui.executor.slurm_outcome_doc import SlurmOutcome

    return SlurmOutcome(
        process=outcome, node=node_facts(environ),
        signal=got[0] if got else None,  # what Slurm sent (scancel, time limit, preemption)
        wrapper_started_at=started_at, wrapper_ended_at=ended_at,
        gate_waited_s=gate_waited_s,  # this task's wait for the orchestrator's go, before the trial
        kernel_log=kernel)


def job_nodes(environ: dict[str, str]) -> list[str]:
    """Every node of the job: one name as it is, a compressed list (``n[1-4]``) through
    ``scontrol show hostnames``; [] outside a job or where scontrol cannot say."""
    nodelist = environ.get("SLURM_JOB_NODELIST") or ""
    if not nodelist:
        return []
    if not any(c in nodelist for c in "[,"):
        return [nodelist]
    from aorta_tui.executor.slurm_launch import LaunchError, job_hosts

    try:
        return job_hosts(environ)
    except LaunchError:
        return []


def trial_env(spec_env: dict[str, str], cell_keys: set[str], environ: dict[str, str]) -> dict[str, str]:
    """The trial's environment: the orchestrator's, with this job's Slurm and device variables."""
    env = {k: v for k, v in spec_env.items() if not (k.startswith("SLURM_") and k not in cell_keys)}
    for k, v in environ.items():
        if (k.startswith("SLURM_") or k in NODE_VARS) and k not in cell_keys:
            env[k] = v
    return env


def pass_gate(marker: Path, token: str, fs: RunDirFS | None = None) -> float | None:
    """Say this task runs here (``TOKEN HOST`` in MARKER), then wait for the orchestrator's go.
    The seconds waited, or None when no go came (the task must run nothing). ``fs``: the run's
    file layer, through which the marker is written (no link followed out of the run)."""
    go = marker.with_name(marker.name + GATE_SUFFIX)
    t0 = time.monotonic()
    if go.exists():
        return 0.0
    from aorta_tui.core.atomic import atomic_write_text
    from aorta_tui.core.errors import RunDirRefused

    try:
        if fs is not None:
            fs.atomic_write_text(marker, f"{token} {socket.gethostname()}\n")
        else:
            atomic_write_text(marker, f"{token} {socket.gethostname()}\n")
    except RunDirRefused:
        # Every task of the array writes this one marker. Two at once trip the atomic writer's
        # check that the name holds the file it wrote (the other task's rename replaced it: seen
        # in CI, 2026-12-04, exit 3 and a trial "error"). A marker with our token says the same
        # thing, so the task goes on; anything else there stays refused.
        if not _marker_says(marker, token, fs):
            raise
    except OSError as exc:
        print(f"aorta-tui: cannot write {marker} on {socket.gethostname()}: {exc.strerror or exc}; "
              "the run directory is not on this node's filesystem; nothing was run", file=sys.stderr)
        return None
    while not go.exists():
        if _early or time.monotonic() - t0 > GATE_WAIT_S:
            why = f"signalled ({_early[0]})" if _early else f"no go after {GATE_WAIT_S:g} s"
            print(f"aorta-tui: {why}: the orchestrator does not see {marker} (the run directory is "
                  "not shared with it, or it is gone); nothing was run", file=sys.stderr)
            return None
        time.sleep(GATE_POLL_S)
    return round(time.monotonic() - t0, 3)


def _marker_says(marker: Path, token: str, fs: RunDirFS | None) -> bool:
    """Whether MARKER is a regular file whose first word is ``token`` (read bounded, through the
    run's file layer where there is one: no link followed, no FIFO opened)."""
    from aorta_tui.core.errors import AortaError
    from aorta_tui.core.inputs import read_input_bytes

    try:
        data = (fs.read_bytes(marker, what="gate marker", limit=4096) if fs is not None
                else read_input_bytes(marker, what="gate marker", limit=4096, follow_symlinks=False))
    except (AortaError, OSError):
        return False
    words = (data or b"").split()
    return bool(words) and words[0] == token.encode()


def run_trial(spec_path: Path, gate_waited_s: float | None, fs: RunDirFS, batch: str) -> int:
    """Run the trial of ``spec_path``, a spec of ``batch`` (this task's array). Every file of the
    run is reached through ``fs``, the run's file layer: a job submitted as root runs as root
    here, over a directory others may write (a spec that is a FIFO, a cell directory that is a
    link: refused, never waited on or followed; a spec naming paths outside the run: refused
    before anything runs)."""
    from aorta_tui.executor.slurm_spec_doc import JobSpec
    from aorta_tui.trial.supervisor import CancelEvent, ProcessSpec, run_process

    started_at = time.time()
    try:
        spec = JobSpec.load(fs, spec_path)
    except FileNotFoundError:  # the trial was retired or recorded while this task was queued
        print(f"aorta-tui: {spec_path} is gone: the trial is no longer this job's to run "
              "(cancelled, or recorded elsewhere); nothing was run", file=sys.stderr)
        return 3
    if spec.batch is not None and spec.batch != batch:  # None: any array's (an older spec)
        # The spec of the trial's job in a later session: a Ctrl-C'd sweep's scancel does not
        # wait for its tasks to end, and one still starting (signalled, or missed by a scancel
        # that failed) got here after the resume had written this path again for the job it
        # resubmitted. Taking it ran the trial outside that job, which then found no spec
        # (exit 3, FAILED: seen in CI). Left in place, for its own job.
        print(
            f"aorta-tui: {spec_path} belongs to job {spec.batch!r}, not this job's "
            f"array {batch!r} (the trial was resubmitted); nothing was run",
            file=sys.stderr,
        )
        return 3
    with contextlib.suppress(FileNotFoundError):
        fs.remove_tree(spec_path)  # it holds the trial's environment (tokens): read once
    trial_dir = Path(spec.trial_dir)
    for inside in (trial_dir, spec.stdout_path, spec.stderr_path):
        fs.rel(inside)  # beneath the run, or refused before the command runs
    env = trial_env(spec.env, set(spec.cell_keys), dict(os.environ))
    pspec = ProcessSpec(argv=list(spec.argv), env=env, cwd=Path(spec.cwd),
                        stdout_path=Path(spec.stdout_path), stderr_path=Path(spec.stderr_path),
                        timeout_s=spec.timeout_s, hang=spec.hang.policy() if spec.hang else None,
                        kill_grace_s=float(spec.kill_grace_s), log_root=fs.root)
    cancel = CancelEvent()
    got: list[str] = list(_early)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        got.append(signal.Signals(signum).name)
        cancel.set()  # set() only writes to a pipe: safe in a handler

    for sig in _SIGNALS:
        signal.signal(sig, on_signal)
    if got:  # scancel while we were starting: end at once, and still write the outcome
        cancel.set()
    from aorta_tui.classify.dmesg import KernelLog
    from aorta_tui.executor.slurm_outcome_doc import NodeKernelLog

    with KernelLog.open() as klog:  # tier 3 of this node, not the orchestrator's
        cursor = klog.mark()
        outcome = run_process(pspec, cancel=cancel)
        kernel = NodeKernelLog(events=tuple(klog.events_since(cursor)),
                               unavailable=klog.unavailable)
    doc = trial_outcome(outcome, dict(os.environ), got, started_at, time.time(), gate_waited_s,
                        kernel)
    fs.atomic_write_json(trial_dir / OUTCOME, doc.to_json())
    return 0


def main(argv: list[str]) -> int:
    for sig in _SIGNALS:  # before the imports: a scancel right at the start is still recorded
        signal.signal(sig, _note_early)
    from aorta_tui.core.errors import AortaError

    gate = argv[2:4] if len(argv) == 5 and argv[1] == "--gate" else None
    if gate is not None:
        argv = [argv[0], argv[4]]
    if len(argv) != 2:
        print("usage: python -m aorta_tui.executor.slurm_job [--gate MARKER TOKEN] MANIFEST",
              file=sys.stderr)
        return 2
    try:
        return _run_task(Path(argv[1]).absolute(), gate)
    except AortaError as exc:
        print(f"error: {exc.render()}", file=sys.stderr)
        return int(exc.exit_code)


def _run_task(manifest_path: Path, gate: list[str] | None) -> int:
    """The manifest is ``RUN/slurm/NAME.json``: the run's file layer is opened on RUN, and
    everything after goes through it."""
    from aorta_tui.core.rundir_fs import RunDirFS

    run_dir = manifest_path.parent.parent
    try:
        fs = RunDirFS(run_dir)
    except OSError as exc:
        print(f"aorta-tui: cannot open the run directory {run_dir} on {socket.gethostname()}: "
              f"{exc.strerror or exc}; nothing was run", file=sys.stderr)
        return 3
    with fs:
        waited: float | None = None
        if gate is not None:
            waited = pass_gate(Path(gate[0]), gate[1], fs)
            if waited is None:
                return 3
        from aorta_tui.executor.slurm_spec_doc import SpecManifest

        manifest = SpecManifest.load(fs, manifest_path)
        task = int(os.environ.get("SLURM_ARRAY_TASK_ID", "0"))
        # the manifest is RUN/slurm/<job name>.json: its name is this array's, the batch that
        # each of its specs names
        return run_trial(Path(manifest.spec_of(task)), waited, fs, manifest_path.stem)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
