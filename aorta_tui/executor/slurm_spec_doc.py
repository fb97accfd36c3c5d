"""What the orchestrator hands a Slurm array's tasks, as typed values: one serializer, one reader.

Before its ``sbatch`` call the Slurm executor (``executor/slurm.py``) writes, for every trial of
a batch, a :class:`JobSpec` (``trials/<cell>/trial-NNN/slurm-job.json``, mode 0600: it holds the
trial's environment) and the batch's :class:`SpecManifest` (``slurm/<batch>.json``: each task's
spec path, in task order). Each task (``executor/slurm_job.py``, on its node) reads the manifest
and its own spec back through :meth:`SpecManifest.load` and :meth:`JobSpec.load`: bounded,
through the run's file layer, every field's type checked, damage a located UsageError naming the
file and the field path (the task prints it and exits 2, running nothing) where it was a
KeyError or TypeError traceback before this type.

Each ``to_json`` is the object the file has always held, key order included. The tolerances of
the task's old reads are kept: a spec without ``batch`` (written before a spec named its array)
is any array's; without ``cell_keys``, ``timeout_s`` or ``kill_grace_s`` it has none, none and
2 s; a ``hang`` that is null, absent or empty is no hang detection.

This module is imported on every node at every task's start: it imports only ``core`` at its
top (``trial.hang`` only when a spec's hang policy is built).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import INPUT_LIMITS, FieldReader, Json

if TYPE_CHECKING:
    from pathlib import Path

    from aorta_tui.core.rundir_fs import RunDirFS
    from aorta_tui.trial.hang import HangPolicy

SPEC_WHAT = "Slurm job spec"
MANIFEST_WHAT = "Slurm manifest"
DEFAULT_KILL_GRACE_S = 2.0  # a spec that names none (the task's default before this type)


def _hint(what: str) -> str:
    return f"this {what} is damaged or was not written by aorta-tui"


@dataclass(frozen=True)
class HangSpec:
    """The trial's hang policy (``trial.hang.HangPolicy``) as its spec carries it."""

    window_s: float = 30.0
    grace_s: float = 60.0
    disabled: tuple[str, ...] = ()  # sorted, as the orchestrator writes them

    def to_json(self) -> dict[str, Json]:
        return {"window_s": self.window_s, "grace_s": self.grace_s, "disabled": list(self.disabled)}

    def policy(self) -> HangPolicy:
        from aorta_tui.trial.hang import HangPolicy

        return HangPolicy(window_s=self.window_s, grace_s=self.grace_s,
                          disabled=frozenset(self.disabled))


@dataclass(frozen=True)
class JobSpec:
    """One trial's ``slurm-job.json``: what its task runs, and where (every path absolute)."""

    batch: str | None  # the array whose task may take it; None: written before it was named
    argv: tuple[str, ...]
    env: dict[str, str]  # the orchestrator's environment for the trial (the node's added)
    cwd: str
    stdout_path: str
    stderr_path: str
    trial_dir: str
    cell_keys: tuple[str, ...] = ()  # the variables the cell sets itself (the node's never win)
    timeout_s: float | None = None
    kill_grace_s: float = DEFAULT_KILL_GRACE_S
    hang: HangSpec | None = None  # None: no hang detection
    extra: dict[str, Json] = field(default_factory=dict)  # keys a newer writer added

    def to_json(self) -> dict[str, Json]:
        """The object the spec holds (``slurm._submit_batch`` writes it as ``json.dumps``)."""
        out: dict[str, Json] = {} if self.batch is None else {"batch": self.batch}
        out.update({
            "argv": list(self.argv), "env": dict(self.env), "cell_keys": list(self.cell_keys),
            "cwd": self.cwd, "stdout_path": self.stdout_path, "stderr_path": self.stderr_path,
            "timeout_s": self.timeout_s, "kill_grace_s": self.kill_grace_s,
            "trial_dir": self.trial_dir, "hang": None if self.hang is None else self.hang.to_json()})
        return {**out, **self.extra}

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    @classmethod
    def from_dict(cls, data: object, *, where: str = "slurm-job.json") -> JobSpec:
        """Read a parsed spec; a damaged one is a located UsageError (exit 2)."""
        return _read_spec(FieldReader(where, SPEC_WHAT), data)

    @classmethod
    def load(cls, fs: RunDirFS, path: str | Path) -> JobSpec:
        """Read the spec through the run's file layer (a FIFO or a link refused, its size
        bounded); missing: FileNotFoundError, which the task reports as a trial taken away."""
        data = fs.load_json(path, what=SPEC_WHAT, limit=INPUT_LIMITS[SPEC_WHAT])
        return cls.from_dict(data, where=fs.display(fs.rel(path)))


