"""Where trials ran, for the batch output: a trial's placement and the per-node failure summary.

Read from each counted trial's ``result.json`` (``process.executor``); a run of the local
executor has no placement and gives no lines. The summary's point is the finding a cluster
sweep is for: a cell that fails only on one node.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any


def placement_text(result: dict[str, Any] | None) -> str:
    """`` [job 12_3 on node07, COMPLETED, queued 0.7 s]`` for a Slurm trial; else empty."""
    facts = _facts(result)
    if facts is None:
        return ""
    parts = [f"job {facts.get('job_id')}"]
    if facts.get("node"):
        parts[0] += f" on {facts['node']}"
    gpus = (facts.get("gpus") or {}).get("CUDA_VISIBLE_DEVICES") or (facts.get("gpus") or {}).get("SLURM_JOB_GPUS")
    if gpus:
        parts.append(f"GPU {gpus}")
    parts.append(str(facts.get("state") or "?"))
    wait = facts.get("queue_wait_s")
    if isinstance(wait, (int, float)):
        parts.append(f"queued {wait:.1f} s")
    if facts.get("adopted"):
        parts.append("adopted")
    return " [" + ", ".join(parts) + "]"


def node_summary(run_dir: Path) -> list[str]:
    """Lines of the per-node failure summary of ``run_dir`` (empty without Slurm trials)."""
    from aorta_tui.core.errors import AortaError
    from aorta_tui.store.plan_doc import read_plan_or_none
    from aorta_tui.store.resume import read_trial_result, resume_state

    plan = read_plan_or_none(run_dir)  # typed, through the run's file layer: never a hang
    if plan is None:  # no plan, or a damaged one: no summary
        return []
    try:
        completed = resume_state(run_dir, plan.trial_ids).completed
    except AortaError:
        return []
    per_node: dict[str, dict[str, int]] = defaultdict(lambda: {"pass": 0, "fail": 0, "error": 0})
    per_cell: dict[str, dict[str, dict[str, int]]] = defaultdict(
        lambda: defaultdict(lambda: {"pass": 0, "fail": 0, "error": 0}))
    for tid in sorted(completed):
        result = read_trial_result(run_dir, tid)
        facts = _facts(result)
        if facts is None or result is None:
            continue
        node = str(facts.get("node") or "(no node: the job never ran)")
        verdict = str(result.get("verdict"))
        if verdict in ("pass", "fail", "error"):
            per_node[node][verdict] += 1
            per_cell[str(result.get("cell"))][node][verdict] += 1
    if not per_node:
        return []
    lines = ["per node (Slurm):"]
    for node, c in sorted(per_node.items()):
        lines.append(f"  {node}: {c['pass']} pass, {c['fail']} fail, {c['error']} error")
    for cell, nodes in sorted(per_cell.items()):
        bad = {n for n, c in nodes.items() if c["fail"] or c["error"]}
        good_elsewhere = sum(c["pass"] for n, c in nodes.items() if n not in bad)
        if len(bad) == 1 and good_elsewhere:
            (node,) = bad
            c = nodes[node]
            lines.append(f"  finding: cell {cell} failed only on {node} ({c['fail'] + c['error']} of "
                         f"{sum(c.values())} trials there; {good_elsewhere} passed on other nodes)")
    return lines


def _facts(result: dict[str, Any] | None) -> dict[str, Any] | None:
    if not isinstance(result, dict):
        return None
    process = result.get("process")
    facts = process.get("executor") if isinstance(process, dict) else None
    return facts if isinstance(facts, dict) and facts.get("kind") == "slurm" else None
