"""``run.json`` as a typed value: what was run (the run's id, recipe hash, command, aorta-tui
version), written atomically and read back checked; a directory without it is no run.

One serializer, :meth:`RunMeta.to_json` (the object run.json has always held, key order
included), and one reader, :meth:`RunMeta.from_dict`: every field's type checked, a damaged one
named with the file and the field path (UsageError, exit 2; :func:`read_run_meta` says it as a
RunDirError, exit 2 too). What a caller does with a refusal is its own decision: a resume stops,
a bundle ships the run as it is.

A field is None when the file does not hold it (``run_id``: a run made before run.json kept its
id) and is then not written back, so a file an older aorta-tui wrote reads back to its own
bytes; the writer never writes null, so a null is damage, not an absent field. A key this
version does not know is kept, after the known ones: a run.json a newer aorta-tui wrote reads
back with nothing lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aorta_tui.core.errors import RunDirError, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS, FieldReader, Json, clip_for_message
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.store.naming import CREATING_SUFFIX, RUN_META

WHAT = "run.json"
_NOT_A_RUN_HINT = "pass the directory that holds journal.jsonl, e.g. aorta-out/TICKET/20261129-101500-ab12"


@dataclass(frozen=True)
class RunMeta:
    """``run.json`` (docs/run-directory.md); None: the file does not hold the field."""

    aorta_tui_version: str | None = None  # the version that made the run
    run_id: str | None = None  # the id it was created with: a rename keeps it (issue 37)
    recipe_hash: str | None = None  # recipe.resolved.yaml's hash: a resume checks its recipe
    recipe_source: str | None = None  # the recipe file it started from; "" none
    mode: str | None = None  # triage or probe
    command: tuple[str, ...] | None = None  # the recipe's command
    created_at: float | None = None  # time.time() when it was created
    argv: tuple[str, ...] | None = None  # the aorta-tui command line that made it
    extra: dict[str, Json] = field(default_factory=dict)  # keys a newer writer added

    def to_json(self) -> dict[str, Json]:
        """The object run.json holds (``core.atomic.json_bytes`` writes it), in the order the
        writer has always written it; an absent field is left out."""
        known: dict[str, Json] = {
            "aorta_tui_version": self.aorta_tui_version, "run_id": self.run_id,
            "recipe_hash": self.recipe_hash, "recipe_source": self.recipe_source,
            "mode": self.mode, "command": None if self.command is None else list(self.command),
            "created_at": self.created_at,
            "argv": None if self.argv is None else list(self.argv),
        }
        return {**{k: v for k, v in known.items() if v is not None}, **self.extra}

    __hash__ = None  # type: ignore[assignment]  # a dict field: never a dict key

    @classmethod
    def from_dict(cls, data: object, *, where: str = RUN_META) -> RunMeta:
        """Read a parsed run.json; a damaged one is a located UsageError (exit 2)."""
        return _read_meta(FieldReader(where, WHAT), data)


def write_run_meta(run_dir: Path, meta: RunMeta) -> None:
    with RunDirFS(run_dir) as fs:
        fs.atomic_write_json(RUN_META, meta.to_json())


def read_run_meta(run_dir: Path) -> RunMeta:
    """The run's run.json, typed; a directory that is no run (or a half-made one) or a damaged
    run.json is a located RunDirError (exit 2)."""
    path = run_dir / RUN_META
    # A directory still being created (or left so by a kill) is never a run, even with its
    # run.json written: it has not got its name, so nothing lists it or follows it.
    if run_dir.name.endswith(CREATING_SUFFIX) or (
            not path.exists() and ((run_dir / "recipe.resolved.yaml").exists()
                                   or (run_dir / "plan.json").exists())):
        raise RunDirError(
            f"{run_dir} was never fully created (aorta-tui was stopped while writing it; it has no "
            f"{RUN_META}), so no trial ran in it",
            hint="start the sweep again as a new run (the same recipe and command); this directory "
            "can be deleted",
        )
    if not run_dir.is_dir():  # a file or nothing: no run (exit 2), as a missing run.json says
        raise _not_a_run(run_dir)
    try:
        with RunDirFS(run_dir) as fs:  # run.json through the file layer: never a link's target
            data = fs.load_json(RUN_META, what=WHAT, limit=INPUT_LIMITS["run meta"])
        return RunMeta.from_dict(data, where=str(path))
    except FileNotFoundError:
        raise _not_a_run(run_dir) from None
    except UsageError as exc:
        if not path.exists():
            raise _not_a_run(run_dir) from None
        raise RunDirError(f"{exc.message}", hint="the run directory is damaged; start a new run") from None


def _not_a_run(run_dir: Path) -> RunDirError:
    return RunDirError(f"{run_dir} is not an aorta-tui run directory (no {RUN_META})",
                       hint=_NOT_A_RUN_HINT)


# -- the reader ----------------------------------------------------------------------------

_KNOWN = frozenset(RunMeta(aorta_tui_version="", run_id="", recipe_hash="", recipe_source="",
                           mode="", command=(), created_at=0.0, argv=()).to_json())


def _read_meta(f: FieldReader, data: object) -> RunMeta:
    d = f.obj(data, "(top level)")
    return RunMeta(
        aorta_tui_version=_text(f, d, "aorta_tui_version"), run_id=_text(f, d, "run_id"),
        recipe_hash=_recipe_hash(f, d), recipe_source=_text(f, d, "recipe_source"),
        mode=_text(f, d, "mode"),
        command=f.strings(d["command"], "command") if "command" in d else None,
        created_at=_number(f, d, "created_at"),
        argv=f.strings(d["argv"], "argv") if "argv" in d else None,
        extra={k: v for k, v in d.items() if k not in _KNOWN})


def _text(f: FieldReader, d: dict[str, Any], key: str) -> str | None:
    """``d[key]``, a string (never null: the writer writes none), or None when the file does
    not hold it."""
    return f.text(d, key, "") if key in d else None


def _number(f: FieldReader, d: dict[str, Any], key: str) -> float | None:
    """``d[key]``, a finite number kept as written (an int stays an int: the file reads back
    to its own bytes), or None when the file does not hold it; null is damage, as above."""
    if key not in d:
        return None
    value: float = f.check(d[key], "number", key)
    return value


def _recipe_hash(f: FieldReader, d: dict[str, Any]) -> str | None:
    """A hash (a non-empty string), or None when the file has none (the resume says so)."""
    if "recipe_hash" not in d:
        return None
    value = d["recipe_hash"]
    if not isinstance(value, str) or not value:
        # Damage, not a changed recipe: a resume that said "the recipe changed (hash [...]
        # then)" would send the user looking for an edit that never happened.
        raise UsageError(
            f"{f.where}: recipe_hash is not a hash: {clip_for_message(value, 60)}, so this run "
            f"cannot be checked against its recipe ({WHAT} is damaged)",
            hint=f"this {WHAT} is damaged or was not written by aorta-tui")
    return value
