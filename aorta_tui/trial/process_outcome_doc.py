"""A :class:`ProcessOutcome` read back from its JSON form (``ProcessOutcome.to_dict``): the one
checked reader, every field's type checked, damage a located UsageError (exit 2).

It lives beside the type because the type is the trial package's: a document of a higher layer
that holds a process outcome (a Slurm task's ``slurm-outcome.json``, executor/slurm_outcome_doc)
calls :func:`read_process_outcome` with its own :class:`FieldReader` and field path, so a damaged
field is named in that document's words (its file, ``process.wall_s``). A module of its own, not
a method of the type: supervisor.py would have to import it back, and the architecture forbids
import circles, lazy ones too.

``ProcessOutcome.from_dict`` stays the unchecked inverse of ``to_dict`` for values this process
made itself; what comes from a file goes through here.
"""

from __future__ import annotations

from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.hang_report import read_hang_report
from aorta_tui.core.inputs import FieldReader
from aorta_tui.core.process_record import read_executor_facts
from aorta_tui.trial.supervisor import ProcessOutcome

# ProcessOutcome's fields as ``to_dict`` writes them: (JSON kind, nullable), in its order. Those
# before ``gpu_mem_source`` have no default: a process without one is refused (the dataclass
# would have refused it too, with a TypeError). Unknown keys are left out, as from_dict does
# (``signal_name`` among them: to_dict derives it from ``signal``).
PROCESS_FIELDS: tuple[tuple[str, str, bool], ...] = (
    ("pid", "integer", True), ("exit_code", "integer", True), ("signal", "integer", True),
    ("core_dumped", "boolean", False), ("timed_out", "boolean", False),
    ("cancelled", "boolean", False), ("hang", "object", True), ("exec_error", "string", True),
    ("wall_s", "number", False), ("started_at", "number", False), ("ended_at", "number", False),
    ("peak_rss_kb", "integer", True), ("gpu_peak_mem_bytes", "integer", True),
    ("gpu_mem_reason", "string", True), ("stdout_bytes", "integer", False),
    ("stderr_bytes", "integer", False), ("truncated", "boolean", False),
    ("gpu_mem_source", "string", True), ("peak_rss_reason", "string", True),
    ("gpu_counters_delta", "object", True), ("gpu_counters_reason", "string", True),
    ("killed_strays", "boolean", False), ("kill_escalated", "boolean", False),
    ("log_error", "string", True), ("hang_note", "string", True),
    ("containment", "string", True), ("containment_reason", "string", True),
    ("timeout_s", "number", True), ("stopped_at_s", "number", True),
    ("killed_count", "integer", False), ("survivors", "array", True),
    ("survivors_reason", "string", True), ("marks", "object", False),
    ("beside", "object", False), ("executor", "object", True),
)
_REQUIRED = 17  # pid .. truncated


def read_process_outcome(f: FieldReader, d: dict[str, Any], path: str) -> ProcessOutcome:
    """The outcome held by the object ``d`` at ``path`` of the document ``f`` reads (its place
    in every error message, ``process`` in a Slurm outcome)."""
    kwargs: dict[str, Any] = {}
    for i, (key, kind, nullable) in enumerate(PROCESS_FIELDS):
        if key not in d:
            if i < _REQUIRED:
                raise UsageError(f"{f.where}: {path}.{key}: missing",
                                 hint=f"this {f.what} is damaged or was not written by aorta-tui")
            continue  # its default, as ProcessOutcome.from_dict gives it
        kwargs[key] = f.check(d[key], kind, f"{path}.{key}", nullable=nullable)
    if kwargs["hang"] is not None:
        kwargs["hang"] = read_hang_report(f, kwargs["hang"], f"{path}.hang")
    if kwargs.get("survivors") is not None:
        kwargs["survivors"] = [f.check(v, "integer", f"{path}.survivors[{i}]")
                               for i, v in enumerate(kwargs["survivors"])]
    if kwargs.get("executor") is not None:  # where it ran: core's typed facts, checked
        kwargs["executor"] = read_executor_facts(f, kwargs["executor"], f"{path}.executor")
    for key in ("gpu_counters_delta", "marks"):  # {device: {counter: n}}, {mark: ns}
        if kwargs.get(key) is not None:
            kwargs[key] = _ints_map(f, kwargs[key], f"{path}.{key}", nested=key != "marks")
    return ProcessOutcome(**kwargs)


def _ints_map(f: FieldReader, d: dict[str, Any], path: str, *, nested: bool) -> dict[str, Any]:
    if nested:
        return {k: _ints_map(f, f.obj(v, f"{path}.{k}"), f"{path}.{k}", nested=False)
                for k, v in d.items()}
    return {k: f.check(v, "integer", f"{path}.{k}") for k, v in d.items()}
