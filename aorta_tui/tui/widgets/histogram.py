"""A log-bucket latency histogram drawn with block characters (no plotting dependency)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

BLOCKS = " ▏▎▍▌▋▊▉█"


TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


def is_time_unit(unit: str) -> bool:
    return unit in TIME_UNITS


def fmt_count(value: float) -> str:
    """A count (kernels queued, bytes): whole numbers with thousands separators, else 3 figures."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:.3g}"


def fmt_latency(value: float | None, unit: str) -> str:
    """A value of a snapshot in its unit: durations scaled to ns/µs/ms/s, counts as numbers
    followed by their unit (``queued`` is in kernels: "3 kernels", never "3µs")."""
    if value is None:
        return "n/a"
    scale = TIME_UNITS.get(unit)
    if scale is None:
        return f"{fmt_count(value)} {unit}".rstrip()
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
    labels = [_bucket_label(lo, hi, unit) for lo, hi, _n in rows]
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


def _bucket_label(lo: float, hi: float, unit: str) -> str:
    if is_time_unit(unit):
        return f"{fmt_latency(lo, unit)}–{fmt_latency(hi, unit)}"
    # Counts: [lo, hi) of whole numbers reads as the values it holds ("3", "16–17").
    if lo.is_integer() and hi.is_integer():
        return fmt_count(lo) if hi - lo <= 1 else f"{fmt_count(lo)}–{fmt_count(hi - 1)}"
    return f"{fmt_count(lo)}–{fmt_count(hi)}"


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
