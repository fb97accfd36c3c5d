"""The validated recipe: frozen dataclasses the planner, the runner and the TUI read.

A :class:`Recipe` exists only after every check in ``validate.py`` passed, so later stages can
trust its values. ``source_path`` and ``locations`` say where the recipe came from; they do not
take part in equality or the recipe hash (a copy of the same recipe elsewhere is the same plan).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from aorta_tui.recipe.condition import Condition

SCHEMA_VERSION = 1

Mode = Literal["triage", "probe"]
Order = Literal["interleaved", "sequential", "random"]
TrialIsolation = Literal["process", "exec", "in_process", "warm"]
EnvPassthrough = Literal["inherit", "file"]
OnMatch = Literal["fail", "warn", "info"]
Verdict = Literal["fail", "pass", "error"]
RetainLevel = Literal["full", "summary", "log", "none"]
TraceMode = Literal["events", "aggregate"]

# The variables a custom pattern's ``condition`` sees, besides the regex's named groups.
CONDITION_VARIABLES = frozenset({"capture", "exit_code", "walltime_sec", "peak_vram_mib"})


def condition_variables(captures: Mapping[str, Any], *, exit_code: int | None = None,
                        walltime_sec: float | None = None,
                        peak_vram_mib: float | None = None) -> dict[str, Any]:
    """The variables a custom pattern's condition reads: the named groups (bare and as
    ``capture``) and the trial's measurements that exist (None ones are left out)."""
    out: dict[str, Any] = dict(captures)
    out["capture"] = dict(captures)
    for name, value in (("exit_code", exit_code), ("walltime_sec", walltime_sec),
                        ("peak_vram_mib", peak_vram_mib)):
        if value is not None:
            out[name] = value
        else:
            out.pop(name, None)
    return out


@dataclass(frozen=True)
class CellSpec:
    """One row of the matrix.

    ``environment`` is a registered name (``local``, ``default``, a plugin's) or an inline
    ``{"docker": ref, "env": {...}}``. ``trials``/``steps``/``workload_config`` are ``None``
    when the cell inherits the recipe's value; ``workload_config`` is the cell's override only
    (merge it over ``Recipe.workload_config`` with :meth:`effective_workload_config`).
    """

    name: str
    mitigations: tuple[str, ...]
    environment: str | dict[str, Any] = "local"
    extra_env: dict[str, str] = field(default_factory=dict)
    trials: int | None = None
    steps: int | None = None
    workload_config: dict[str, Any] | None = None
    collect: tuple[str, ...] | None = None  # upstream's collectors (None: the recipe's)

    def effective_trials(self, recipe: Recipe) -> int:
        return self.trials if self.trials is not None else recipe.trials

    def effective_steps(self, recipe: Recipe) -> int | None:
        return self.steps if self.steps is not None else recipe.steps

    def effective_workload_config(self, recipe: Recipe) -> dict[str, Any]:
        """Recipe-level config with the cell's keys on top (cell wins, as upstream)."""
        return {**recipe.workload_config, **(self.workload_config or {})}

    @property
    def environment_name(self) -> str:
        if isinstance(self.environment, str):
            return self.environment
        return f"docker:{self.environment.get('docker')}"


@dataclass(frozen=True)
class Confound:
    """Speed-confound settings. ``baseline_cell`` is always resolved to a cell name.

    ``baseline_rule`` says how it was chosen: ``explicit``, ``baseline-prefix`` (first cell
    named ``baseline-*``), ``none-mitigations`` (first cell that changes nothing) or
    ``first-cell``. It is informational and not part of equality.
    """

    threshold: float = 1.15
    baseline_cell: str | None = None
    baseline_rule: str = field(default="explicit", compare=False)


@dataclass(frozen=True)
class StopAfter:
    """Run a cell until ``events`` trials have verdict ``event_verdict``, at most ``max_trials``."""

    events: int
    max_trials: int
    event_verdict: Verdict = "fail"


@dataclass(frozen=True)
class CustomPattern:
    """A tier-5 detector: ``regex`` over the trial's output, then an optional ``condition``.

    ``condition`` sees ``capture`` (dict of named groups), each named group as a bare name,
    ``exit_code``, ``walltime_sec`` and ``peak_vram_mib``; see ``condition.py``.
    """

    id: str
    regex: str
    condition: str | None = None
    on_match: OnMatch = "fail"
    required_for_pass: bool = False

    @property
    def detector_id(self) -> str:
        return f"custom:{self.id}"

    @cached_property
    def compiled_regex(self) -> re.Pattern[str]:
        return re.compile(self.regex)

    def condition_holds(self, captures: Mapping[str, Any], *, exit_code: int | None = None,
                        walltime_sec: float | None = None,
                        peak_vram_mib: float | None = None) -> bool:
        """Whether the condition holds for one regex match (True when there is none).

        The condition sees the named groups as plain names and as ``capture[...]`` (upstream's
        spelling), plus the trial's ``exit_code``, ``walltime_sec`` and ``peak_vram_mib``.
        A value passed as None is left undefined, so a condition reading it is false (a
        missing measurement never counts as 0). Never raises.
        """
        cond = self.compiled_condition
        if cond is None:
            return True
        return cond.evaluate(condition_variables(captures, exit_code=exit_code,
                                                 walltime_sec=walltime_sec,
                                                 peak_vram_mib=peak_vram_mib))

    @cached_property
    def compiled_condition(self) -> Condition | None:
        """The sandboxed condition (validated at load time, so this does not fail)."""
        if self.condition is None:
            return None
        from aorta_tui.recipe.condition import compile_condition

        names = set(CONDITION_VARIABLES) | set(self.compiled_regex.groupindex)
        return compile_condition(self.condition, names=names)


