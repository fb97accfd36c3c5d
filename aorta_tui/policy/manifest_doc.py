"""A policy sweep's ``sweep.json`` as a typed value (issue 36 item 3): one serializer, one
reader.

The evaluator writes :meth:`SweepManifest.to_json` when a sweep starts (the request, the
policies as they were resolved, their notes, the planned order: what a resume follows and a
report is computed from), the object ``sweep.json`` has always held, key order included. The
report (``report.load_manifest``) and the resume (``evaluator.resume_policy_sweep``) read it
through :meth:`SweepManifest.from_dict`: every field's type checked, a damaged one named with
the file and the field path (UsageError, exit 2; ``load_manifest`` says it as a RunDirError,
exit 2 too, with the hint that the trial directories are still there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import FieldReader, Json
from aorta_tui.policy.presets import Policy
from aorta_tui.policy.report_doc import read_policy_definition

MANIFEST_KIND = "aorta-tui/policy-sweep"
MANIFEST_SCHEMA_VERSION = 1
WHAT = "policy sweep manifest"
DEFAULT_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class RecordedRequest:
    """The sweep's options as ``sweep.json`` records them (``PolicySweepRequest.record``)."""

    # None: not recorded (a hand-made manifest): the report says null, a resume refuses it
    workload: str | None
    output_dir: str
    policies: tuple[str, ...]  # the names, reference first
    streams: int | None
    trials: int | None
    iterations: int | None
    warmup: int | None
    device: str | None
    seed: int
    allow_gpu_control: bool
    gpu_index: int
    queue_args: tuple[str, ...]
    timeout_s: float

    def to_json(self) -> dict[str, Json]:
        return {"workload": self.workload, "output_dir": self.output_dir,
                "policies": list(self.policies), "streams": self.streams, "trials": self.trials,
                "iterations": self.iterations, "warmup": self.warmup, "device": self.device,
                "seed": self.seed, "allow_gpu_control": self.allow_gpu_control,
                "gpu_index": self.gpu_index, "queue_args": list(self.queue_args),
                "timeout_s": self.timeout_s}


@dataclass(frozen=True)
class PolicyRecord:
    """A policy definition as recorded, and the keys ``Policy`` does not know (in file order:
    the report keeps them as they were)."""

    policy: Policy
    extra: dict[str, Json] = field(default_factory=dict)

    def to_json(self) -> dict[str, Json]:
        return {**self.policy.to_dict(), **self.extra}


@dataclass(frozen=True)
class OrderEntry:
    """A planned trial: its place in the run order, its policy, its repeat, its directory."""

    position: int  # 0-based
    policy: str
    trial: int  # 1-based
    dir: str  # under trials/; one name, never a path

    def to_json(self) -> dict[str, Json]:
        return {"position": self.position, "policy": self.policy, "trial": self.trial,
                "dir": self.dir}


@dataclass(frozen=True)
class SweepManifest:
    """``sweep.json``: what a sweep was asked, the policies it resolved, its planned order."""

    run_id: str | None  # None: a manifest that did not record it (the resume mints one)
    created: str | None
    request: RecordedRequest
    reference: str
    reference_added: bool
    policies: tuple[PolicyRecord, ...]
    notes: dict[str, tuple[str, ...]]  # per policy, said in the report
    skipped: dict[str, str]  # policy name: why it did not run
    order: tuple[OrderEntry, ...]
    schema_version: int = MANIFEST_SCHEMA_VERSION

    def to_json(self) -> dict[str, Json]:
        """The object sweep.json holds (``core.atomic.json_bytes`` writes it)."""
        return {
            "schema_version": self.schema_version, "kind": MANIFEST_KIND, "run_id": self.run_id,
            "created": self.created, "request": self.request.to_json(),
            "reference": self.reference, "reference_added": self.reference_added,
            "policies": [p.to_json() for p in self.policies],
            "notes": {k: list(v) for k, v in self.notes.items()}, "skipped": dict(self.skipped),
            "order": [o.to_json() for o in self.order],
        }

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    @classmethod
    def from_dict(cls, data: object, *, where: str = "sweep.json") -> SweepManifest:
        """Read a parsed sweep.json; a damaged one is a located UsageError (exit 2)."""
        return _read_manifest(FieldReader(where, WHAT), data)


@dataclass(frozen=True)
class PlannedPolicy:
    """A policy as ``policy sweep --dry-run`` shows it: its definition and what a trial of it
    would be (the inherited variables removed, the queue run, the process's argv)."""

    policy: Policy
    inherited_removed: tuple[str, ...]
    notes: tuple[str, ...]
    skipped: str  # why it would not run; "" when it would
    queue_config: dict[str, Json]  # the trial's QueueRunConfig, as queue-config.json holds it
    argv: tuple[str, ...]  # with trials/NNN/ for the trial's directory

    def to_json(self) -> dict[str, Json]:
        return {**self.policy.to_dict(), "inherited_removed": list(self.inherited_removed),
                "notes": list(self.notes), "skipped": self.skipped,
                "queue_config": dict(self.queue_config), "argv": list(self.argv)}


