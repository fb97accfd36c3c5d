"""Helpers for tracepoint probe sets: field checks and expressions built from format files."""

from __future__ import annotations

from aorta_tui.trace import tracefs
from aorta_tui.trace.probes.base import ProbeDetection
from aorta_tui.trace.tracefs import Field


def ident(name: str) -> str:
    from aorta_tui.trace.probes.base import ident as check

    return check(name)


def fields_of(ctx_tracefs, group: str, event: str) -> dict[str, Field] | None:
    if ctx_tracefs is None:
        return None
    return tracefs.event_format(ctx_tracefs, group, event)


def record_events(det: ProbeDetection, ctx_tracefs, *events: tuple[str, str]) -> list[dict[str, Field] | None]:
    """The format of each ``(group, event)``, noting it in ``det.found`` or ``det.missing``."""
    out = []
    for group, event in events:
        f = fields_of(ctx_tracefs, group, event)
        (det.found if f is not None else det.missing).append(f"{group}:{event}")
        out.append(f)
    return out


def num(fields: dict[str, Field], *names: str) -> str | None:
    """``args->NAME`` for the first numeric field present, else None."""
    for n in names:
        f = fields.get(n)
        if f is not None and not f.is_string:
            return f"args->{ident(n)}"
    return None


def text(fields: dict[str, Field], *names: str) -> str | None:
    for n in names:
        f = fields.get(n)
        if f is not None and f.is_string:
            return f"str(args->{ident(n)})"
    return None
