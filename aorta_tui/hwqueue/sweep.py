"""Stream sweeps: the same workload at several stream counts, with scaling analysis.

* scaling efficiency at N = (throughput(N) / throughput(N0)) / (N / N0), N0 the smallest count;
* peak = the stream count with the highest throughput;
* knee = the last stream count before the marginal gain of the next step falls below
  ``knee_gain`` (10% by default): adding streams past it buys little.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_tui.core.atomic import atomic_write_json
from aorta_tui.core.errors import AortaError, ExitCode, UsageError
from aorta_tui.core.events import Event, Measurement, Progress, ResultWritten
from aorta_tui.core.inputs import Json
from aorta_tui.core.numerals import ascii_digits
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.core.secrets import record_secret_hashes
from aorta_tui.hwqueue.failed_point_doc import FailedPointRecord
from aorta_tui.hwqueue.result import SCHEMA_VERSION, new_run_id
from aorta_tui.hwqueue.result_doc import (
    FailedPoint,
    QueueResult,
    QueueSweepDoc,
    SweepAnalysis,
    as_result,
)
from aorta_tui.hwqueue.sweep_request import (
    REQUEST_FILE,
    QueueSweepRequest,
    read_request,
)
from aorta_tui.store.run_store import StoreLayout
from aorta_tui.store.write_errors import output_write_error
from aorta_tui.trial.run_loop import RunOutcome, RunPlan, TrialEngine, run_planned

if TYPE_CHECKING:
    from aorta_tui.hwqueue.harness import QueueRunConfig
    from aorta_tui.hwqueue.repeat import PointLaunch


def parse_stream_counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--streams {text!r} is not a comma-separated list of integers",
                         hint="e.g. --streams 1,2,4,8,16,32,64") from None
    if not counts or any(c < 1 for c in counts):
        raise UsageError(f"--streams {text!r} needs positive counts", hint="e.g. --streams 1,2,4,8")
    return sorted(set(counts))


def check_counts(workload: str, counts: Sequence[int]) -> None:
    from aorta_tui.hwqueue.workloads import streams_out_of_range

    info, bad = streams_out_of_range(workload, counts)
    if bad:
        ok = [c for c in counts if c not in bad]
        raise UsageError(
            f"workload {workload!r} runs with {info.min_streams}..{info.max_streams} streams; "
            f"out of range: {', '.join(map(str, bad))}",
            hint=(f"use --streams {','.join(map(str, ok))}" if ok else
                  f"pick counts between {info.min_streams} and {info.max_streams}"),
        )


def scaling(points: Sequence[tuple[int, float | None]], knee_gain: float = 0.10) -> SweepAnalysis:
    """Scaling efficiency per point, peak and knee from (streams, throughput) pairs."""
    valid = [(n, t) for n, t in sorted(points) if t is not None and t > 0]
    if not valid:
        return SweepAnalysis(efficiency={}, peak_streams=None, peak_throughput=None,
                             knee_streams=None, reason="no point has a throughput")
    n0, t0 = valid[0]
    eff = {str(n): (t / t0) / (n / n0) for n, t in valid}
    peak_n, peak_t = max(valid, key=lambda p: p[1])
    knee = valid[-1][0]
    for (n_a, t_a), (_, t_b) in zip(valid, valid[1:], strict=False):
        if t_b / t_a - 1.0 < knee_gain:
            knee = n_a
            break
    return SweepAnalysis(efficiency=eff, peak_streams=peak_n, peak_throughput=peak_t,
                         knee_streams=knee, knee_gain=knee_gain)


def analyse(points: Sequence[tuple[int, float | None]], knee_gain: float = 0.10) -> dict[str, Json]:
    """:func:`scaling` as the sweep document's ``analysis`` holds it (its JSON form)."""
    return scaling(points, knee_gain).to_json()


# (QueueRunConfig, what[, repeat.PointLaunch in a run directory]) -> queue result (typed, or
# its JSON: read by the one reader)
Runner = Callable[..., QueueResult | dict[str, Any]]

# An isolated sweep's run directory (docs/hwqueue.md, "Run directory and resume"):
# request.json (what was asked), journal.jsonl, .lock, trials/s<NNNN>/result.json, sweep.json.
DOCUMENT_FILE = "sweep.json"
ISOLATED = "a fresh process per point"


