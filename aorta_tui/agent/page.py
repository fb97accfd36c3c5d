"""``agent.md``: the agent's state as a page a person reads (agent.json is the record)."""

from __future__ import annotations

from aorta_tui.agent.state import AgentState, Iteration, Recommendation


def _pct(value: float | None) -> str:
    return f"{value:.0%}" if isinstance(value, (int, float)) else "-"


def _ratio(value: float | None) -> str:
    return f"x{value:.2f}" if isinstance(value, (int, float)) else "-"


def render_markdown(state: AgentState) -> str:
    lines = [f"# agent: {state.status}", "",
             f"- goal: `{state.goal}`",
             f"- budget: {state.trials_used} of {state.budget} trials used",
             f"- proposer: {state.proposer} ({len(state.candidates)} candidate mitigations)", ""]
    if state.recommendation is not None:
        lines += _recommendation(state.recommendation)
    for it in state.iterations:
        lines += _iteration(it)
    if state.stop_reason:
        lines += [f"stopped: {state.stop_reason}", ""]
    return "\n".join(lines)


def _recommendation(rec: Recommendation) -> list[str]:
    confidence = rec.confidence if rec.confidence is not None else "-"
    lines = ["## Recommendation", "",
             f"- mitigations: {', '.join(rec.mitigations) or '(none)'}",
             f"- cell: {rec.cell or '-'}",
             f"- confidence: {confidence}"
             + (f" ({rec.confidence_meaning})" if rec.confidence_meaning else ""),
             f"- why: {rec.reason}", ""]
    ev = rec.evidence
    if ev is not None:
        lines += [f"- evidence: {ev.cell.run_dir} (baseline {ev.baseline.cell} in "
                  f"{ev.baseline.run_dir})", ""]
    return lines


def _iteration(it: Iteration) -> list[str]:
    lines = [f"## Iteration {it.index} ({it.status})", "", it.note, ""]
    if it.run_dir:
        lines += [f"run directory: `{it.run_dir}`", ""]
    for cell, why in zip(it.proposed, it.reasons, strict=False):
        lines.append(f"- tried {' + '.join(cell)}: {why}")
    if it.proposed:
        lines.append("")
    if it.cells:
        lines += ["| cell | trials | failure | error | step time vs baseline | goal |",
                  "|---|---|---|---|---|---|"]
        for c in it.cells:
            lines.append(f"| {c.cell} | {c.trials} | {_pct(c.failure_rate)} | "
                         f"{_pct(c.error_rate)} | {_ratio(c.step_time_ratio)} | "
                         f"{'met' if c.meets_goal else 'no'} |")
        lines.append("")
    return lines
