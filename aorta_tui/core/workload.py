"""The workload contract: what a registered workload declares and returns.

A workload is a class registered in the ``aorta_tui.workloads`` entry-point group. The engine
creates it inside a worker process (``trial_isolation: process``), calls ``setup``, ``run`` and
``cleanup``, and writes the returned :class:`WorkloadResult` to the trial's ``result.json``.
Nothing here imports torch: workloads import it inside their methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from aorta_tui.core.errors import UsageError
from aorta_tui.core.suggest import did_you_mean_any

ConfigType = Literal["int", "float", "str", "bool", "dict", "list"]
_PY_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "str": (str,),
    "bool": (bool,),
    "dict": (dict,),
    "list": (list,),
}


@dataclass(frozen=True)
class ConfigField:
    """One key of a workload's ``workload_config``.

    ``fields`` declares the keys of a nested ``dict`` field; a dict field without ``fields``
    accepts any keys.
    """

    name: str
    type: ConfigType
    default: Any
    help: str = ""
    choices: tuple[Any, ...] | None = None
    min: float | None = None
    max: float | None = None
    fields: tuple[ConfigField, ...] | None = None


@dataclass(frozen=True)
class LaunchSpec:
    """How the engine must start the workload.

    ``mode`` is ``single`` (one process) or ``torchrun`` (one process per rank). A workload
    declares ``in_process_safe`` only when it leaves no global state behind (no torch
    backends flags, no CUDA context), so ``trial_isolation: in_process`` is allowed for it.
    """

    mode: Literal["single", "torchrun"] = "single"
    min_world_size: int = 1
    in_process_safe: bool = False


@dataclass
class Failure:
    """One thing that went wrong; ``code`` is stable (e.g. ``nonfinite_loss``)."""

    code: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class WorkloadResult:
    step_times_s: list[float] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    device: str = "cpu"
    emulated: bool = False
    applied_switches: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["passed"] = self.passed
        return out


@dataclass
class WorkloadContext:
    """What the engine hands a workload for one trial."""

    steps: int
    config: dict[str, Any]
    seed: int
    trial_dir: Path
    switches: tuple[str, ...] = ()
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    on_step: Callable[[int, float], None] | None = None


class Workload(ABC):
    """Base class for registered workloads. Subclasses set the class attributes below."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    launch: ClassVar[LaunchSpec] = LaunchSpec()
    config_schema: ClassVar[tuple[ConfigField, ...]] = ()
    #: printed by the sweep summary under a failing cell
    hint: ClassVar[str] = ""

    @classmethod
    def failure_hint(cls, failing: list[dict[str, Any]]) -> str:
        """The hint printed under failing trials, given their ``workload_result`` dicts: a
        workload that can fail on purpose (an injected error) says so instead of ``hint``."""
        return cls.hint

    def setup(self, ctx: WorkloadContext) -> None:  # noqa: B027 - optional hook
        """Allocate models and data. Apply ``ctx.switches`` before the first GPU op."""

    @abstractmethod
    def run(self, ctx: WorkloadContext) -> WorkloadResult: ...

    def cleanup(self, ctx: WorkloadContext) -> None:  # noqa: B027 - optional hook
        """Release what ``setup`` took. Called even when ``run`` raised."""

    @classmethod
    def cross_trial_checks(cls, results: list[dict[str, Any]]) -> list[Failure]:
        """Checks across the trials of one cell (e.g. logits fingerprints that must agree).

        ``results`` are the ``workload_result.json`` dicts of the cell's finished trials, in
        trial order. The aggregate reports what this returns as the cell's failures.
        """
        return []


def validate_config(
    schema: tuple[ConfigField, ...],
    raw: Mapping[str, Any] | None,
    *,
    path: str = "workload_config",
) -> dict[str, Any]:
    """Check ``raw`` against ``schema`` and fill defaults. Unknown keys are errors."""
    raw = dict(raw or {})
    known = {f.name: f for f in schema}
    for key in raw:
        if key not in known:
            hint = did_you_mean_any(key, known) or (
                f"known keys: {', '.join(sorted(known)) or '(none)'}"
            )
            raise UsageError(f"unknown key {path}.{key}", hint=hint)
    out: dict[str, Any] = {}
    for f in schema:
        value = raw.get(f.name, f.default)
        out[f.name] = _check_value(f, value, f"{path}.{f.name}")
    return out


def _check_value(f: ConfigField, value: Any, where: str) -> Any:
    if value is None and f.default is None:
        return None
    allowed = _PY_TYPES[f.type]
    if f.type in ("int", "float") and isinstance(value, bool):
        raise UsageError(f"{where} must be {f.type}, got a boolean", hint=f"e.g. {f.default!r}")
    if not isinstance(value, allowed):
        raise UsageError(
            f"{where} must be {f.type}, got {type(value).__name__} {value!r}",
            hint=f"e.g. {where.rsplit('.', 1)[-1]}: {f.default!r}",
        )
    if f.type == "float":
        value = float(value)
    if f.choices is not None and value not in f.choices:
        raise UsageError(
            f"{where} must be one of {', '.join(map(str, f.choices))}, got {value!r}"
        )
    if f.min is not None and value < f.min:
        raise UsageError(f"{where} must be >= {f.min}, got {value!r}")
    if f.max is not None and value > f.max:
        raise UsageError(f"{where} must be <= {f.max}, got {value!r}")
    if f.type == "dict" and f.fields is not None:
        value = validate_config(f.fields, value, path=where)
    return value


def parse_config_overrides(pairs: list[str]) -> dict[str, Any]:
    """Turn ``k=v`` / ``a.b=v`` command-line pairs into a nested dict with YAML-typed values."""
    import yaml

    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise UsageError(f"--config {pair!r} is not key=value", hint="e.g. --config steps=10")
        key, _, text = pair.partition("=")
        try:
            value = yaml.safe_load(text) if text else ""
        except yaml.YAMLError:
            value = text
        node = out
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out
