"""Issue 17, item 1: the policy sweep keeps its run directory as the sweep does (store/run_store.py).

The engine's crash-point harness (tests/reliability/test_rel_rundir_crashpoints.py, whose
bpftrace program and registration this test reuses) SIGKILLs a real orchestrator from inside the
kernel on the exit of its K-th ``fsync`` (every journal line a resume trusts, every atomic write)
or its K-th ``rename`` (every atomic write), for every K until a run completes unkilled; then
``resume_policy_sweep`` finishes the run. Each planned trial must then have exactly one
``trial_finished`` line and one ``ok`` row in the report (none lost), and no trial whose line was
in the journal at the kill runs again (none repeated).

Before the run store, the policy journal was a plain buffered file and a resume trusted
``outcome.json`` alone: a kill between a trial's ``outcome.json`` rename and its journal line
left a trial the report counted and the journal never finished.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from aorta_tui.core.errors import RunDirError
from aorta_tui.policy.evaluator import POLICY_LAYOUT, resume_policy_sweep
from aorta_tui.store.run_store import RunStore
from tests.reliability.test_rel_rundir_crashpoints import (  # noqa: F401 - killer is a fixture
    FSYNC,
    RENAME,
    _sweep_points,
    killer,
    run_python_killed_at,
)

pytestmark = [pytest.mark.bpftrace, pytest.mark.slow]


# A trial process that writes a queue result at once (no torch, no harness): the smallest
# document the queue result's reader (hwqueue/result_doc.py) takes, as the evaluator reads it.
CHILD = textwrap.dedent("""
    import json, sys
    out = sys.argv[sys.argv.index("-o") + 1]
    json.dump({"schema_version": 1, "kind": "aorta-tui/queue-result", "emulated": True,
               "workload": {"name": "fake"}, "config": {"streams": 2},
               "platform": {"backend": "cpu"},
               "summary": {"throughput": 100.0}, "summary_units": {"throughput": "items/s"},
               "summary_better": {"throughput": "higher"}, "unavailable": {}}, open(out, "w"))
""")

# The orchestrator: a real policy sweep of baseline + one policy, two trials each.
ORCHESTRATOR = textwrap.dedent("""
    import sys
    from pathlib import Path
    from aorta_tui.policy.evaluator import PolicySweepRequest, run_policy_sweep
    from aorta_tui.policy.presets import Policy

    child, out = sys.argv[1], Path(sys.argv[2])

    def command(req, policy, result):
        return [sys.executable, "-I", "-S", child, "-o", str(result)]

    req = PolicySweepRequest(workload="fake", policies=(Policy(name="other", env={"X_SHIFT": "1"}),),
                       streams=2, output_dir=out, trials=2, seed=4, python=sys.executable)
    run_policy_sweep(req, trial_command=command)
""")


def _command(child: Path) -> Any:
    def command(_req: Any, _policy: Any, result: Path) -> list[str]:
        return [sys.executable, "-I", "-S", str(child), "-o", str(result)]
    return command


def _finished_lines(run: Path) -> Counter[str]:
    scan = RunStore(run, POLICY_LAYOUT).scan()
    assert not scan.damaged, scan.damaged
    return Counter(e.trial_id for e in scan.events if e.kind == "trial_finished")  # type: ignore[attr-defined]


def _problems(run: Path, before: Counter[str], rerun: list[str]) -> list[str]:
    """What is wrong with the resumed run: anything but each planned trial exactly once."""
    manifest = json.loads((run / "sweep.json").read_text())
    planned = {o["dir"] for o in manifest["order"]}
    problems = []
    report = json.loads((run / "policy.json").read_text())
    rows = Counter(t["dir"] for t in report["trials"] if t["status"] == "ok")
    if report["status"] != "completed" or set(rows) != planned or set(rows.values()) != {1}:
        problems.append(f"report: {report['status']}, ok rows {dict(rows)}")
    finished = _finished_lines(run)
    if set(finished) != planned or set(finished.values()) != {1}:
        problems.append(f"journal trial_finished {dict(finished)} (before the resume: {dict(before)})")
    again = set(rerun) & set(before)
    if again:
        problems.append(f"finished before the kill, run again by the resume: {sorted(again)}")
    return problems


def _check_case(tmp: Path, k: int, mode: int) -> tuple[bool, list[str]]:
    """One crash point: run, kill, resume, check. Returns (was it killed, problems)."""
    case = tmp / f"m{mode}-k{k}"
    case.mkdir()
    (case / "child.py").write_text(CHILD)
    run = case / "run"
    code = run_python_killed_at(["-c", ORCHESTRATOR, str(case / "child.py"), str(run)], k, mode)
    if code == 0:
        return False, _problems(run, Counter(), [])
    if not (run / "sweep.json").exists():
        # Killed before the manifest was in place: no trial ran, and a resume says what it is.
        try:
            resume_policy_sweep(run, trial_command=_command(case / "child.py"))
        except RunDirError as exc:
            ran = (run / "trials").exists()
            return True, [f"trials ran without a manifest: {exc.message}"] if ran else []
        return True, ["resume of a run without sweep.json did not refuse"]
    before = _finished_lines(run)
    events: list[Any] = []
    resume_policy_sweep(run, trial_command=_command(case / "child.py"), on_event=events.append)
    rerun = [e.trial_id for e in events if e.kind == "trial_started"]
    return True, _problems(run, before, rerun)


def test_policy_sweep_sigkill_after_every_fsync_and_rename_then_resume_loses_and_repeats_nothing(
        killer, tmp_path: Path, attack_tally) -> None:  # noqa: F811 - the imported fixture
    workers = max(1, min(3, (os.cpu_count() or 1)))
    cases, failures = 0, {}
    for mode in (FSYNC, RENAME):
        n, f = _sweep_points(tmp_path, mode, workers, check=_check_case)
        cases += n
        failures.update(f)
    attack_tally.record("policy sweep crash points (SIGKILL after each fsync/rename)", cases=cases,
                        failures=len(failures),
                        promise="resume: each planned trial finished once, none lost, none re-run")
    assert not failures, failures
