"""Horizontal bars with a confidence interval drawn on the same scale (no plotting library)."""

from __future__ import annotations

from rich.text import Text


def render_interval_bars(rows: list[tuple[str, float | None, float | None, float | None, str]],
                         unit: str, width: int) -> Text:
    """One line per (label, median, ci_low, ci_high, note): ``█`` up to the median, ``├──┤``
    spanning the interval. A missing median prints the note ("not available (...)")."""
    values = [v for _l, m, lo, hi, _n in rows for v in (m, lo, hi) if v is not None]
    out = Text()
    if not rows:
        return out
    label_w = min(28, max(len(r[0]) for r in rows))
    top = max(values) if values else 0.0
    bar_w = max(10, width - label_w - 16)
    for label, median, low, high, note in rows:
        out.append(f"{label[:label_w]:<{label_w}} ", style="bold")
        if median is None or top <= 0:
            out.append(f"not available ({note})\n" if note else "not available\n", style="dim")
            continue
        cells = [" "] * bar_w
        styles = [""] * bar_w
        end = round(median / top * (bar_w - 1))
        for i in range(end + 1):
            cells[i], styles[i] = "█", "cyan"
        if low is not None and high is not None:
            lo_i, hi_i = round(low / top * (bar_w - 1)), round(high / top * (bar_w - 1))
            for i in range(lo_i, hi_i + 1):
                if cells[i] == " ":
                    cells[i], styles[i] = "─", "magenta"
            cells[lo_i], styles[lo_i] = "├", "bold magenta"
            cells[hi_i], styles[hi_i] = "┤", "bold magenta"
        for ch, st in zip(cells, styles, strict=True):
            out.append(ch, style=st)
        out.append(f" {median:.4g} {unit}\n")
    out.rstrip()
    return out
