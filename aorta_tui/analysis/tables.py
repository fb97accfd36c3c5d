"""The loaders: each reads the files the engine wrote (never re-derives a verdict) and returns
named tables of rows; :func:`load_tables` picks the loader by what the path is.

No pandas here: ``export --format csv`` writes these tables with the standard library, so the
quickstart's next step works on a fresh install; ``frames.py`` turns them into DataFrames for
notebooks (the ``analysis`` extra), one DataFrame per table with the same columns."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_tui.core.events import TrialFinished
from aorta_tui.core.process_record import read_process_record
from aorta_tui.core.trial_contract import RESULT_FILE

if TYPE_CHECKING:
    from aorta_tui.policy.outcome_doc import TrialOutcome
    from aorta_tui.policy.report_doc import PolicyEntry
    from aorta_tui.sweep.matrix_doc import MatrixCell

STEP_STATS = ("mean", "p25", "p50", "p75", "iqr", "p90", "p99")
Row = dict[str, Any]


@dataclass(frozen=True)
class Table:
    """One table: its columns in order and its rows (a missing key reads as an empty cell).

    ``left_out`` names what the loader could not make a row of, and why it is not one (export
    prints it): a damaged record is no row, never a row of guessed fields."""

    columns: tuple[str, ...]
    rows: list[Row]
    left_out: tuple[str, ...] = field(default=())

    @classmethod
    def of(cls, rows: list[Row], columns: list[str] | None = None) -> Table:
        """``columns`` given, or every key in the order the rows first name it (as a DataFrame
        built from the same rows orders them)."""
        if columns is None:
            columns = list(dict.fromkeys(k for row in rows for k in row))
        return cls(tuple(columns), rows)


Tables = dict[str, Table]


def load_tables(path: str | Path) -> Tables:
    """The tables of a run directory, a policy sweep directory or a queue result file."""
    from aorta_tui.bundle.archive import identify_input

    inp = identify_input(Path(path))
    if inp.kind == "run":
        return run_tables(inp.path)
    if inp.kind == "policy-sweep":
        return policy_sweep_tables(inp.path)
    return queue_tables(inp.path)


# -- a sweep's run directory ---------------------------------------------------------------
def run_tables(run_dir: str | Path) -> Tables:
    """``trials`` (one row per finished trial of the plan), ``cells`` (matrix.json's cells, or
    computed from the trials when the run has no matrix yet) and ``steps`` (one row per step
    time of every trial)."""
    run_dir = Path(run_dir)
    results, left_out = _finished_results(run_dir)
    # Said, not silently dropped: export prints it (a damaged result.json is no row here, as
    # resume does not count it, while an older matrix.json may still count the trial).
    trials = Table(tuple(TRIAL_COLUMNS), [_trial_row(r) for r in results], tuple(left_out))
    steps = Table.of([{"trial_id": r["trial_id"], "cell": r["cell"], "trial": r["trial"],
                       "step": i, "step_time_s": float(t)}
                      for r in results for i, t in enumerate(_numbers(r.get("step_times_s")))],
                     ["trial_id", "cell", "trial", "step", "step_time_s"])
    from aorta_tui.sweep.matrix_doc import read_matrix_or_none

    matrix = read_matrix_or_none(run_dir)  # typed; None when missing or not a matrix
    if matrix is not None:
        cells = Table.of([_cell_row(c) for c in matrix.cells], CELL_COLUMNS)
    else:
        cells = _cells_from_trials(trials.rows, steps.rows)
    return {"trials": trials, "cells": cells, "steps": steps}


TRIAL_COLUMNS = ["trial_id", "cell", "trial", "order", "session", "verdict", "reason",
                 "mitigations", "environment", "exit_code", "signal", "timed_out", "wall_s",
                 "peak_rss_kb", "gpu_peak_mem_bytes", "steps", "step_time_mean_s",
                 "step_time_p50_s", "step_time_source", "detections"]
CELL_COLUMNS = ["cell", "mitigations", "environment", "trials", "passed", "failed", "errored",
                "failure_rate", "error_rate", "step_count", "step_time_source",
                *(f"step_time_{s}_s" for s in STEP_STATS), "noise_flag", "confound_flag",
                "confound_reason", "top_detectors"]


def _finished_results(run_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The trials that count, as resume and matrix.json count them: the plan's, each once,
    finished in the journal with a whole result.json (docs/run-directory.md); and the ids of
    those the journal says finished whose result.json is not whole (damaged or missing)."""
    from aorta_tui.core.errors import RunDirError
    from aorta_tui.store.resume import read_trial_result, resume_state

    if not (run_dir / "journal.jsonl").is_file():
        raise RunDirError(f"{run_dir} is not a run directory (no journal.jsonl)",
                          hint="pass <output>/<ticket>/<run-id>")
    from aorta_tui.store.plan_doc import read_plan_or_none

    plan = read_plan_or_none(run_dir)  # typed; None: no plan or a damaged one
    ids = None if plan is None else plan.trial_ids  # None: the journal's trial ids
    state = resume_state(run_dir, ids)
    out = []
    for tid in state.completed:
        r = read_trial_result(run_dir, tid)
        if r is not None:
            out.append(r)
    out.sort(key=lambda r: (r.get("order") if isinstance(r.get("order"), int) else 1 << 62,
                            r["trial_id"]))
    said_finished = {e.trial_id for e in _journal_events(run_dir) if isinstance(e, TrialFinished)}
    left_out = sorted(t for t in said_finished if t not in state.completed and (ids is None or t in ids))
    return out, left_out


