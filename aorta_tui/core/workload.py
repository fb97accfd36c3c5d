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
from aorta_tui.core.inputs import clip_for_message
from aorta_tui.core.suggest import did_you_mean, did_you_mean_any

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
    location: str | None = None,
    from_text: bool = False,
) -> dict[str, Any]:
    """Check ``raw`` against ``schema`` and fill defaults. Unknown keys are errors.

    The one check of a workload's settings: a recipe's ``workload_config`` (``path`` a key
    path) and a queue workload's ``--param KEY=VALUE`` (``path="--param"``, ``from_text``:
    string values are command-line text, read by :func:`read_text_value` first, the way a
    recipe's YAML reads the same text). ``location`` (e.g. the workload) prefixes every error.
    """
    raw = dict(raw or {})
    known = {f.name: f for f in schema}
    for key in raw:
        if key not in known:
            near = did_you_mean_any(key, known)
            listed = f"known keys: {', '.join(sorted(known)) or '(none)'}"
            raise UsageError(f"unknown key {_join(path, key)}", location=location,
                             hint=f"{near} {listed}" if near else listed)
    out: dict[str, Any] = {}
    for f in schema:
        value = raw.get(f.name, f.default)
        if from_text and f.name in raw and isinstance(value, str):
            value = read_text_value(value)
        out[f.name] = _check_value(f, value, path, location)
    return out


def _join(path: str, key: str) -> str:
    """``workload_config.size``; under a flag, ``--param size``."""
    return f"{path} {key}" if path.startswith("--") and " " not in path else f"{path}.{key}"


def _example(f: ConfigField, path: str) -> str:
    """How a fix is written where the value came from: ``size: 32`` or ``--param size=32``."""
    if path.startswith("--") and " " not in path:
        return f"e.g. {path} {f.name}={f.default}"
    return f"e.g. {f.name}: {f.default!r}"


def _check_value(f: ConfigField, value: Any, path: str, location: str | None = None) -> Any:
    where = _join(path, f.name)

    def bad(message: str, hint: str) -> UsageError:
        return UsageError(f"{where} {message}", hint=hint, location=location)

    if value is None and f.default is None:
        return None
    allowed = _PY_TYPES[f.type]
    if f.type in ("int", "float") and isinstance(value, bool):
        raise bad(f"must be {f.type}, got a boolean", _example(f, path))
    if not isinstance(value, allowed):
        raise bad(f"must be {f.type}, got {type(value).__name__} {clip_for_message(value)}", _example(f, path))
    if f.type == "float":
        value = float(value)
    if f.choices is not None and value not in f.choices:
        options = ", ".join(map(str, f.choices))
        raise bad(f"must be one of {options}, got {clip_for_message(value)}",
                  did_you_mean(str(value), map(str, f.choices)) + f"use one of {options}")
    if f.min is not None and value < f.min:
        raise bad(f"must be >= {f.min}, got {clip_for_message(value)}", _example(f, path))
    if f.max is not None and value > f.max:
        raise bad(f"must be <= {f.max}, got {clip_for_message(value)}", _example(f, path))
    if f.type == "dict" and f.fields is not None:
        value = validate_config(f.fields, value, path=where, location=location)
    return value


def read_text_value(text: str) -> Any:
    """A command-line value (``--config k=v``, ``--param k=v``) read as a recipe reads it.

    The recipe loader's YAML reading of one scalar (``3`` an int, ``true`` a boolean, ``x`` a
    string, ``[1, 2]`` a list), so a setting typed on the command line and one written in a
    recipe are the same value; text the loader refuses (``[1``, a tag) stays the text itself.
    """
    from aorta_tui.core.recipe.loader import LoadProblem, parse_yaml_text

    try:
        return parse_yaml_text(text)[0]
    except LoadProblem:
        return text


def parse_config_overrides(pairs: list[str]) -> dict[str, Any]:
    """Turn ``k=v`` / ``a.b=v`` command-line pairs into a nested dict with YAML-typed values."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise UsageError(f"--config {pair!r} is not key=value", hint="e.g. --config steps=10")
        key, _, text = pair.partition("=")
        value = read_text_value(text) if text else ""
        node = out
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out
