"""A log-bucket latency histogram drawn with block characters (no plotting dependency)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

BLOCKS = " ▏▎▍▌▋▊▉█"


def fmt_latency(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    scale = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}.get(unit)
    if scale is None:
        return f"{value:.4g}{unit}"
    seconds = value * scale
    for factor, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= factor:
            return f"{seconds / factor:.3g}{name}"
    return f"{seconds / 1e-9:.3g}ns"


def bar(fraction: float, width: int) -> str:
    cells = max(0.0, min(1.0, fraction)) * width
    full = int(cells)
    rest = int((cells - full) * (len(BLOCKS) - 1))
    return "█" * full + (BLOCKS[rest] if rest and full < width else "")


def render_histogram(buckets: list[list[float]], unit: str, width: int, max_rows: int) -> Text:
    """Rows of ``[low, high) count`` with a proportional bar; empty edges trimmed.

    When there are more non-empty buckets than rows, neighbouring buckets are merged (their
    counts added), so the picture keeps its shape rather than losing its tails.
    """
    rows = [(float(lo), float(hi), int(n)) for lo, hi, n in buckets]
    while rows and rows[0][2] == 0:
        rows.pop(0)
    while rows and rows[-1][2] == 0:
        rows.pop()
    if not rows:
        return Text("no events yet", style="dim")
    max_rows = max(1, max_rows)
    if len(rows) > max_rows:
        group = -(-len(rows) // max_rows)
        rows = [
            (chunk[0][0], chunk[-1][1], sum(r[2] for r in chunk))
            for chunk in (rows[i : i + group] for i in range(0, len(rows), group))
        ]
    peak = max(n for _lo, _hi, n in rows) or 1
    labels = [f"{fmt_latency(lo, unit)}–{fmt_latency(hi, unit)}" for lo, hi, _n in rows]
    label_w = max(len(label) for label in labels)
    count_w = max(len(str(n)) for _lo, _hi, n in rows)
    bar_w = max(4, width - label_w - count_w - 4)
    out = Text()
    for label, (_lo, _hi, n) in zip(labels, rows, strict=False):
        out.append(f"{label:>{label_w}} ", style="bold")
        out.append(f"{bar(n / peak, bar_w):<{bar_w}}", style="cyan")
        out.append(f" {n:>{count_w}}\n")
    out.rstrip()
    return out


class LogHistogram(Static):
    """Shows the latest snapshot's buckets; ``show`` is cheap to call at a fixed cadence."""

    DEFAULT_CSS = "LogHistogram { height: 1fr; min-height: 4; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("no events yet", **kwargs)
        self._buckets: list[list[float]] = []
        self._unit = "ns"

    def show(self, buckets: list[list[float]], unit: str) -> None:
        self._buckets, self._unit = buckets, unit
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        width = self.content_size.width or 60
        height = self.content_size.height or 10
        # The widget's size comes from the layout, not from its content: repaint only.
        self.update(render_histogram(self._buckets, self._unit, width, height), layout=False)
