"""``agent.md``: the agent's state as a page a person reads (agent.json is the record)."""

from __future__ import annotations

from typing import Any


def _pct(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, (int, float)) else "-"


def _ratio(value: Any) -> str:
    return f"x{value:.2f}" if isinstance(value, (int, float)) else "-"


def render_markdown(state: dict[str, Any]) -> str:
    lines = [f"# agent: {state.get('status')}", "",
             f"- goal: `{state.get('goal')}`",
             f"- budget: {state.get('trials_used')} of {state.get('budget')} trials used",
             f"- proposer: {state.get('proposer')} ({len(state.get('candidates') or [])} candidate "
             "mitigations)", ""]
    rec = state.get("recommendation")
    if rec:
        lines += ["## Recommendation", "",
                  f"- mitigations: {', '.join(rec['mitigations']) or '(none)'}",
                  f"- cell: {rec.get('cell') or '-'}",
                  f"- confidence: {rec.get('confidence') if rec.get('confidence') is not None else '-'}"
                  + (f" ({rec['confidence_meaning']})" if rec.get("confidence_meaning") else ""),
                  f"- why: {rec.get('reason')}", ""]
        ev = rec.get("evidence")
        if ev:
            lines += [f"- evidence: {ev.get('run_dir')} (baseline {ev['baseline']['cell']} in "
                      f"{ev['baseline']['run_dir']})", ""]
    for it in state.get("iterations") or []:
        lines += [f"## Iteration {it['index']} ({it['status']})", "", it.get("note") or "", ""]
        if it.get("run_dir"):
            lines += [f"run directory: `{it['run_dir']}`", ""]
        for cell, why in zip(it.get("proposed") or [], it.get("reasons") or [], strict=False):
            lines.append(f"- tried {' + '.join(cell)}: {why}")
        if it.get("proposed"):
            lines.append("")
        if it.get("cells"):
            lines += ["| cell | trials | failure | error | step time vs baseline | goal |",
                      "|---|---|---|---|---|---|"]
            for c in it["cells"]:
                lines.append(f"| {c['cell']} | {c.get('trials')} | {_pct(c.get('failure_rate'))} | "
                             f"{_pct(c.get('error_rate'))} | {_ratio(c.get('step_time_ratio'))} | "
                             f"{'met' if c.get('meets_goal') else 'no'} |")
            lines.append("")
    if state.get("stop_reason"):
        lines += [f"stopped: {state['stop_reason']}", ""]
    return "\n".join(lines)
