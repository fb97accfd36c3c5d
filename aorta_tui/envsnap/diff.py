"""Diff two snapshots field by field, grouped by section, ranked by what the difference can do.

Works on aorta-tui snapshots, on two upstream AORTA env.json files (generically, every scalar
is a field), and on one of each (only the fields both record, through ``upstream.COMMON``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from aorta_tui.core.inputs import Json
from aorta_tui.core.text import inert
from aorta_tui.envsnap import upstream
from aorta_tui.envsnap.doc import EnvSnapshot, Field, Snapshot, UpstreamSnapshot
from aorta_tui.envsnap.rules import RANKS, classify
from aorta_tui.envsnap.schema import section_of

CHANGES = ("added", "removed", "changed")


@dataclass(frozen=True)
class DiffEntry:
    path: str
    section: str
    change: str  # added | removed | changed
    rank: str  # numerics | scheduling | informational
    a_value: Json
    b_value: Json
    provenance_a: str | None
    provenance_b: str | None
    a_state: str | None = None
    b_state: str | None = None
    volatile: bool = False

    def to_dict(self) -> dict[str, Json]:
        return asdict(self)


@dataclass
class DiffReport:
    entries: list[DiffEntry]
    hidden_volatile: int = 0  # volatile differences left out (see include_volatile)
    mode: str = "aorta-tui"  # aorta-tui | upstream | mixed
    compared_fields: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def has_relevant_differences(self) -> bool:
        return any(e.rank in ("numerics", "scheduling") for e in self.entries)

    def counts(self) -> dict[str, int]:
        out = {r: 0 for r in RANKS}
        for e in self.entries:
            out[e.rank] += 1
        return out

    def by_section(self) -> dict[str, list[DiffEntry]]:
        groups: dict[str, list[DiffEntry]] = {}
        for e in self.entries:
            groups.setdefault(e.section, []).append(e)
        return groups

    def filtered(self, section: str | None) -> DiffReport:
        if section is None:
            return self
        return DiffReport([e for e in self.entries if e.section == section], self.hidden_volatile,
                          self.mode, self.compared_fields, list(self.notes))

    def to_dict(self) -> dict[str, Json]:
        return {
            "mode": self.mode,
            "compared_fields": self.compared_fields,
            "counts": {rank: n for rank, n in self.counts().items()},
            "hidden_volatile": self.hidden_volatile,
            "has_relevant_differences": self.has_relevant_differences,
            "notes": list(self.notes),
            "entries": [e.to_dict() for e in self.entries],
        }


def _rank_order(entry: DiffEntry) -> tuple[int, str]:
    return (RANKS.index(entry.rank), entry.path)


def diff_snapshots(a: Snapshot, b: Snapshot, *, include_volatile: bool = False) -> DiffReport:
    notes: list[str] = []
    if isinstance(a, UpstreamSnapshot) and isinstance(b, UpstreamSnapshot):
        mode, flavour = "upstream", "upstream"
        la, lb = upstream.leaves(a.data), upstream.leaves(b.data)
    elif isinstance(a, UpstreamSnapshot) or isinstance(b, UpstreamSnapshot):
        mode, flavour = "mixed", "aorta-tui"
        la, lb = _mixed_side(a), _mixed_side(b)
        common = set(la) & set(lb)
        notes.append(f"one side is an upstream AORTA env.json: compared the {len(common)} fields "
                     "both record (see docs/envsnap.md, 'Reading upstream env.json')")
        la = {k: v for k, v in la.items() if k in common}
        lb = {k: v for k, v in lb.items() if k in common}
    else:
        mode, flavour = "aorta-tui", "aorta-tui"
        la, lb = dict(a.leaves()), dict(b.leaves())

    entries: list[DiffEntry] = []
    hidden = 0
    for path in sorted(set(la) | set(lb)):
        x, y = la.get(path), lb.get(path)
        # Upstream has no states (a null is just null), so a mixed diff compares values only.
        if x is not None and y is not None and x.value == y.value and (
                mode == "mixed" or x.state == y.state):
            continue
        change = "added" if x is None else "removed" if y is None else "changed"
        rank, volatile = classify(path, flavour)
        if volatile and not include_volatile:
            hidden += 1
            continue
        entries.append(DiffEntry(
            path=path, section=section_of(path), change=change, rank=rank,
            a_value=None if x is None else x.value, b_value=None if y is None else y.value,
            provenance_a=None if x is None else x.source,
            provenance_b=None if y is None else y.source,
            a_state=None if x is None else x.state, b_state=None if y is None else y.state,
            volatile=volatile,
        ))
    entries.sort(key=_rank_order)
    return DiffReport(entries, hidden, mode, len(set(la) | set(lb)), notes)


def _mixed_side(snapshot: Snapshot) -> dict[str, Field]:
    """One side of a mixed diff: upstream's fields projected onto our paths, or ours."""
    if isinstance(snapshot, EnvSnapshot):
        return dict(snapshot.leaves())
    return upstream.project(snapshot.data)


UNSET = "unset"  # a field without a value (JSON null): the word the CLI and the TUI both show


def render_value(value: Json, width: int = 48) -> str:
    """A snapshot's value as one printable line (a snapshot is a file anyone may have written:
    its escapes are shown, never obeyed, core/text.py)."""
    text = UNSET if value is None else value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return inert(text, width)


def render_text(report: DiffReport) -> str:
    """Plain text: one block per section, ranks marked, numerics first within each section."""
    if not report.entries:
        tail = f" ({report.hidden_volatile} volatile differences hidden; --all shows them)" if report.hidden_volatile else ""
        return f"no differences in {report.compared_fields} fields{tail}\n"
    lines = []
    counts = report.counts()
    lines.append(f"{len(report.entries)} differences: {counts['numerics']} numerics, "
                 f"{counts['scheduling']} scheduling, {counts['informational']} informational"
                 + (f"; {report.hidden_volatile} volatile hidden (--all)" if report.hidden_volatile else ""))
    lines.extend(f"note: {inert(n)}" for n in report.notes)
    groups = report.by_section()
    order = sorted(groups, key=lambda s: min(RANKS.index(e.rank) for e in groups[s]))
    for section in order:
        lines.append("")
        lines.append(f"[{inert(section)}]")
        for e in groups[section]:
            state_a = "" if e.a_state in (None, "ok") else f" ({inert(e.a_state)})"
            state_b = "" if e.b_state in (None, "ok") else f" ({inert(e.b_state)})"
            lines.append(f"  {e.rank:<13} {e.change:<8} {inert(e.path)}")
            if e.change != "added":
                lines.append(f"      A: {render_value(e.a_value, 90)}{state_a}")
            if e.change != "removed":
                lines.append(f"      B: {render_value(e.b_value, 90)}{state_b}")
    return "\n".join(lines) + "\n"
