"""Upstream AORTA's 22 detector ids, each mapped to what it disables here.

Recipes written for upstream name detectors as ``tierN:<upstream id>`` in
``disable_detectors`` (``tier3:vram_growth``, ``tier4:nan_signature``, ``tier1:sigsegv``).
Each is accepted and disables exactly the detections of ours that upstream's detector would
have produced. Three need more than an id:

- ``tier1:sigsegv`` / ``sigabrt`` / ``sigbus``: ours has one ``killed_by_signal``; the alias
  disables it only for that signal.
- ``tier1:exit_nonzero``: upstream reports any other signal death as ``exit_nonzero`` too, so
  the alias also disables ``killed_by_signal`` for signals other than SEGV/ABRT/BUS.
- ``tier3:vram_growth`` / ``tier3:thermal_throttle``: no counterpart (no whole-GPU VRAM or
  throttle-counter detector here); accepted, disable nothing, and recipe validation says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class UpstreamAlias:
    """What an upstream detector id disables here."""

    ours: tuple[str, ...] = ()  # our detector ids (disabled whatever they captured)
    signals: tuple[str, ...] = ()  # killed_by_signal disabled for these signal names
    other_signals: bool = False  # ... and for every signal except UPSTREAM_SIGNALS
    no_counterpart: str | None = None  # why nothing here corresponds to it


UPSTREAM_SIGNALS = ("SIGSEGV", "SIGABRT", "SIGBUS")

UPSTREAM_ALIASES: dict[str, UpstreamAlias] = {
    "tier1:timeout": UpstreamAlias(("timeout",)),
    "tier1:sigsegv": UpstreamAlias(signals=("SIGSEGV",)),
    "tier1:sigabrt": UpstreamAlias(signals=("SIGABRT", "SIGIOT")),
    "tier1:sigbus": UpstreamAlias(signals=("SIGBUS",)),
    "tier1:exit_nonzero": UpstreamAlias(("exit_nonzero",), other_signals=True),
    "tier1:coredump": UpstreamAlias(("core_dumped",)),
    "tier1:exec_failed": UpstreamAlias(("exec_failed",)),
    "tier2:hang": UpstreamAlias(("hang",)),
    "tier3:amdgpu_reset": UpstreamAlias(("amdgpu_reset",)),
    "tier3:sdma_timeout": UpstreamAlias(("amdgpu_sdma_timeout",)),
    "tier3:vm_l2_fault": UpstreamAlias(("amdgpu_vm_fault",)),
    "tier3:xgmi_link_error": UpstreamAlias(("xgmi_link_error",)),
    "tier3:pcie_aer_fatal": UpstreamAlias(("pcie_aer_fatal",)),
    "tier3:vram_growth": UpstreamAlias(no_counterpart=(
        "upstream's whole-GPU VRAM-growth warning (amd-smi before/after the trial) has no "
        "counterpart in aorta-tui; each trial's own peak GPU memory is in result.json")),
    "tier3:thermal_throttle": UpstreamAlias(no_counterpart=(
        "upstream's thermal-throttle counter detector has no counterpart in aorta-tui (tier 3 "
        "here reads the kernel log and the GPU ECC counters)")),
    "tier4:python_traceback": UpstreamAlias(("python_traceback",)),
    "tier4:hip_error": UpstreamAlias(("hip_error",)),
    "tier4:cuda_error": UpstreamAlias(("cuda_error",)),
    "tier4:rocm_error": UpstreamAlias(("rocm_error",)),
    "tier4:nccl_rccl_error": UpstreamAlias(("nccl_error",)),
    "tier4:collective_timeout": UpstreamAlias(("collective_timeout",)),
    "tier4:nan_signature": UpstreamAlias(("nan_loss",)),
}


def upstream_alias(token: str) -> UpstreamAlias | None:
    """The alias for ``token`` (``tierN:id``, prefix case-insensitive), else None."""
    prefix, sep, ident = token.strip().partition(":")
    if not sep:
        return None
    return UPSTREAM_ALIASES.get(f"{prefix.strip().lower()}:{ident.strip()}")


@dataclass(frozen=True)
class DisableSet:
    """``disable_detectors`` with upstream aliases expanded: ``names`` holds our ids, tier
    tokens and ``tierN:id`` / ``custom:id`` tokens; ``signals`` the signal names for which
    ``killed_by_signal`` is off (``"*other*"``: every signal upstream calls exit_nonzero)."""

    names: frozenset[str]
    signals: frozenset[str]

    def is_disabled(self, tier: int, det_id: str, captures: dict | None = None) -> bool:
        n = self.names
        if det_id in n or f"tier{tier}" in n or f"tier{tier}:{det_id}" in n:
            return True
        if tier == 5 and f"custom:{det_id}" in n:
            return True
        if det_id == "killed_by_signal" and captures is not None and self.signals:
            name = str(captures.get("name") or "")
            if name in self.signals:
                return True
            return "*other*" in self.signals and name not in UPSTREAM_SIGNALS + ("SIGIOT",)
        return False


def expand_disabled(tokens: Iterable[str] | None) -> DisableSet:
    names: set[str] = set()
    signals: set[str] = set()
    for raw in tokens or ():
        token = str(raw).strip()
        alias = upstream_alias(token)
        if alias is None:
            prefix, sep, ident = token.partition(":")
            names.add(f"{prefix.strip().lower()}:{ident.strip()}" if sep else token)
            if token.lower() in ("tier1", "tier2", "tier3", "tier4", "tier5"):
                names.add(token.lower())
            continue
        names.update(alias.ours)
        signals.update(alias.signals)
        if alias.other_signals:
            signals.add("*other*")
    return DisableSet(frozenset(names), frozenset(signals))


def no_counterpart_notes(tokens: Iterable[str] | None) -> list[str]:
    """One note per upstream id in ``tokens`` that disables nothing here (recipe validate)."""
    out = []
    for raw in tokens or ():
        alias = upstream_alias(str(raw))
        if alias is not None and alias.no_counterpart:
            out.append(f"disable_detectors: {str(raw).strip()!r} is accepted and disables "
                       f"nothing: {alias.no_counterpart}")
    return out


__all__ = ["UPSTREAM_ALIASES", "DisableSet", "UpstreamAlias", "expand_disabled",
           "no_counterpart_notes", "upstream_alias"]
