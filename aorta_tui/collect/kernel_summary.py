"""The one summary of a profiler's per-kernel times: rocprof, proton and ncu report alike.

Upstream's parsers give each collector the same four metrics (kernel count, GPU time, the top
kernel's time and the top kernels' names); one function makes them, so the three agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

TOP_N = 5  # kernels named in ``<prefix>_top_kernels``, as upstream


def kernel_summary(prefix: str, ms: dict[str, float],
                   calls: Mapping[str, int | None] | None) -> dict[str, Any]:
    """``<prefix>_kernel_count`` (when ``calls`` is known), ``_gpu_time_ms``, ``_top_kernel_ms``
    and ``_top_kernels`` from milliseconds per kernel; {} when there is nothing finite to sum."""
    if not ms:
        return {}
    ranked = sorted(ms.items(), key=lambda kv: kv[1], reverse=True)
    total = sum(ms.values())
    if not math.isfinite(total):
        return {}
    out: dict[str, Any] = {}
    if calls is not None:
        out[f"{prefix}_kernel_count"] = sum(v or 0 for v in calls.values())
    out[f"{prefix}_gpu_time_ms"] = total
    out[f"{prefix}_top_kernel_ms"] = ranked[0][1]
    out[f"{prefix}_top_kernels"] = [n for n, _ in ranked[:TOP_N]]
    return out