def run_sweep(base: QueueRunConfig, counts: Sequence[int], on_event: Callable[[Event], None] | None = None,
              knee_gain: float = 0.10, output: str | os.PathLike[str] | None = None,
              isolate: bool = True, runner: Runner | None = None,
              run_dir: str | os.PathLike[str] | None = None) -> QueueSweepDoc:
    """Run ``base`` (a QueueRunConfig) at each stream count; returns the sweep document, typed
    (its :meth:`QueueSweepDoc.to_json` is what the file holds).

    ``isolate`` (default): every point is a fresh ``queue run`` process, so no state (CUDA
    context, allocator cache, a finished profiler session) carries from one point to the next,
    and a point that fails (say, out of memory at 64 streams) is recorded in ``failed_points``
    while the sweep goes on. Otherwise all points run in this process and a failure ends the
    sweep. With ``output`` the document is also written atomically and ``ResultWritten`` emitted.

    ``run_dir`` (isolated sweeps only): keep the sweep in that new run directory, through a
    ``RunStore`` (lock, fsynced journal, one result file per point), so that
    :func:`resume_sweep` runs only the points it lacks. ``on_event`` then also gets
    ``RunStarted`` first and ``RunFinished`` last (the document in ``summary["result"]``).
    """
    from aorta_tui.hwqueue.repeat import refuse_shared_trace, run_isolated
    from aorta_tui.hwqueue.run import run_queue

    refuse_shared_trace(base, "a sweep")
    check_counts(base.workload, counts)
    base.validate()
    if runner is None:  # said once, before any point runs (each point's process needs torch)
        from aorta_tui.core.requires import require_torch

        require_torch(f"a queue sweep of {base.workload}")
    if run_dir is not None and not isolate:
        raise UsageError("--in-process runs every point in this process and keeps no run "
                         "directory", hint="drop --run-dir, or drop --in-process")
    sweep_id = base.run_id or new_run_id()
    run: Runner = runner or (run_isolated if isolate else
                             (lambda cfg, _what: run_queue(cfg, on_event=on_event)))
    if run_dir is not None:
        base = dataclasses.replace(base, run_id=sweep_id)
        request = QueueSweepRequest.new(base, counts, knee_gain, output)
        _create_run_dir(Path(run_dir), request)
        return _StoreSweep(Path(run_dir), request, on_event, run, base).run(resumed=False)
    doc = _run_points(base, sweep_id, counts, run, isolate, on_event, knee_gain)
    if output is not None:
        _write_document(output, doc, on_event)
    return doc


def _run_points(base: QueueRunConfig, sweep_id: str, counts: Sequence[int], run: Runner, isolate: bool,
                on_event: Callable[[Event], None] | None, knee_gain: float) -> QueueSweepDoc:
    """A sweep kept in no run directory: each point in count order, then its document (or,
    when every point failed, the first failure raised)."""
    results: list[QueueResult] = []
    failed: list[FailedPoint] = []
    first_error: AortaError | None = None
    for k, n in enumerate(counts):
        cfg = dataclasses.replace(base, streams=n, run_id=f"{sweep_id}-s{n}")
        result, error = _measure(run, cfg, isolate, on_event)
        if error is not None:
            first_error = first_error or error
            failed.append(FailedPoint(n, error.render()))
        else:
            assert result is not None  # _measure returns a result or the error that ended it
            results.append(result)
        if on_event is not None:
            on_event(Progress(sweep_id, done=k + 1, total=len(counts),
                              message=f"{n} streams {'failed' if error else 'done'}"))
    if not results:
        assert first_error is not None
        raise first_error
    return build_sweep(sweep_id, counts, results, failed, knee_gain,
                       ISOLATED if isolate else "all points in one process")


def _measure(run: Runner, cfg: QueueRunConfig, isolate: bool,
             on_event: Callable[[Event], None] | None, point: PointLaunch | None = None) -> tuple[QueueResult, None] | tuple[None, AortaError]:
    """One point: its queue result, or (isolated) the error that ended it. ``point``: a run
    directory's point (``repeat.PointLaunch``), handed to the runner as its third argument."""
    n = cfg.streams
    try:
        what = f"the {n}-stream point"
        result = as_result(run(cfg, what) if point is None else run(cfg, what, point), what)
    except AortaError as exc:
        if not isolate:
            raise
        return None, exc
    if isolate and on_event is not None:  # the child's own events stayed in the child
        on_event(Measurement(cfg.run_id, source="queue", name=cfg.workload,
                             values=dict(result.summary.values), reasons=dict(result.unavailable)))
    return result, None