def _journal_events(run_dir: Path) -> list[Any]:
    from aorta_tui.store.journal_reader import scan_journal
    from aorta_tui.store.naming import JOURNAL

    return list(scan_journal(run_dir / JOURNAL).events)


def _trial_row(r: dict[str, Any]) -> dict[str, Any]:
    # typed as the run directory reads it: a damaged field reads as not recorded (None)
    proc = read_process_record(r.get("process"), where=RESULT_FILE, strict=False)
    times = _numbers(r.get("step_times_s"))
    ordered = sorted(times)
    return {
        "trial_id": r["trial_id"], "cell": r["cell"], "trial": r["trial"],
        "order": r.get("order"), "session": r.get("session"), "verdict": r.get("verdict"),
        "reason": r.get("reason"), "mitigations": _joined(r.get("mitigations")),
        "environment": r.get("environment"), "exit_code": proc.exit_code,
        "signal": proc.signal_name or proc.signal,
        "timed_out": proc.timed_out, "wall_s": proc.wall_s,
        "peak_rss_kb": proc.peak_rss_kb, "gpu_peak_mem_bytes": proc.gpu_peak_mem_bytes,
        "steps": len(times),
        "step_time_mean_s": sum(times) / len(times) if times else None,
        "step_time_p50_s": _median(ordered),
        "step_time_source": r.get("step_time_source"),
        "detections": _joined([d.get("id") for d in r.get("detections") or []
                               if isinstance(d, dict)]),
    }


def _cell_row(c: MatrixCell) -> dict[str, Any]:
    st = c.stats
    return {
        "cell": st.cell, "mitigations": _joined(list(c.mitigations)),
        "environment": c.environment, "trials": st.trials,
        "passed": st.passed, "failed": st.failed, "errored": st.errored,
        "failure_rate": st.failure_rate, "error_rate": st.error_rate,
        "step_count": st.step_count, "step_time_source": st.step_time_source,
        **{f"step_time_{s}_s": st.step_time.get(s) for s in STEP_STATS},
        "noise_flag": st.noise.get("flag"), "confound_flag": st.confound.get("flag"),
        "confound_reason": st.confound.get("reason"),
        "top_detectors": _joined([name for name, _count in st.top_detectors]),
    }


def _cells_from_trials(trials: list[Row], steps: list[Row]) -> Table:
    """The cells of a run without a matrix yet, from its trial rows (in first-seen order)."""
    by_cell: dict[str, list[Row]] = {}
    for row in trials:
        by_cell.setdefault(row["cell"], []).append(row)
    rows = []
    for cell, group in by_cell.items():
        n = len(group)
        times = sorted(s["step_time_s"] for s in steps if s["cell"] == cell)
        verdicts = [r["verdict"] for r in group]
        failed, errored = verdicts.count("fail"), verdicts.count("error")
        rows.append({"cell": cell, "mitigations": group[0]["mitigations"],
                     "environment": group[0]["environment"], "trials": n,
                     "passed": verdicts.count("pass"), "failed": failed,
                     "errored": errored, "failure_rate": failed / n, "error_rate": errored / n,
                     "step_count": len(times),
                     "step_time_mean_s": sum(times) / len(times) if times else None,
                     "step_time_p50_s": _median(times)})
    return Table.of(rows, CELL_COLUMNS)


# -- a policy sweep ------------------------------------------------------------------------
def policy_sweep_tables(run_dir: str | Path) -> Tables:
    """``trials`` (one row per trial: policy, status, and every summary metric),
    ``policies`` (policy.json: per metric its median and 95% interval) and ``per_stream``
    (each trial's per-stream figures, from its queue result)."""
    run_dir = Path(run_dir)
    rows: list[dict[str, Any]] = []
    streams: list[dict[str, Any]] = []
    for path in sorted((run_dir / "trials").glob("*/outcome.json")):
        o = _outcome(path)
        if o is None:
            continue
        rows.append({"dir": path.parent.name, "policy": o.policy, "trial": o.trial,
                     "position": o.position, "status": o.status, "reason": o.reason,
                     "exit_code": o.exit_code, "trial_wall_s": o.wall_s,
                     "peak_rss_kb": o.peak_rss_kb,
                     "env_set": json.dumps(o.env_set, sort_keys=True),
                     **o.figures.summary})
        streams.extend({"dir": path.parent.name, "policy": o.policy, "trial": o.trial, **s}
                       for s in _trial_streams(path.parent / "result.json"))
    rows.sort(key=lambda row: row["position"])  # stable: the run's order, as it ran them
    policies = [_policy_row(p) for p in _policy_entries(run_dir)]
    return {"trials": Table.of(rows), "policies": Table.of(policies),
            "per_stream": Table.of(streams)}


