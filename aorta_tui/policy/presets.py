"""Policy definitions and the built-in presets.

A policy is what differs between the arms of a comparison: environment variables the GPU
runtime reads once at start-up (so they are set when the trial's process is created, never
inside a running one), extra options for ``aorta-tui queue run``, and optional device-wide
knobs (clock level, power limit) that are applied only with ``--allow-gpu-control``.

The first seven presets keep upstream AORTA's names and meanings (``amd-aorta`` 0.3.0,
``hw_queue_eval/core/policy_evaluator.py``); the CUDA ones are this project's additions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.suggest import did_you_mean_any

POLICY_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
VENDORS = ("any", "cuda", "rocm")
KINDS = ("scheduling", "memory", "launch", "custom")


# the bounds of each knob: what a policy file may ask (policy/file.py) and what the privileged
# helper accepts (policy/privileged.py)
CLOCK_LEVEL_RANGE = (0, 7)
POWER_LIMIT_W_RANGE = (10, 5000)


@dataclass(frozen=True)
class GpuControlSettings:
    """Device-wide knobs. ``clock_level`` is 0 (lowest) .. 7 (highest), as rocm-smi's sclk
    levels; on NVIDIA the level picks a point of the supported graphics-clock list."""

    clock_level: int | None = None
    power_limit_w: int | None = None

    def is_empty(self) -> bool:
        return self.clock_level is None and self.power_limit_w is None

    def to_dict(self) -> dict[str, Any]:
        return {"clock_level": self.clock_level, "power_limit_w": self.power_limit_w}


@dataclass(frozen=True)
class Policy:
    name: str
    description: str = ""
    kind: str = "custom"
    vendor: str = "any"  # which runtime reads the knobs: any, cuda, rocm
    env: Mapping[str, str] = field(default_factory=dict)
    harness_args: tuple[str, ...] = ()  # extra `aorta-tui queue run` options
    gpu_control: GpuControlSettings = field(default_factory=GpuControlSettings)
    source: str = "builtin"  # "builtin" or "FILE:LINE" of a user definition

    def has_process_effect(self) -> bool:
        """True when the policy changes the trial process (env or harness options)."""
        return bool(self.env) or bool(self.harness_args)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "kind": self.kind,
            "vendor": self.vendor,
            "env": dict(self.env),
            "harness_args": list(self.harness_args),
            "gpu_control": self.gpu_control.to_dict(),
            "source": self.source,
        }

    def summary(self) -> str:
        """One line saying what the policy sets."""
        parts = [f"{k}={v}" for k, v in self.env.items()]
        parts += [" ".join(self.harness_args)] if self.harness_args else []
        gc = self.gpu_control
        if gc.clock_level is not None:
            parts.append(f"clock level {gc.clock_level} (gpu control)")
        if gc.power_limit_w is not None:
            parts.append(f"power limit {gc.power_limit_w} W (gpu control)")
        return ", ".join(parts) or "nothing (the reference)"


def _p(name: str, description: str, kind: str, vendor: str = "any", **kw: Any) -> Policy:
    return Policy(name=name, description=description, kind=kind, vendor=vendor, **kw)


#: The option of `aorta-tui queue run` that gives latency-critical streams high priority.
STREAM_PRIORITY_ARGS: tuple[str, ...] = ("--stream-priority", "lc")
#: The option of `aorta-tui queue run` that captures each stream's iteration as a CUDA graph.
GRAPH_ARGS: tuple[str, ...] = ("--graph",)

BUILTIN_POLICIES: tuple[Policy, ...] = (
    _p("baseline", "default scheduling, no knobs: the reference every policy is compared to",
       "scheduling"),
    _p("priority_lc", "latency-critical: highest clock level (device-wide, needs "
       "--allow-gpu-control)", "scheduling",
       gpu_control=GpuControlSettings(clock_level=7)),
    _p("priority_be", "best-effort: low clock level and a 150 W power cap (device-wide, needs "
       "--allow-gpu-control)", "scheduling",
       gpu_control=GpuControlSettings(clock_level=2, power_limit_w=150)),
    _p("multi_tenant_fair", "HIP runtime uses at most 2 hardware queues per device",
       "scheduling", "rocm", env={"GPU_MAX_HW_QUEUES": "2"}),
    _p("high_queue", "HIP runtime uses up to 8 hardware queues per device", "scheduling",
       "rocm", env={"GPU_MAX_HW_QUEUES": "8"}),
    _p("default_uvm", "XNACK on: retryable GPU page faults (unified memory migrates on demand)",
       "memory", "rocm", env={"HSA_XNACK": "1"}),
    _p("xnack_off", "XNACK off: no retryable page faults", "memory", "rocm",
       env={"HSA_XNACK": "0"}),
    _p("cuda_max_connections_1", "one hardware work queue (connection) shared by all streams: "
       "independent streams serialise behind each other", "scheduling", "cuda",
       env={"CUDA_DEVICE_MAX_CONNECTIONS": "1"}),
    _p("cuda_max_connections_8", "8 hardware work queues (the CUDA default)", "scheduling",
       "cuda", env={"CUDA_DEVICE_MAX_CONNECTIONS": "8"}),
    _p("cuda_max_connections_32", "32 hardware work queues (the maximum)", "scheduling", "cuda",
       env={"CUDA_DEVICE_MAX_CONNECTIONS": "32"}),
    _p("cuda_launch_blocking", "every kernel launch waits for the kernel to finish", "launch",
       "cuda", env={"CUDA_LAUNCH_BLOCKING": "1"}),
    _p("stream_priority_lc", "latency-critical streams are created with the highest stream "
       "priority (a `queue run` option, any vendor with stream priorities)", "scheduling",
       harness_args=STREAM_PRIORITY_ARGS),
    _p("cuda_module_loading_eager", "load every kernel module at context creation", "launch",
       "cuda", env={"CUDA_MODULE_LOADING": "EAGER"}),
    _p("cuda_module_loading_lazy", "load kernel modules on first use (the default since "
       "CUDA 12.2)", "launch", "cuda", env={"CUDA_MODULE_LOADING": "LAZY"}),
    _p("cuda_graphs", "each stream's iteration captured once as a CUDA graph (HIP graph on "
       "ROCm) and replayed: what graphs buy a launch-bound job (a `queue run` option)",
       "launch", harness_args=GRAPH_ARGS),
)


def check_policy(policy: Policy) -> None:
    """Settings one policy cannot combine: refused before any trial runs, naming where it is
    defined. A graph captured under CUDA_LAUNCH_BLOCKING=1 would measure neither setting."""
    blocking = str(policy.env.get("CUDA_LAUNCH_BLOCKING", "")).strip()
    if "--graph" in policy.harness_args and blocking not in ("", "0"):
        raise UsageError(
            f"policy {policy.name!r} sets CUDA_LAUNCH_BLOCKING={blocking} and --graph: stream "
            "capture cannot run under launch-blocking mode",
            location=None if policy.source == "builtin" else policy.source,
            hint="keep them in two policies (cuda_launch_blocking and cuda_graphs) and compare both")


BUILTIN_BY_NAME: dict[str, Policy] = {p.name: p for p in BUILTIN_POLICIES}

#: Other names of a built-in policy: the sweep's mitigation of the same knob is spelt after its
#: variable (``cuda_device_max_connections_1``, CUDA_DEVICE_MAX_CONNECTIONS=1). Either name
#: resolves to the policy; the comparison and its report use the policy's own name.
POLICY_ALIASES: dict[str, str] = {
    f"cuda_device_max_connections_{n}": f"cuda_max_connections_{n}" for n in (1, 8, 32)
}


def alias_note(name: str) -> str | None:
    """The note said when ``name`` is an alias: which policy it is, and why two names."""
    target = POLICY_ALIASES.get(name.strip())
    if target is None:
        return None
    return (f"{name.strip()} is the mitigation's name for policy {target} (the same "
            f"CUDA_DEVICE_MAX_CONNECTIONS setting); the comparison reports it as {target}")


def unknown_policy_hint(name: str, known: Iterable[str]) -> str:
    return (did_you_mean_any(name, known, cutoff=0.5, joiner=" or ")
            or "run `aorta-tui policy list` to see the known policies")


def resolve_policies(names: Iterable[str], user: Iterable[Policy] = ()) -> list[Policy]:
    """Look each name up among the built-ins and the user's policies, in the given order.

    Unknown names are an error with a did-you-mean; a name given twice is an error too (a
    comparison arm must be distinct).
    """
    table: dict[str, Policy] = dict(BUILTIN_BY_NAME)
    for p in user:
        table[p.name] = p
    out: list[Policy] = []
    seen: set[str] = set()
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        if name not in table and name in POLICY_ALIASES:
            name = POLICY_ALIASES[name]  # alias_note(raw) says so where the CLI prints notes
        if name not in table:
            raise UsageError(f"unknown policy {name!r}", hint=unknown_policy_hint(name, table))
        if name in seen:
            raise UsageError(
                f"policy {name!r} is listed twice in --policies",
                hint="list each policy once; use --trials for repeats",
            )
        seen.add(name)
        check_policy(table[name])
        out.append(table[name])
    if not out:
        raise UsageError("no policies given", hint="e.g. --policies baseline,cuda_max_connections_1")
    return out


def all_policies(user: Iterable[Policy] = ()) -> list[Policy]:
    return [*BUILTIN_POLICIES, *user]