def build_sweep(sweep_id: str, counts: Sequence[int],
                points: Sequence[QueueResult | dict[str, Any]], failed: Sequence[FailedPoint],
                knee_gain: float, isolation: str) -> QueueSweepDoc:
    """The sweep document (``-o``, ``sweep.json``) from its points' results, in count order
    (a point still in its JSON form is read by the one reader first)."""
    results = tuple(as_result(p, f"points[{i}]") for i, p in enumerate(points))
    return QueueSweepDoc(
        run_id=sweep_id, workload=results[0].workload, emulated=results[0].emulated,
        platform=results[0].sections.get("platform"), stream_counts=tuple(counts),
        isolation=isolation, failed_points=tuple(failed),
        analysis=scaling([(r.config.streams, r.summary.value("throughput")) for r in results],
                         knee_gain),
        points=results)


def sweep_document(sweep_id: str, counts: Sequence[int],
                   points: Sequence[QueueResult | dict[str, Any]], failed: Sequence[FailedPoint],
                   knee_gain: float, isolation: str) -> dict[str, Json]:
    """:func:`build_sweep`'s document in its JSON form: what a straight run would have written
    (a caller holding the file's parsed JSON compares it with this)."""
    return build_sweep(sweep_id, counts, points, failed, knee_gain, isolation).to_json()


def _write_document(path: str | os.PathLike[str], doc: QueueSweepDoc,
                    on_event: Callable[[Event], None] | None) -> None:
    try:
        atomic_write_json(path, doc.to_json())
    except OSError as exc:
        raise output_write_error(exc, path) from None
    if on_event is not None:
        assert doc.run_id is not None  # a sweep this build ran is always named
        on_event(ResultWritten(doc.run_id, path=str(path), what="queue sweep"))


# -- the run directory -------------------------------------------------------------------------


def point_id(streams: int) -> str:
    """A point's trial id: ``s0008`` for 8 streams (sorts as the counts do)."""
    return f"s{streams:04d}"


def _point_streams(trial_id: str) -> int | None:
    digits = trial_id[1:]
    if not trial_id.startswith("s") or len(digits) != 4 or not ascii_digits(digits):
        return None
    return int(digits)


def _whole_point(data: dict[str, Any], trial_id: str) -> dict[str, Any] | None:
    """A point's ``result.json`` when it is whole and this point's: a queue result at its
    stream count, or the record of its failure. Anything else (damaged, another point's) is
    not a result, and the resume runs the point again."""
    n = _point_streams(trial_id)
    if n is None or data.get("schema_version") != SCHEMA_VERSION:
        return None
    if FailedPointRecord.is_one(data):
        try:  # the record's one reader; damaged, it is no result (the point runs again)
            record = FailedPointRecord.from_json(data, f"trials/{trial_id}/result.json")
        except UsageError:
            return None
        return data if record.streams == n else None
    try:  # the result's one reader; damaged, it is no result (the point runs again)
        result = QueueResult.from_json(data, trial_id)
    except AortaError:
        return None
    return data if result.config.streams == n else None


def _busy(run_dir: Path, holder: str) -> AortaError:
    from aorta_tui.core.errors import RunDirError

    return RunDirError(f"the queue sweep in {run_dir} is already being run by {holder}",
                       hint="wait for it to finish, or stop it first")


# trials/s<NNNN>/result.json, checked by _whole_point; the lock's refusal in this sweep's words
QUEUE_SWEEP_LAYOUT = StoreLayout(result_file="result.json", sweep_ids=False,
                                 accept=_whole_point, refusal=_busy, files=(DOCUMENT_FILE,))


def _request(base: QueueRunConfig, counts: Sequence[int], knee_gain: float,
             output: str | os.PathLike[str] | None) -> dict[str, Json]:
    """A new sweep's ``request.json`` in its JSON form (for a caller that edits it as a file
    would be edited: the tests that damage it)."""
    return QueueSweepRequest.new(base, counts, knee_gain, output).to_json()


