"""``trial_isolation: in_process``: run a workload trial inside the orchestrator.

Only for workloads that declare ``LaunchSpec(in_process_safe=True)``: they leave no global
state behind and need no variable read at runtime start-up. It saves a process start per trial.
The cell's variables are set in ``os.environ`` for the trial and restored after it; a timeout
cannot interrupt Python code in the same process, so ``timeout_per_trial`` is not enforced here
(the recipe loader's docs say so).
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.trial.supervisor import ProcessOutcome


@contextlib.contextmanager
def _environ(overlay: Mapping[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in overlay}
    os.environ.update(overlay)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_in_process(spec: dict[str, Any], overlay: Mapping[str, str], trial_dir: Path,
                   fs: RunDirFS) -> ProcessOutcome:
    """The trial in this process; its logs and result go through the run's file layer ``fs``
    (no link followed: this is the orchestrator's own process)."""
    from aorta_tui.core.worker_result import WorkerResult
    from aorta_tui.registry.workload import Failure, WorkloadResult
    from aorta_tui.trial.timeline import ChildMarks
    from aorta_tui.trial.worker import result_filename, run_trial

    stdout_path, stderr_path = trial_dir / "stdout.log", trial_dir / "stderr.log"
    started_at, t0 = time.time(), time.monotonic()
    marks = ChildMarks(time.monotonic_ns())  # the orchestrator's interpreter is long up
    del marks.marks["interpreter_up"]
    marks.info.pop("process_start_ns", None)
    marks.unavailable["interpreter_up"] = "in-process trial: the orchestrator's interpreter runs it"
    exit_code = 0
    with open(fs.open_log(stdout_path), "w") as out, open(fs.open_log(stderr_path), "w") as err, \
            _environ(overlay), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            result = run_trial(spec, marks)
        except Exception as exc:
            traceback.print_exc()
            result = WorkloadResult(failures=[Failure("setup_error", f"{type(exc).__name__}: {exc}")])
        if not result.passed:
            exit_code = 1
    workload = result.to_dict()  # before the result_write mark, as always
    marks.mark("result_write")
    # no worker_wall_s: no worker process of its own (the file the orchestrator reads is the same)
    doc = WorkerResult.of(workload, timeline=marks.finish())
    path = trial_dir / result_filename(0)
    fs.atomic_write_bytes(path, doc.file_bytes(where=str(path)))
    return ProcessOutcome(
        pid=os.getpid(), exit_code=exit_code, signal=None, core_dumped=False, timed_out=False,
        cancelled=False, hang=None, exec_error=None, wall_s=time.monotonic() - t0,
        started_at=started_at, ended_at=time.time(), peak_rss_kb=None, gpu_peak_mem_bytes=None,
        gpu_mem_reason="in-process trial: not separable from the orchestrator",
        stdout_bytes=stdout_path.stat().st_size, stderr_bytes=stderr_path.stat().st_size,
        truncated=False, peak_rss_reason="in-process trial: not separable from the orchestrator",
    )
