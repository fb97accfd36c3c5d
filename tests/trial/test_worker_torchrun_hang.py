"""A real torchrun 2-rank gloo job through the worker and the classifier.

- hang: rank 1 sleeps 60 s before an all-reduce whose collective timeout is 60 s too, so only
  tier 2 can catch it: the ranks go silent and idle while torchrun's agent keeps polling its
  rendezvous store. io_idle must count the ranks, not the agent.
- control: nobody is late (AORTA_RANK_HANG_SKIP=1), and torchrun runs with
  --monitor-interval=20, so after the ranks exit its agent sits silent for seconds before it
  notices; that teardown must not be called a hang. (Summing the I/O of the whole tree, as
  tier 2 did before, fails this control: "hang after 9.5 s: output silence 4.5 s, io idle
  3.0 s", measured 2026-11-29 on the 2-core VM; and it misses the hang until the 60 s timeout.)
- timeout: no hang detector; rank 1 is late past a 3 s gloo timeout. The built-in
  collective_timeout names it, and the reason is the timeout, not torchrun's SIGTERM of rank 1.

The three run at once (each ~10 s of mostly waiting) to keep the suite short.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from aorta_tui.classify import classify
from aorta_tui.trial.hang import HangPolicy
from aorta_tui.trial.supervisor import ProcessSpec, run_process

REPO = Path(__file__).resolve().parents[2]
RANK_PROGRAM = REPO / "scripts" / "rank_hang.py"
# a grace that covers two ranks importing torch on a loaded 2-core box, then a short window
POLICY = HangPolicy(window_s=3.0, grace_s=5.0)

pytestmark = [pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed"), pytest.mark.slow]


def _torchrun(*, launcher: list[str], rank: list[str]) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *launcher,
            str(RANK_PROGRAM), "--backend", "gloo", *rank]


def _run(name: str, tmp: Path, argv: list[str], hang: HangPolicy | None, env_extra: dict[str, str]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "AORTA_RANK_HANG_SKIP"}
    env.update(PYTHONUNBUFFERED="1", **env_extra)
    out, err = tmp / f"{name}.out", tmp / f"{name}.err"
    outcome = run_process(ProcessSpec(argv, env, REPO, out, err, timeout_s=90, hang=hang))
    verdict = classify(outcome, stdout_path=out, stderr_path=err)
    return {"outcome": outcome, "c": verdict, "stdout": out.read_text(errors="replace"),
            "stderr": err.read_text(errors="replace")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("torchrun")
    jobs = {
        "hang": (_torchrun(launcher=[], rank=["--hang-rank", "1", "--sleep", "60", "--timeout", "60"]),
                 POLICY, {}),
        "control": (_torchrun(launcher=["--monitor-interval=20"],
                              rank=["--hang-rank", "1", "--sleep", "60", "--timeout", "60"]),
                    POLICY, {"AORTA_RANK_HANG_SKIP": "1"}),
        "timeout": (_torchrun(launcher=[], rank=["--hang-rank", "1", "--sleep", "30", "--timeout", "3"]),
                    None, {}),
    }
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {n: pool.submit(_run, n, tmp, argv, pol, extra) for n, (argv, pol, extra) in jobs.items()}
        return {n: f.result() for n, f in futures.items()}


def test_tier2_sees_the_torchrun_hang_through_the_polling_launcher(runs: dict) -> None:
    r = runs["hang"]
    o = r["outcome"]
    assert "rank 1: sleeping 60 s before the all-reduce" in r["stdout"]
    assert o.hang is not None and not o.timed_out, r["stderr"][-2000:]
    assert set(o.hang.held()) == {"output_silence", "io_idle"}
    # the agent (the tree's root, torch.distributed.run) was left out of the I/O sum
    assert o.hang.io_scope == f"2 worker process(es), not the launcher (torch.distributed.run pid {o.pid})"
    # found well before the 60 s collective timeout: grace, then the window (plus check steps)
    assert o.hang.elapsed_s < 40
    assert r["c"].verdict == "fail" and r["c"].reason.startswith("hang after ")
    assert "collective_timeout" not in r["c"].fired


def test_the_healthy_control_passes_although_the_agent_is_slow_to_notice(runs: dict) -> None:
    r = runs["control"]
    o = r["outcome"]
    assert r["stdout"].count("all-reduce ok (3)") == 2 and "sleeping" not in r["stdout"]
    assert o.exit_code == 0 and o.hang is None and not o.timed_out
    assert r["c"].verdict == "pass", r["c"].reason


def test_a_gloo_timeout_is_the_reason_not_the_sigterm_torchrun_sent(runs: dict) -> None:
    r = runs["timeout"]
    c = r["c"]
    # torchrun's own report of stopping rank 1 is in the log ...
    assert "closing signal SIGTERM" in r["stderr"] and "Signal 15 (SIGTERM) received by PID" in r["stderr"]
    # ... but it is not a crash, and the reason is the collective timeout rank 0 hit
    assert "process_crash" not in c.fired
    [det] = [d for d in c.detections if d.id == "collective_timeout"]
    assert det.captures == {"timeout_ms": "3000", "op": "recv"} and "[rank0]" in det.evidence
    assert c.verdict == "fail" and c.reason.startswith("a collective operation timed out")
    assert r["outcome"].exit_code == 1
