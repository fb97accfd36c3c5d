"""The built-in `stream_priority_lc` policy end to end: a tiny CPU sweep through real
`aorta-tui queue run` processes that used to stop with "No such option" (exit 2)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from aorta_tui.policy.evaluator import PolicySweepRequest, run_policy_sweep
from aorta_tui.policy.presets import BUILTIN_BY_NAME


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_stream_priority_lc_sweep_runs_and_says_lc_was_not_applied_on_cpu(tmp_path: Path) -> None:
    req = PolicySweepRequest(workload="hetero_kernels", policies=(BUILTIN_BY_NAME["stream_priority_lc"],),
                       streams=4, output_dir=tmp_path / "run", trials=1, iterations=2, warmup=0,
                       device="cpu", seed=1, queue_args=("--size", "tiny"), timeout_s=120,
                       python=sys.executable)
    outcome = run_policy_sweep(req)
    report = outcome.report.to_json()
    assert outcome.status == "completed" and outcome.exit_code == 0
    assert report["failed_trials"] == 0
    rows = {r["policy"]: r for r in report["trials"]}
    assert set(rows) == {"baseline", "stream_priority_lc"}
    assert {r["status"] for r in rows.values()} == {"ok"}

    def result(policy: str) -> dict:
        return json.loads((outcome.run_dir / "trials" / rows[policy]["dir"] / "result.json")
                          .read_text())

    lc, base = result("stream_priority_lc"), result("baseline")
    assert lc["config"]["stream_priority"] == "lc" and base["config"]["stream_priority"] == "default"
    assert lc["stream_priority"]["latency_critical_streams"] == [2, 3]
    assert lc["stream_priority"]["applied"] is False and "emulated" in lc["stream_priority"]["reason"]
    notes = {p["name"]: p["notes"] for p in report["policies"]}
    assert any(n.startswith("stream priority lc not applied") and "emulated" in n
               for n in notes["stream_priority_lc"])
    assert not any("stream priority" in n for n in notes["baseline"])
