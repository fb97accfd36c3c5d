"""Upstream AORTA's workloads that aorta-tui does not carry.

Upstream (``amd-aorta==0.3.0``) registers these under its ``aorta.workloads`` entry points.
A recipe that names one is still upstream's format, so it loads, validates and plans here
exactly as upstream plans it (``recipe validate`` and ``--dry-run`` note the gap); a real
run stops before the first trial with exit 3 and says which tool can run it. Any other name
that is not registered is a typo: a located error with the nearest registered name.
"""

from __future__ import annotations

UPSTREAM_ONLY_WORKLOADS: dict[str, str] = {
    "hrx": "HRX HIP-launch probes, built with hipcc against an HRX install",
    "hrx_perf": "HRX HIP performance kernels, built with hipcc against an HRX install",
    "tokenspeed_serve": "the TokenSpeed serving benchmark, run in its docker image",
}


def not_carried(name: str) -> str | None:
    """Why ``name`` cannot run here when it is one of upstream's workloads; else None."""
    what = UPSTREAM_ONLY_WORKLOADS.get(name)
    if what is None:
        return None
    return (f"workload {name!r} is upstream AORTA's ({what}); aorta-tui plans its recipes "
            "but does not carry the workload")
