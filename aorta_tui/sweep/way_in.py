"""One way in for a recipe: `sweep run` / `--batch`'s request -> the recipe a sweep runs.

Every front end that starts a recipe sweep (the CLI today; an engine caller such as the agent
next) hands a :class:`SweepRequest` to :func:`recipe_for_request`: the recipe file, the run being
resumed, or the flags (flag mode) become one recipe, then the command after ``--`` and every
override flag are applied here, once, in one order. :func:`is_sanitizer_request` is the one place
that asks which runner a recipe file is for (upstream's sanitizer recipes have their own).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import FieldReader, Json
from aorta_tui.store.naming import DEFAULT_OUTPUT


@dataclass(frozen=True)
class SweepRequest:
    """What `sweep run` (or an engine caller, the agent) asks the engine for: the recipe, the
    run resumed, the flags, the overrides and the secret values' pipe. Frozen: built once by its
    front end. How the command line shows the run (``--json``, ``--dry-run``, ``-v``,
    ``--metrics``) is not here: the engine never reads it, so it is the CLI's own value
    (``cli/sweep_view.SweepRunView``), passed beside the request. Its file form (an engine
    caller's hand-over to ``sweep/child.py``) has one serializer, :meth:`to_json`, and one
    reader, :meth:`from_json` / :func:`read_request`."""

    recipe: Path | None = None
    command: list[str] = field(default_factory=list)
    resume: Path | None = None
    trust_run_dir: bool = False  # --i-trust-this-directory: drive.sweep_for_request's guard
    output: Path = Path(DEFAULT_OUTPUT)
    strict: bool = False
    order: str | None = None
    seed: int | None = None
    ticket: str | None = None
    mitigation_files: list[Path] = field(default_factory=list)
    workload: str | None = None
    mitigation_axis: str | None = None
    environment_axis: str | None = None
    trials: int | None = None
    steps: int | None = None
    snapshots: bool = True
    # upstream `aorta sweep run` flags (recipe/overrides.py; docs/compat.md)
    stop_after_events: int | None = None
    max_trials: int | None = None
    disable_detectors: list[str] = field(default_factory=list)
    env_passthrough_mode: str | None = None
    collect: list[str] = field(default_factory=list)
    baseline_cell: str | None = None
    confound_threshold: float | None = None
    trial_isolation: str | None = None  # --trial-isolation: overrides the recipe's
    bytecode_cache: str | None = None  # --bytecode-cache: overrides the recipe's
    executor: str | None = None  # --executor local|slurm: overrides the recipe's kind
    nodes: int | None = None  # --nodes / --gpus-per-node: a distributed trial across Slurm nodes
    gpus_per_node: int | None = None
    secret_values_fd: int | None = None  # agent: secret values in memory (core/secrets.py)

    __hash__ = None  # type: ignore[assignment]  # list fields: never a dict key

    def to_json(self) -> dict[str, Json]:
        """The object a request file holds: every field, in the dataclass's order, a path as its
        string (the bytes of the file before the CLI's view fields left it, less those keys)."""
        return {
            "recipe": _opt_str(self.recipe), "command": list(self.command),
            "resume": _opt_str(self.resume),
            "trust_run_dir": self.trust_run_dir, "output": str(self.output),
            "strict": self.strict, "order": self.order,
            "seed": self.seed, "ticket": self.ticket,
            "mitigation_files": [str(p) for p in self.mitigation_files],
            "workload": self.workload, "mitigation_axis": self.mitigation_axis,
            "environment_axis": self.environment_axis, "trials": self.trials,
            "steps": self.steps, "snapshots": self.snapshots,
            "stop_after_events": self.stop_after_events, "max_trials": self.max_trials,
            "disable_detectors": list(self.disable_detectors),
            "env_passthrough_mode": self.env_passthrough_mode, "collect": list(self.collect),
            "baseline_cell": self.baseline_cell, "confound_threshold": self.confound_threshold,
            "trial_isolation": self.trial_isolation,
            "bytecode_cache": self.bytecode_cache, "executor": self.executor,
            "nodes": self.nodes, "gpus_per_node": self.gpus_per_node,
            "secret_values_fd": self.secret_values_fd}

    @classmethod
    def from_json(cls, data: object, where: str) -> SweepRequest:
        """Read a parsed request file; a damaged one is a located UsageError (exit 2). A
        missing field reads as its default."""
        return _read_request(FieldReader(where, _REQUEST_WHAT), data)


def _split(text: str | None) -> list[str]:
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def flag_mode_recipe_text(req: SweepRequest) -> str:
    """Build the cartesian product of the axes as a recipe, so it is validated like one."""
    import yaml

    mits = _split(req.mitigation_axis) or ["none"]
    envs = _split(req.environment_axis) or ["local"]
    if req.workload:
        doc: dict[str, Any] = {
            "schema_version": 1, "mode": "triage", "ticket": req.ticket or f"flags-{req.workload}",
            "workload": req.workload, "trials": req.trials or 1, "steps": req.steps or 10,
            "cells": [{"name": f"{m}-{e}", "mitigations": [m], "environment": e} for m in mits for e in envs],
        }
        if req.baseline_cell is not None or req.confound_threshold is not None:
            doc["confound"] = {k: v for k, v in (("baseline_cell", req.baseline_cell),
                                                 ("threshold", req.confound_threshold)) if v is not None}
    elif req.command:
        if req.command[0].lower().endswith((".yaml", ".yml")):
            # `sweep run recipe.yaml` would exec the YAML file as the probe's program: every
            # trial fails with exec_failed, which says nothing about the slip
            raise UsageError(f"{req.command[0]!r} is a recipe file, not a command to run",
                             hint=f"aorta-tui sweep run --recipe {req.command[0]}")
        doc = {"schema_version": 1, "mode": "probe", "ticket": req.ticket or "flags-probe",
               "trials": req.trials or 1, "mitigation_axis": mits, "diagnostic_axis": ["none"]}
    else:
        raise UsageError(
            "nothing to run: give --recipe FILE, or --workload NAME, or a command after `--`",
            hint="e.g. aorta-tui sweep run --recipe recipes/quickstart.yaml",
        )
    return yaml.safe_dump(doc, sort_keys=False)


def load_request_recipe(req: SweepRequest, registry: Any) -> Any:
    from aorta_tui.recipe import load_recipe, load_recipe_text, with_command

    if req.resume is not None:
        from aorta_tui.store.run_meta import read_run_meta

        read_run_meta(Path(req.resume))  # a run dir that is not one (or a half-made one) says so first
    if req.recipe is not None:
        from aorta_tui.sweep.workload_check import workload_problems

        recipe = load_recipe(req.recipe, registry=registry, workload_check=workload_problems)
    elif req.resume is not None:
        resolved = Path(req.resume) / "recipe.resolved.yaml"
        from aorta_tui.core.rundir_fs import RunDirFS, refuse_unless_regular

        with RunDirFS(req.resume) as fs:  # a link there (to a root-only file) is refused, not read
            if fs.lstat(resolved.name) is None:
                raise UsageError(f"{resolved} is missing", hint="pass --recipe with the original recipe")
            refuse_unless_regular(fs, resolved.name)
        recipe = load_recipe(resolved, registry=registry)
    else:
        recipe = load_recipe_text(flag_mode_recipe_text(req), source="<command-line flags>",
                                  registry=registry)
    if req.command:
        if recipe.mode != "probe":
            raise UsageError(
                f"a command was given after `--`, and {req.recipe or 'the recipe'} is a triage recipe "
                f"(workload {recipe.workload!r})",
                hint="drop the command, or use a recipe with mode: probe",
            )
        if req.resume is not None and recipe.command and list(recipe.command) != req.command:
            raise UsageError(
                f"the command differs from the one {req.resume} was started with "
                f"({' '.join(recipe.command)})",
                hint="resume without a command: the run remembers it",
            )
        recipe = with_command(recipe, req.command)
    return apply_request_overrides(recipe, req)


# Flag mode builds a recipe from these; with a recipe (or a resume, whose recipe is the run's)
# they were ignored without a word: `--batch quickstart.yaml --trials 1` ran 2 trials a cell
_FLAG_MODE_KEYS = {"--workload": ("workload", "workload:"), "--mitigation-axis": ("mitigation_axis", "cells"),
                   "--environment-axis": ("environment_axis", "cells[].environment"),
                   "--trials": ("trials", "trials: (or a cell's trials:)"),
                   "--steps": ("steps", "steps:")}


def _refuse_flag_mode_options(req: SweepRequest) -> None:

    if req.recipe is None and req.resume is None:
        return
    for flag, (attr, key) in _FLAG_MODE_KEYS.items():
        if getattr(req, attr, None) is not None:
            where = f"--recipe {req.recipe}" if req.recipe is not None else f"--resume {req.resume}"
            raise UsageError(f"{flag} is for flag mode (no recipe); with {where} the recipe decides",
                             hint=f"set {key} in the recipe (`aorta-tui edit RECIPE`), or drop {flag}")


def apply_request_overrides(recipe: Any, req: SweepRequest) -> Any:
    """The recipe with `sweep run`'s overlay flags applied (or a usage error naming the flag)."""
    from aorta_tui.recipe.overrides import apply_overrides

    if req.recipe is not None and (req.baseline_cell is not None or req.confound_threshold is not None):
        flag = "--baseline-cell" if req.baseline_cell is not None else "--confound-threshold"
        raise UsageError(f"{flag} is for flag mode (no recipe); with --recipe the recipe's "
                         "`confound:` block decides", hint="set confound.baseline_cell / "
                         "confound.threshold in the recipe, or drop the flag")
    _refuse_flag_mode_options(req)
    from aorta_tui.recipe.collector_names import collectors_runnable_problem

    if req.collect:  # --collect replaces the recipe's and the cells' collectors, as upstream
        collectors_runnable_problem(tuple(req.collect), where="--collect")
        recipe = dataclasses.replace(
            recipe, collect=tuple(dict.fromkeys(req.collect)),
            cells=type(recipe.cells)(dataclasses.replace(c, collect=None) for c in recipe.cells))
    return apply_overrides(recipe, stop_after_events=req.stop_after_events,
                           max_trials=req.max_trials, disable_detectors=req.disable_detectors,
                           env_passthrough_mode=req.env_passthrough_mode)


def is_sanitizer_request(req: SweepRequest) -> bool:
    """A new run of a recipe file whose mode is upstream's ``sanitizer`` (collect/sanitizer.py
    runs it); a resume is always a sweep's."""
    if req.recipe is None or req.resume is not None:
        return False
    from aorta_tui.collect.sanitizer import peek_mode

    return peek_mode(req.recipe) == "sanitizer"


def recipe_for_request(req: SweepRequest, registry: Any) -> Any:
    """The recipe the sweep runs: loaded (file, resumed run or flags), its command and overlay
    flags applied, then the flags that override its keys, each once."""
    recipe = load_request_recipe(req, registry)
    if req.order is not None or req.seed is not None:
        # Part of the recipe from here on: hashed, resolved, and checked on resume.
        recipe = dataclasses.replace(recipe, order=req.order or recipe.order,
                                     seed=req.seed if req.seed is not None else recipe.seed)
    if req.executor is not None:
        from aorta_tui.executor import with_executor_kind

        recipe = with_executor_kind(recipe, req.executor)  # not hashed: a resume may switch it
    if req.nodes is not None or req.gpus_per_node is not None:
        from aorta_tui.executor.distributed import with_distributed

        recipe = with_distributed(recipe, req.nodes, req.gpus_per_node)
    if req.trial_isolation is not None:
        from aorta_tui.recipe.overrides import with_trial_isolation

        recipe = with_trial_isolation(recipe, req.trial_isolation)
    if req.bytecode_cache is not None:
        from aorta_tui.recipe.overrides import with_bytecode_cache

        recipe = with_bytecode_cache(recipe, req.bytecode_cache)
    return recipe


# ---- the request as a file: how an engine caller hands it to ``sweep/child.py`` ------------
_REQUEST_WHAT = "sweep request"
_REQUEST_HINT = "the file is written by the agent of this aorta-tui version"
_REQUEST_KEYS = frozenset(f.name for f in dataclasses.fields(SweepRequest))
# Keys a request file held before the command line's view (--dry-run, --json, -v) left the
# request. Read and dropped, not refused: a resumed agent may hand over a file an older version
# wrote, and dropping them changes nothing that ran, because sweep/child.py never read them (it
# always ran the sweep, JSON lines on stdout, no per-trial lines). Any other unknown key is
# still refused (see _read_request).
_RETIRED_KEYS = frozenset({"dry_run", "json_mode", "verbose"})


def write_request(req: SweepRequest, path: Path) -> None:
    """``req`` as JSON at ``path`` (atomically)."""
    from aorta_tui.core.atomic import atomic_write_json

    atomic_write_json(path, req.to_json())


def read_request(path: str | Path) -> SweepRequest:
    """The request file back as a :class:`SweepRequest`: at most ``INPUT_LIMITS["sweep
    request"]`` bytes, every field checked (exit 2, naming the file and the field)."""
    from aorta_tui.core.inputs import INPUT_LIMITS, load_json_input

    data = load_json_input(path, what=_REQUEST_WHAT, limit=INPUT_LIMITS[_REQUEST_WHAT],
                           hint=_REQUEST_HINT)
    return SweepRequest.from_json(data, str(path))


def _opt_str(value: Path | None) -> str | None:
    return None if value is None else str(value)


def _path(f: FieldReader, value: str, key: str) -> Path:
    """A path field's string as a Path; an empty one is refused (it would name the current
    directory without saying so; the untyped reader refused it too)."""
    if not value:
        raise UsageError(f"{f.where}: {key}: expected a path (a non-empty string), found ''",
                         hint=_REQUEST_HINT)
    return Path(value)


def _opt_path(f: FieldReader, value: str | None, key: str) -> Path | None:
    return None if value is None else _path(f, value, key)


def _read_request(f: FieldReader, data: object) -> SweepRequest:
    d = f.obj(data, "(top level)")
    unknown = sorted(set(d) - _REQUEST_KEYS - _RETIRED_KEYS)
    if unknown:
        # refused, not kept: the file is an order to run, written by this version's agent; an
        # option the sweep silently dropped would run something other than what was asked
        raise UsageError(f"{f.where}: {unknown[0]!r:.60}: not a field of a {_REQUEST_WHAT}",
                         hint=_REQUEST_HINT)
    files = f.strings_at(d, "mitigation_files", "")
    threshold = f.number(d, "confound_threshold", "")
    return SweepRequest(
        recipe=_opt_path(f, f.opt_text(d, "recipe", ""), "recipe"),
        command=list(f.strings_at(d, "command", "")),
        resume=_opt_path(f, f.opt_text(d, "resume", ""), "resume"),
        trust_run_dir=f.boolean(d, "trust_run_dir", ""),
        output=_path(f, f.text(d, "output", "", str(DEFAULT_OUTPUT)), "output"),
        strict=f.boolean(d, "strict", ""),
        order=f.opt_text(d, "order", ""), seed=f.opt_integer(d, "seed", ""),
        ticket=f.opt_text(d, "ticket", ""),
        mitigation_files=[_path(f, p, f"mitigation_files[{i}]") for i, p in enumerate(files)],
        workload=f.opt_text(d, "workload", ""),
        mitigation_axis=f.opt_text(d, "mitigation_axis", ""),
        environment_axis=f.opt_text(d, "environment_axis", ""),
        trials=f.opt_integer(d, "trials", ""), steps=f.opt_integer(d, "steps", ""),
        snapshots=f.boolean(d, "snapshots", "", True),
        stop_after_events=f.opt_integer(d, "stop_after_events", ""),
        max_trials=f.opt_integer(d, "max_trials", ""),
        disable_detectors=list(f.strings_at(d, "disable_detectors", "")),
        env_passthrough_mode=f.opt_text(d, "env_passthrough_mode", ""),
        collect=list(f.strings_at(d, "collect", "")),
        baseline_cell=f.opt_text(d, "baseline_cell", ""),
        confound_threshold=None if threshold is None else float(threshold),  # 3 reads as 3.0
        trial_isolation=f.opt_text(d, "trial_isolation", ""),
        bytecode_cache=f.opt_text(d, "bytecode_cache", ""), executor=f.opt_text(d, "executor", ""),
        nodes=f.opt_integer(d, "nodes", ""), gpus_per_node=f.opt_integer(d, "gpus_per_node", ""),
        secret_values_fd=f.opt_integer(d, "secret_values_fd", ""))
