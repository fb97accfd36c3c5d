"""The workload contract: what a registered workload declares and returns.

A workload is a class registered in the ``aorta_tui.workloads`` entry-point group. The engine
creates it inside a worker process (``trial_isolation: process``), calls ``setup``, ``run`` and
``cleanup``, and writes the returned :class:`WorkloadResult` to the trial's ``result.json``.
Nothing here imports torch: workloads import it inside their methods.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import clip_for_message

if TYPE_CHECKING:
    from aorta_tui.recipe.checks import Validator

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
    default: object  # a value of the field's type, or None
    help: str = ""
    choices: tuple[Any, ...] | None = None
    min: float | None = None
    max: float | None = None
    fields: tuple[ConfigField, ...] | None = None
    # A float field that means something by NaN (a fault injection's "write NaNs"): NaN passes
    # the finite-number rule every other number keeps.
    nan_ok: bool = False


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
    #: the workload imports torch (a sweep without it is refused at plan time, exit 3)
    needs_torch: ClassVar[bool] = True
    #: modules that ``setup`` and the first step import whatever the config (``trial_isolation:
    #: warm`` imports them in the zygote, once, before it forks: trial/warm.py). Importing one
    #: must not initialise a GPU runtime.
    preload: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def preload_modules(cls, configs: list[dict[str, Any]]) -> tuple[str, ...]:
        """What the warm zygote imports for trials of these validated configs: ``preload``,
        plus what a config turns on (a workload overrides this for config-dependent imports)."""
        return cls.preload

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
    recipe's YAML reads the same text). The checks are the recipe validator's (keys, types,
    ranges, choices: ``recipe/validate.py``), so the wording is a recipe's; the first
    problem is raised. ``location`` (e.g. the workload) prefixes it.
    """
    from aorta_tui.recipe.checks import Validator
    from aorta_tui.recipe.loader import Marks

    raw = dict(raw or {})
    v = Validator(Marks(), "", None)
    v.mapping(path, raw, frozenset(f.name for f in schema))
    if v.issues:  # an unknown key (with a did-you-mean and the known keys)
        _raise_first(v, path, location, None)
    out: dict[str, Any] = {}
    for f in schema:
        value = raw.get(f.name, f.default)
        if from_text and f.name in raw and isinstance(value, str):
            value = read_text_value(value)
        out[f.name] = _check_value(f, value, path, location)
    return out


def _is_flag(path: str) -> bool:
    return path.startswith("--") and " " not in path and "." not in path


def _example(f: ConfigField, path: str) -> str | None:
    """How a fix is written where the value came from: ``size: 32`` or ``--param size=32``."""
    if f.default is None:
        return None  # "e.g. size: None" shows nothing
    if _is_flag(path):
        return f"e.g. {path} {f.name}={f.default}"
    return f"e.g. {f.name}: {f.default!r}"


def _raise_first(v: Validator, path: str, location: str | None, example: str | None) -> None:
    """The validator's first problem as one :class:`UsageError`: ``PATH: message``, where a
    flag's key reads ``--param size`` (not ``--param.size``)."""
    issue = v.issues[0]
    shown = issue.path
    if _is_flag(path) and shown.startswith(path + "."):
        shown = f"{path} {shown[len(path) + 1:]}"
    hint = issue.hint
    if example and hint:
        hint = f"{hint}{' ' if hint.endswith('?') else '; '}{example}"
    elif example:
        hint = example
    raise UsageError(f"{shown}: {issue.message}", hint=hint, location=location)


def _whole(x: float | None) -> int | float | None:
    return int(x) if isinstance(x, float) and x.is_integer() else x


def _check_value(f: ConfigField, value: object, path: str, location: str | None = None) -> object:
    from aorta_tui.recipe.checks import BAD, Validator
    from aorta_tui.recipe.loader import Marks, child_path

    if value is None and f.default is None:
        return None
    v = Validator(Marks(), "", None)
    where = child_path(path, f.name)
    if f.type == "int":
        value = v.integer(where, value, minimum=_whole(f.min), maximum=_whole(f.max))
    elif f.type == "float" and f.nan_ok and isinstance(value, float) and math.isnan(value):
        pass
    elif f.type == "float":
        value = v.number(where, value, at_least=f.min, at_most=f.max)
    elif f.type == "bool":
        value = v.boolean(where, value)
    elif f.type == "str":
        value = v.string(where, value, nonempty=False)
    elif not isinstance(value, _PY_TYPES[f.type]):
        value = v.issue(where, f"expected {'a mapping' if f.type == 'dict' else 'a list'}, got "
                        f"{type(value).__name__} ({clip_for_message(value)})")
    if value is not BAD and f.choices is not None and value not in f.choices:
        options = tuple(map(str, f.choices))
        value = v.choice(where, str(value) if isinstance(value, str) else value, options) \
            if all(isinstance(c, str) for c in f.choices) else v.issue(
                where, f"expected one of {', '.join(options)}, got {clip_for_message(value)}",
                f"use one of {', '.join(options)}")
    if value is BAD:
        _raise_first(v, path, location, _example(f, path))
    if f.type == "dict" and f.fields is not None and isinstance(value, dict):  # it is (checked above)
        value = validate_config(f.fields, value, path=where, location=location)
    return value


def read_text_value(text: str) -> object:
    """A command-line value (``--config k=v``, ``--param k=v``) read as a recipe reads it.

    The recipe loader's YAML reading of one scalar (``3`` an int, ``true`` a boolean, ``x`` a
    string, ``[1, 2]`` a list), so a setting typed on the command line and one written in a
    recipe are the same value; text the loader refuses (``[1``, a tag) stays the text itself.
    """
    from aorta_tui.recipe.loader import LoadProblem, parse_yaml_text

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
