"""Where trials ran, for the batch output: a trial's placement and the per-node failure summary.

Read from each counted trial's ``result.json`` (``process.executor``); a run of the local
executor has no placement and gives no lines. The summary's point is the finding a cluster
sweep is for: a cell that fails only on one node.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from aorta_tui.core.process_record import ExecutorFacts, read_process_record
from aorta_tui.core.trial_contract import RESULT_FILE


def placement_text(result: dict[str, Any] | None) -> str:
    """`` [job 12_3 on node07, COMPLETED, queued 0.7 s]`` for a Slurm trial; else empty."""
    facts = _facts(result)
    if facts is None:
        return ""
    parts = [f"job {facts.job_id}"]
    if facts.node:
        parts[0] += f" on {facts.node}"
    gpus = facts.gpus.get("CUDA_VISIBLE_DEVICES") or facts.gpus.get("SLURM_JOB_GPUS")
    if gpus:
        parts.append(f"GPU {gpus}")
    parts.append(facts.state or "?")
    if facts.queue_wait_s is not None:
        parts.append(f"queued {facts.queue_wait_s:.1f} s")
    if facts.adopted:
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
        node = facts.node or "(no node: the job never ran)"
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


def _facts(result: dict[str, Any] | None) -> ExecutorFacts | None:
    """A Slurm trial's facts, read as the run directory reads its results (not strict: a damaged
    field reads as not recorded, and the summary and the trial's line show the rest)."""
    if not isinstance(result, dict):
        return None
    facts = read_process_record(result.get("process"), where=RESULT_FILE, strict=False).executor
    return facts if facts is not None and facts.kind == "slurm" else None