def _outcome(path: Path) -> TrialOutcome | None:
    """A trial's outcome.json through its one reader; a missing or damaged one is none (as
    every record here: a damaged record is no record, never a row of guessed fields)."""
    from aorta_tui.core.errors import UsageError
    from aorta_tui.policy.outcome_doc import TrialOutcome

    raw = _json_file(path)
    if raw is None:
        return None
    try:
        return TrialOutcome.from_dict(raw, where=str(path))
    except UsageError:
        return None


def _policy_entries(run_dir: Path) -> tuple[PolicyEntry, ...]:
    """The policies of the run's policy.json, through its one reader; a missing or damaged
    one has none (as every record here: a damaged record is no record)."""
    from aorta_tui.core.errors import UsageError
    from aorta_tui.policy.report_doc import PolicyReport

    path = run_dir / "policy.json"
    raw = _json_file(path)
    if raw is None:
        return ()
    try:
        return PolicyReport.from_dict(raw, where=str(path)).policies
    except UsageError:
        return ()


def _policy_row(p: PolicyEntry) -> dict[str, object]:
    """One policy of policy.json: its counts and, per metric, n, median and the interval."""
    row: dict[str, object] = {"policy": p.name, "kind": p.policy.kind, "status": p.status,
                              "trials_ok": p.trials_ok, "trials_failed": p.trials_failed}
    for metric, m in p.metrics.items():
        row.update({f"{metric}_n": m.n, f"{metric}_median": m.median,
                    f"{metric}_ci_low": m.ci_low, f"{metric}_ci_high": m.ci_high})
    return row


def _trial_streams(result: Path) -> list[dict[str, Any]]:
    """A policy trial's per-stream rows; a trial without a whole queue result has none."""
    from aorta_tui.core.errors import AortaError
    from aorta_tui.hwqueue.result_doc import load_run_result

    if not result.is_file():
        return []
    try:
        doc = load_run_result(result)
    except AortaError:
        return []
    return [{k: v for k, v in s.items() if _scalar(v)} for s in doc.per_stream()]


# -- a queue result or sweep -----------------------------------------------------------------
def queue_tables(path: str | Path) -> Tables:
    """``points`` (one row per point: streams and the summary figures), ``per_stream`` (one
    row per stream of every point) and ``iterations`` (the per-iteration samples)."""
    from aorta_tui.hwqueue.result_doc import QueueSweepDoc, load_result

    doc = load_result(path)
    points = doc.points if isinstance(doc, QueueSweepDoc) else (doc,)
    summary_rows: list[dict[str, Any]] = []
    stream_rows: list[dict[str, Any]] = []
    iteration_rows: list[dict[str, Any]] = []
    for i, pt in enumerate(points):
        key = {"point": i, "streams": pt.config.streams}
        summary_rows.append({**key, "run_id": pt.run_id, "workload": pt.workload.name,
                             "device": pt.config.device, "emulated": pt.emulated,
                             **{k: v for k, v in pt.summary.values.items() if _scalar(v)}})
        for s in pt.per_stream():
            stream_rows.append({**key, **{k: v for k, v in s.items() if _scalar(v)}})
        series = {k.removeprefix("iteration_"): v for k, v in pt.samples.items()
                  if isinstance(v, list) and v}
        length = max((len(v) for v in series.values()), default=0)
        for n in range(length):
            iteration_rows.append({**key, "iteration": n,
                                   **{k: v[n] if n < len(v) else None for k, v in series.items()}})
    return {"points": Table.of(summary_rows), "per_stream": Table.of(stream_rows),
            "iterations": Table.of(iteration_rows)}


# -- small helpers -----------------------------------------------------------------------------
def _json_file(path: Path) -> Any:
    from aorta_tui.core.inputs import read_json_or_none

    return read_json_or_none(path, limit=512 << 20)


def _numbers(value: object) -> list[float]:
    if not isinstance(value, list):
        return []
    return [float(v) for v in value if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _median(ordered: list[float]) -> float | None:
    if not ordered:
        return None
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _joined(items: object) -> str:
    """A list as one ``;``-joined string: a cell of a CSV or parquet column, not an object."""
    if not isinstance(items, list):
        return ""
    return ";".join(str(i) for i in items if i is not None)


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))
