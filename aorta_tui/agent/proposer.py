"""The builtin proposer: deterministic, greedy over single mitigations, then pairs of the best.

It reads only what the sweeps wrote (each cell's figures from ``matrix.json``, as the typed
``state.CellResult``) and writes down
why it picked each cell, so ``agent.md`` can say it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Protocol

# How many of the best single mitigations the pair phase combines.
PAIR_POOL = 4

# conflicts(a, b): whether two mitigations cannot share a cell (they set one variable differently)
Conflicts = Callable[[str, str], bool]


class Figures(Protocol):
    """What ranking reads of a cell: ``state.CellResult`` and ``state.Baseline`` both are."""

    @property
    def failure_rate(self) -> float | None: ...
    @property
    def error_rate(self) -> float | None: ...
    @property
    def step_time_ratio(self) -> float | None: ...


@dataclass(frozen=True)
class Proposal:
    cells: list[tuple[str, ...]]  # mitigation sets, each a new cell
    reasons: list[str]  # one per cell
    note: str  # the iteration's reasoning in a sentence


def score(cell: Figures) -> tuple[float, float]:
    """Lower is better: the share of trials that failed or errored, then the speed ratio."""
    failure, error = cell.failure_rate, cell.error_rate
    if failure is None or error is None:  # no finished trial: known nothing, ranked last
        return float("inf"), float("inf")
    bad = failure + error
    ratio = cell.step_time_ratio
    return bad, ratio if isinstance(ratio, (int, float)) else float("inf")


def builtin_propose(candidates: Sequence[str], tried: Mapping[tuple[str, ...], Figures],
                    conflicts: Conflicts, slots: int) -> Proposal:
    """Up to ``slots`` new cells. ``tried`` maps every mitigation set already run to its
    figures; ``conflicts(a, b)`` says whether two mitigations cannot share a cell."""
    if slots <= 0:
        return Proposal([], [], "no budget left for another cell")
    singles: list[tuple[str, ...]] = [(m,) for m in candidates if (m,) not in tried]
    if singles:
        picked = singles[:slots]
        total = len(candidates)
        reasons = [f"single mitigation {candidates.index(c[0]) + 1} of {total} not tried yet"
                   for c in picked]
        return Proposal(picked, reasons, f"greedy over single mitigations: {len(singles)} of "
                        f"{total} not tried yet; running {len(picked)}")
    ranked = sorted((s for s in tried if len(s) == 1 and s[0] in candidates),
                    key=lambda s: (score(tried[s]), s))
    pool = ranked[:PAIR_POOL]
    pairs = []
    for a, b in combinations(pool, 2):
        pair = tuple(sorted((a[0], b[0])))
        if pair not in tried and not conflicts(a[0], b[0]):
            pairs.append((pair, a, b))
    if not pairs:
        return Proposal([], [], f"every single mitigation and every pair of the best {len(pool)} "
                        "has been tried (or conflicts): nothing left to propose")
    chosen = pairs[:slots]
    reasons = [f"pair of two of the best singles: {a[0]} ({cell_figures(tried[a])}) + {b[0]} "
               f"({cell_figures(tried[b])})" for _pair, a, b in chosen]
    return Proposal([p for p, _a, _b in chosen], reasons,
                    f"no single mitigation met the goal: pairs of the best {len(pool)} singles")


def cell_figures(cell: Figures) -> str:
    """A cell's figures in words; a rate its cell never measured says so (not 0%)."""
    if cell.failure_rate is None or cell.error_rate is None:
        return "no finished trial: rates not available"
    ratio = cell.step_time_ratio
    speed = f", step time x{ratio:.2f}" if isinstance(ratio, (int, float)) else ""
    return f"failure {cell.failure_rate:.0%}, error {cell.error_rate:.0%}{speed}"