def _create_run_dir(run_dir: Path, request: QueueSweepRequest) -> None:
    """A new run directory holding ``request.json`` and an empty journal (or refused)."""
    from aorta_tui.store.naming import JOURNAL

    if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
        raise UsageError(f"--run-dir {run_dir} already exists and is not an empty directory",
                         hint=f"choose a new --run-dir, or continue that sweep with "
                              f"`aorta-tui queue resume {run_dir}`")
    existed = run_dir.exists()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)  # under sudo the tool runs as the user: theirs
        with RunDirFS(run_dir) as fs:
            fs.atomic_write_json(REQUEST_FILE, request.to_json())
        (run_dir / JOURNAL).touch()
    except OSError as exc:  # a full disk or another user's directory: exit 3, named
        # Leave nothing half made, so the same --run-dir works once there is room.
        for made in (run_dir / JOURNAL, run_dir / REQUEST_FILE):
            with contextlib.suppress(OSError):
                made.unlink()
        if not existed:
            with contextlib.suppress(OSError):
                run_dir.rmdir()
        raise output_write_error(exc, run_dir, option="--run-dir") from None


def resume_sweep(run_dir: str | os.PathLike[str], on_event: Callable[[Event], None] | None = None,
                 output: str | os.PathLike[str] | None = None,
                 runner: Runner | None = None) -> QueueSweepDoc:
    """Finish the sweep of ``run_dir``: the points without a whole result and journal line run
    (each once, in count order), the others are kept; then the document is written again, and
    returned typed (as :func:`run_sweep`). ``output`` replaces the ``-o`` file the
    sweep was started with."""
    from aorta_tui.hwqueue.point_config import PointConfig
    from aorta_tui.hwqueue.repeat import run_isolated

    path = Path(run_dir)
    request = read_request(path)
    # the config's one reader (hwqueue/point_config.py): a damaged field is a located exit 2
    base = PointConfig.from_json(
        request.config, str(path / REQUEST_FILE), at="config", what="queue sweep request",
        hint="it was not written by this aorta-tui's `queue sweep`; start a new sweep").config()
    base.run_id = request.run_id
    check_counts(base.workload, request.stream_counts)
    base.validate()
    if output is not None:
        request = dataclasses.replace(request, output=os.path.abspath(output))
    return _StoreSweep(path, request, on_event, runner or run_isolated, base).run(resumed=True)


@dataclasses.dataclass
class QueueSweepOutcome(RunOutcome):
    document: QueueSweepDoc | None  # sweep.json's document; None when the sweep was stopped