@dataclass(frozen=True)
class Retain:
    """Per-verdict retention of a trial's files (``full`` keeps everything, as upstream)."""

    on_fail: RetainLevel = "full"
    on_pass: RetainLevel = "full"
    on_error: RetainLevel = "full"

    def level_for(self, verdict: str) -> str:
        return {"fail": self.on_fail, "pass": self.on_pass, "error": self.on_error}.get(
            verdict, "full")


@dataclass(frozen=True)
class Redaction:
    """What ``bundle`` scrubs: env keys matching these globs, paths, IP addresses."""

    scrub_env_keys: tuple[str, ...] = ()
    scrub_paths: bool = False
    scrub_ip_addresses: bool = False


@dataclass(frozen=True)
class ExecutorSpec:
    """Extension: where trials run. ``kind: local`` (processes here, the default) or ``slurm``
    (each trial a task of a batched job array; the options go to sbatch as written)."""

    kind: str = "local"
    partition: str | None = None
    account: str | None = None
    gres: str | None = None
    time: str | None = None
    constraint: str | None = None
    extra_sbatch: tuple[str, ...] = ()
    # a distributed (torchrun) trial across nodes: sbatch --nodes, and torchrun ranks per node
    nodes: int | None = None
    gpus_per_node: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, object] = {"kind": self.kind, "partition": self.partition,
                                  "account": self.account,
               "gres": self.gres, "time": self.time, "constraint": self.constraint,
               "extra_sbatch": list(self.extra_sbatch)}
        if self.nodes is not None or self.gpus_per_node is not None:  # older files stay identical
            out.update(nodes=self.nodes, gpus_per_node=self.gpus_per_node)
        return out


@dataclass(frozen=True)
class TraceSpec:
    """Extension: eBPF probes to attach to every trial (shape only; the trace layer runs them)."""

    probes: tuple[str, ...] = ()
    mode: TraceMode = "events"


@dataclass(frozen=True)
class Recipe:
    """A validated recipe, schema version 1, either mode.

    Probe recipes have ``workload=None`` and ``steps=None`` (an opaque command has no steps)
    and cells generated from ``mitigation_axis x diagnostic_axis``. ``command`` is the argv a
    probe run executes (after ``--`` on the command line, or ``command:`` in a resolved recipe).
    """

    schema_version: int = SCHEMA_VERSION
    mode: Mode = "triage"
    ticket: str | None = None
    trials: int = 1
    steps: int | None = None
    workload: str | None = None
    workload_config: dict[str, Any] = field(default_factory=dict)
    cells: tuple[CellSpec, ...] = ()
    confound: Confound = field(default_factory=Confound)
    save_logs: bool = True  # always: every trial's stdout/stderr are kept (``retain`` prunes)
    stop_after: StopAfter | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    trial_isolation: TrialIsolation = "process"
    # Classifier and worker knobs (probe mode upstream; both modes here).
    timeout_per_trial: float | None = None
    custom_patterns: tuple[CustomPattern, ...] = ()
    hang_window_sec: float = 30.0
    hang_grace_period_at_start: float = 60.0
    disable_detectors: tuple[str, ...] = ()
    tier3_vram_growth: bool = False  # there is no whole-GPU VRAM-growth detector here
    retain: Retain | None = None
    step_time_regex: str | None = None
    # Probe mode only.
    env_passthrough_mode: EnvPassthrough = "inherit"
    redaction: Redaction | None = None
    collect_paths: tuple[str, ...] = ()
    mitigation_axis: tuple[str, ...] = ()
    diagnostic_axis: tuple[str, ...] = ()
    command: tuple[str, ...] | None = None
    # Extensions of aorta-tui (docs/recipes.md).
    order: Order = "interleaved"
    seed: int = 0
    trace: TraceSpec | None = None
    policy_axis: tuple[str, ...] = ()
    executor: ExecutorSpec = field(default_factory=ExecutorSpec)
    # the children's bytecode cache (core/bytecode.py); not in the recipe hash: it changes
    # how fast the children start, never what a trial measures
    bytecode_cache: str = "auto"
    # upstream's `collect:` (names, and per-collector string options): never run here
    collect: tuple[str, ...] = ()
    collect_options: dict[str, dict[str, str]] = field(default_factory=dict)

    def all_collectors(self) -> tuple[str, ...]:
        """Every collector some cell would run (a cell's `collect` replaces the recipe's)."""
        names: dict[str, None] = {}
        for c in self.cells:
            names.update(dict.fromkeys(self.collect if c.collect is None else c.collect))
        return tuple(names)
    # Provenance: not part of equality or the hash.
    source_path: Path | None = field(default=None, compare=False)
    source_label: str = field(default="<recipe>", compare=False)
    locations: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False,
                                                  repr=False)
    # where each mapping key itself is written (for "unknown key" messages)
    key_locations: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False,
                                                      repr=False)

    @property
    def source(self) -> str:
        return self.source_label

    def where(self, path: str = "", *, key: bool = False) -> str:
        """``file:line:col`` of ``path``'s value (of the key itself with ``key=True``), or of
        its nearest ancestor with a known position."""
        if key and path in self.key_locations:
            line, col = self.key_locations[path]
            return f"{self.source}:{line}:{col}"
        probe = path
        while True:
            if probe in self.locations:
                line, col = self.locations[probe]
                return f"{self.source}:{line}:{col}"
            if not probe:
                return f"{self.source}:1:1"
            from aorta_tui.recipe.loader import parent_path

            probe = parent_path(probe)

    def cell(self, name: str) -> CellSpec:
        for c in self.cells:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def baseline(self) -> CellSpec | None:
        name = self.confound.baseline_cell
        return self.cell(name) if name is not None else None