@dataclass(frozen=True)
class SweepPlan:
    """What a sweep would do (``PolicyEvaluator.dry_run``): printed by ``--dry-run``, as JSON
    with ``--json`` (its one serializer), never written to a file nor read back."""

    request: RecordedRequest
    reference_added: bool
    policies: tuple[PlannedPolicy, ...]
    order: tuple[str, ...]  # the trial directories' names, in run order
    gpu_control_plans: dict[str, str]  # policy name: the commands around each of its trials

    @property
    def trials_total(self) -> int:
        return len(self.order)

    def to_json(self) -> dict[str, Json]:
        return {"request": self.request.to_json(), "reference_added": self.reference_added,
                "policies": [p.to_json() for p in self.policies], "order": list(self.order),
                "gpu_control_plans": dict(self.gpu_control_plans),
                "trials_total": self.trials_total}


# -- the reader ----------------------------------------------------------------------------


def _read_manifest(f: FieldReader, data: object) -> SweepManifest:
    d = f.obj(data, "(top level)")
    if d.get("kind") != MANIFEST_KIND:
        raise UsageError(f"{f.where} is not a policy sweep manifest",
                         hint="give the --output directory of a `policy sweep`")
    for key in ("policies", "order"):  # required, as they always were: the sweep is these two
        if key not in d:
            raise UsageError(f"{f.where}: {key}: missing",
                             hint=f"this {f.what} is damaged or was not written by aorta-tui")
    policies = tuple(_read_policy(f, p, f"policies[{i}]")
                     for i, p in enumerate(f.array_at(d, "policies", "")))
    notes = {str(k): f.strings(v, f"notes.{k}") for k, v in f.obj_at(d, "notes", "").items()}
    skipped = {str(k): str(f.check(v, "string", f"skipped.{k}"))
               for k, v in f.obj_at(d, "skipped", "").items()}
    order = tuple(_read_entry(f, o, f"order[{i}]") for i, o in enumerate(f.array_at(d, "order", "")))
    _check_order_names_policies(f, order, policies)
    return SweepManifest(
        schema_version=f.integer(d, "schema_version", "", MANIFEST_SCHEMA_VERSION),
        run_id=f.opt_text(d, "run_id", ""), created=f.opt_text(d, "created", ""),
        request=_read_request(f, f.obj_at(d, "request", "", required=True)),
        reference=f.text(d, "reference", "", "baseline"),
        reference_added=f.boolean(d, "reference_added", ""), policies=policies, notes=notes,
        skipped=skipped, order=order)


def _check_order_names_policies(f: FieldReader, order: tuple[OrderEntry, ...],
                                policies: tuple[PolicyRecord, ...]) -> None:
    """Every planned trial's policy is one of the sweep's: a resume runs each by its policy's
    definition, and one naming no policy here ended it with a KeyError (exit 70)."""
    known = {p.policy.name for p in policies}
    for i, entry in enumerate(order):
        if entry.policy not in known:
            raise UsageError(f"{f.where}: order[{i}].policy: {entry.policy!r} is not one of the "
                             f"sweep's policies ({', '.join(sorted(known)) or 'none'})",
                             hint=f"this {f.what} is damaged or was not written by aorta-tui")


def _read_request(f: FieldReader, d: dict[str, Any]) -> RecordedRequest:
    p = "request"
    timeout: float = f.check(d.get("timeout_s", DEFAULT_TIMEOUT_S), "number", "request.timeout_s")
    if timeout <= 0:  # a resume runs trials under it: a finite number of seconds above 0
        raise UsageError(f"{f.where}: request.timeout_s: not a number of seconds above 0: "
                         f"{timeout!r:.40}",
                         hint=f"this {f.what} is damaged or was not written by aorta-tui")
    return RecordedRequest(
        workload=f.opt_text(d, "workload", p), output_dir=f.text(d, "output_dir", p),
        policies=f.strings_at(d, "policies", p), streams=f.opt_integer(d, "streams", p),
        trials=f.opt_integer(d, "trials", p),
        iterations=f.opt_integer(d, "iterations", p), warmup=f.opt_integer(d, "warmup", p),
        device=f.opt_text(d, "device", p),
        # null read as 0 as it always has (`seed or 0`): the seed the sweep's order was drawn with
        seed=f.opt_integer(d, "seed", p) or 0,
        allow_gpu_control=f.boolean(d, "allow_gpu_control", p),
        gpu_index=f.integer(d, "gpu_index", p), queue_args=f.strings_at(d, "queue_args", p),
        timeout_s=timeout)


_POLICY_KEYS = frozenset(Policy(name="").to_dict())


def _read_policy(f: FieldReader, value: object, path: str) -> PolicyRecord:
    d = f.obj(value, path)
    name = f.text(d, "name", path, required=True)
    return PolicyRecord(policy=read_policy_definition(f, d, name, path),
                        extra={k: v for k, v in d.items() if k not in _POLICY_KEYS})


def _read_entry(f: FieldReader, value: object, path: str) -> OrderEntry:
    d = f.obj(value, path)
    where = f.text(d, "dir", path, required=True)
    if "/" in where or where in ("", ".", ".."):  # a trial's directory is one name under trials/
        raise UsageError(f"{f.where}: {path}.dir: not a trial directory name: {where!r:.60}",
                         hint=f"this {f.what} is damaged or was not written by aorta-tui")
    return OrderEntry(position=f.integer(d, "position", path, required=True),
                      policy=f.text(d, "policy", path, required=True),
                      trial=f.integer(d, "trial", path, required=True), dir=where)