class _StoreSweep(TrialEngine[int, QueueSweepOutcome]):
    """An isolated sweep on a :class:`RunStore`: the planner is the stream counts, the runner
    one fresh process per point; a point is done once its result and journal line are in."""

    def __init__(self, run_dir: Path, request: QueueSweepRequest,
                 on_event: Callable[[Event], None] | None, run: Runner,
                 base: QueueRunConfig) -> None:
        from aorta_tui.core.events import CallbackSink, EventBus
        from aorta_tui.store.run_store import RunStore

        self.run_dir = run_dir
        self.request = request
        self.base = base  # the request's config as a QueueRunConfig, its run id the sweep's
        self.sweep_id = request.run_id
        self.counts = list(request.stream_counts)
        self.run_fn = run
        self.store = RunStore(run_dir, QUEUE_SWEEP_LAYOUT)
        self.bus = EventBus([CallbackSink(on_event)] if on_event is not None else [])

    def run(self, *, resumed: bool) -> QueueSweepDoc:
        """The sweep's document."""
        ids = [point_id(n) for n in self.counts]
        doc = run_planned(self.store, self.bus, RunPlan(
            self.sweep_id, source="queue_sweep", trials=self.counts, trial_id=point_id, cells=ids,
            resumed=resumed, resume_command=f"aorta-tui queue resume {self.run_dir}"),
            self).document
        if doc is None:
            # A stop that is no exception: the run loop ends a plan early only when a
            # cancel event is set or a trial returns None, and this sweep passes no cancel and
            # its points always return. Were it ever to happen, the finished points stay for
            # `queue resume` and the caller hears it as the Ctrl-C it stands for (the untyped
            # code returned {}, which the table's reader then refused as a damaged document).
            raise KeyboardInterrupt
        return doc

    # -- the run loop's engine (trial/run_loop.py) ----------------------------------------------

    def announce(self) -> None:
        return None  # a queue sweep knows no warning before its first point

    def run_trial(self, trial: int) -> str:
        return self._point(trial, point_id(trial))

    def finish(self, status: str, exit_code: int) -> QueueSweepOutcome:
        if status != "completed":  # a Ctrl-C: the points so far stay for `queue resume`
            self._finished(status, exit_code, {"run_dir": str(self.run_dir)})
            return QueueSweepOutcome(self.run_dir, status, exit_code, None)
        return QueueSweepOutcome(self.run_dir, status, exit_code, self._document())

    def write_failed(self, problem: AortaError) -> None:
        self._finished("failed", int(problem.exit_code), {"error": problem.message})

    def _point(self, n: int, tid: str) -> str:
        from aorta_tui.core.events import TrialFinished, TrialStarted

        cfg = dataclasses.replace(self.base, streams=n, run_id=f"{self.sweep_id}-s{n}")
        from aorta_tui.core.events import TrialLaunch
        from aorta_tui.hwqueue.repeat import PointLaunch
        from aorta_tui.trial.orphans import mint

        trial_dir = self.store.fresh_trial_dir(tid)  # what an interrupted attempt left goes
        # its identity is in the journal before the process exists (trial/orphans.py)
        ident = mint(self.sweep_id)
        # keyed hashes of its secrets' values (the shell's, inherited), so a bundle
        # recognises them in its logs (core/secrets.py)
        record_secret_hashes(self.run_dir, {**os.environ, **ident.env})
        self.bus.emit(TrialLaunch(self.sweep_id, trial_id=tid, cell=tid, trial=1,
                                  identity=list(ident.digests)))
        self.store.check_journal()
        announced = False

        def on_start(pid: int) -> None:
            nonlocal announced
            announced = True
            self.bus.emit(TrialStarted(self.sweep_id, trial_id=tid, cell=tid, trial=1, pid=pid))

        t0 = time.monotonic()
        result, error = _measure(self.run_fn, cfg, True, self.bus.emit,
                                 PointLaunch(trial_dir, ident.env, on_start, run_dir=self.run_dir))
        if not announced:  # a runner that started no process of its own
            self.bus.emit(TrialStarted(self.sweep_id, trial_id=tid, cell=tid, trial=1))
        wall = time.monotonic() - t0
        if result is not None:
            record = result.to_json()
        else:
            assert error is not None  # _measure returns a result or the error that ended it
            record = FailedPointRecord.of(n, error).to_json()
        self.store.write_result(tid, record)  # the result first, then its journal line
        self.bus.emit(TrialFinished(
            self.sweep_id, trial_id=tid, cell=tid, trial=1,
            verdict="pass" if error is None else "error",
            exit_code=0 if error is None else int(error.exit_code), wall_s=wall,
            reason="" if error is None else error.render(), trial_dir=str(trial_dir)))
        self.store.check_journal()  # a point is done only once the journal says so
        return f"{n} streams {'done' if error is None else 'failed'}"

    def _document(self) -> QueueSweepDoc:
        results: list[QueueResult] = []
        failed: list[FailedPointRecord] = []
        for n in self.counts:
            tid = point_id(n)
            data = self.store.read_result(tid)
            assert data is not None  # every point ran or was found done, under the lock
            if FailedPointRecord.is_one(data):  # _whole_point read it whole: it reads again
                failed.append(FailedPointRecord.from_json(data, f"trials/{tid}/result.json"))
            else:  # _whole_point accepted it: a run result at this stream count
                results.append(QueueResult.from_json(data, tid))
        if not results:  # every point failed: the sweep fails as its first point did
            error = AortaError(failed[0].reason, exit_code=_exit_code(failed[0].exit_code))
            self._finished("failed", int(error.exit_code), {"error": error.message})
            raise error
        doc = build_sweep(self.sweep_id, self.counts, results, [f.failed_point() for f in failed],
                          float(self.request.knee_gain), ISOLATED)
        _write_document(self.run_dir / DOCUMENT_FILE, doc, self.bus.emit)
        if self.request.output:
            _write_document(self.request.output, doc, self.bus.emit)
        self._finished("completed", 0, {"run_dir": str(self.run_dir), "result": doc.to_json()})
        return doc

    def _finished(self, status: str, exit_code: int, summary: dict[str, Any]) -> None:
        from aorta_tui.core.events import RunFinished

        self.bus.emit(RunFinished(self.sweep_id, status=status, exit_code=exit_code,
                                  summary=summary))
        self.store.close_journal()


def _exit_code(value: int | None) -> ExitCode:
    """A failed point's exit status as the sweep's; none written, or not one of the tool's
    statuses: INTERNAL, as before the record was typed."""
    try:
        return ExitCode.INTERNAL if value is None else ExitCode(value)
    except ValueError:
        return ExitCode.INTERNAL