@dataclass(frozen=True)
class SpecManifest:
    """A batch's ``slurm/<batch>.json``: its tasks' spec paths, task ``i`` at ``specs[i]``."""

    specs: tuple[str, ...]
    extra: dict[str, Json] = field(default_factory=dict)  # keys a newer writer added
    where: str = field(default=MANIFEST_WHAT, compare=False)  # the file it was read from

    def to_json(self) -> dict[str, Json]:
        return {"specs": list(self.specs), **self.extra}

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    def spec_of(self, task: int) -> str:
        """Task ``task``'s spec path; a task the manifest does not list is a located error."""
        if not 0 <= task < len(self.specs):
            raise UsageError(f"{self.where}: specs[{task}]: missing (the manifest lists "
                             f"{len(self.specs)} task(s))", hint=_hint(MANIFEST_WHAT))
        return self.specs[task]

    @classmethod
    def from_dict(cls, data: object, *, where: str = "slurm manifest") -> SpecManifest:
        f = FieldReader(where, MANIFEST_WHAT)
        d = f.obj(data, "(top level)")
        if "specs" not in d:
            raise UsageError(f"{where}: specs: missing", hint=_hint(MANIFEST_WHAT))
        return cls(specs=f.strings_at(d, "specs", ""), where=where,
                   extra={k: v for k, v in d.items() if k != "specs"})

    @classmethod
    def load(cls, fs: RunDirFS, path: str | Path) -> SpecManifest:
        data = fs.load_json(path, what=MANIFEST_WHAT, limit=INPUT_LIMITS[MANIFEST_WHAT])
        return cls.from_dict(data, where=fs.display(fs.rel(path)))


# -- the reader ----------------------------------------------------------------------------

_SPEC_KEYS = frozenset({"batch", "argv", "env", "cell_keys", "cwd", "stdout_path", "stderr_path",
                        "timeout_s", "kill_grace_s", "trial_dir", "hang"})


def _read_spec(f: FieldReader, data: object) -> JobSpec:
    d = f.obj(data, "(top level)")
    env = {k: str(f.check(v, "string", f"env.{k}"))
           for k, v in f.obj_at(d, "env", "", required=True).items()}
    if "argv" not in d:
        raise UsageError(f"{f.where}: argv: missing", hint=_hint(f.what))
    return JobSpec(
        # absent: any array's; written, a string (a null named no array: the old read took
        # no array's spec for it, and the writer never wrote one)
        batch=f.text(d, "batch", "") if "batch" in d else None,
        argv=f.strings_at(d, "argv", ""), env=env,
        cwd=f.text(d, "cwd", "", required=True),
        stdout_path=f.text(d, "stdout_path", "", required=True),
        stderr_path=f.text(d, "stderr_path", "", required=True),
        trial_dir=f.text(d, "trial_dir", "", required=True),
        cell_keys=f.strings_at(d, "cell_keys", ""), timeout_s=f.number(d, "timeout_s", ""),
        kill_grace_s=f.number(d, "kill_grace_s", "", DEFAULT_KILL_GRACE_S),
        hang=_read_hang(f, d), extra={k: v for k, v in d.items() if k not in _SPEC_KEYS})


def _read_hang(f: FieldReader, d: dict[str, Any]) -> HangSpec | None:
    if not d.get("hang"):  # the task's old `if spec.get("hang")`: absent, null, empty
        return None
    h = f.obj_at(d, "hang", "")
    if "disabled" not in h:  # the old read indexed it: a hang section always names it
        raise UsageError(f"{f.where}: hang.disabled: missing", hint=_hint(f.what))
    window, grace = f.number(h, "window_s", "hang", 30.0), f.number(h, "grace_s", "hang", 60.0)
    # HangPolicy refuses these with a ValueError (a traceback on the node): located here
    if not window > 0 or not grace >= 0:
        raise UsageError(f"{f.where}: hang: window_s must be > 0 and grace_s >= 0, found "
                         f"{window!r} and {grace!r}", hint=_hint(f.what))
    return HangSpec(window_s=window, grace_s=grace, disabled=f.strings_at(h, "disabled", "hang"))
