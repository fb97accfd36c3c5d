"""A running sweep as Prometheus series (``sweep run`` / ``--batch``, ``policy``, ``queue sweep``).

An event sink (``emit`` / ``close``) on the run's event bus, so it sees exactly what the
journal records: trials planned per cell (from the plan when the caller has it, else the run's
total under cell="all"), trials done / failed / errored per cell, and the current trial's
phase and elapsed time -- enough for a dashboard to draw progress and alert on a hung trial
(``aorta_sweep_current_trial_elapsed_seconds`` growing past the trial's timeout). Labels are
cell names and trial ids, which the recipe already makes public, scrubbed by the bundle's
rules all the same; never a path, a command line or an environment value.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from aorta_tui.metrics.labels import LabelSanitiser

PREFIX = "aorta_sweep"
VERDICTS = ("pass", "fail", "error")
PHASES = ("idle", "launching", "running")


class SweepMetrics:
    """A collector and an event sink of one run."""

    def __init__(self, *, planned: dict[str, int] | None = None, sanitise: LabelSanitiser | None = None) -> None:
        self._clean = sanitise or LabelSanitiser(distinct=True)  # cells never merge
        self._lock = threading.Lock()
        self._planned = dict(planned or {})
        self._total = sum(self._planned.values())
        self._source = ""
        self._already_done = 0
        self._finished: dict[tuple[str, str], int] = {}  # (cell, verdict) -> trials
        self._current: tuple[str, str, str, float] | None = None  # trial id, cell, phase, since
        self._running = 1  # served from before the run's first event: it is starting, not ended
        self._status = ""

    def emit(self, event: Any) -> None:
        kind = getattr(event, "kind", "")
        now = time.monotonic()
        with self._lock:
            if kind == "run_started":
                self._source, self._running = str(event.source), 1
                self._already_done = int(event.already_done)
                if not self._planned:
                    self._total = int(event.total)
            elif kind == "trial_launch":
                self._current = (event.trial_id, event.cell, "launching", now)
            elif kind == "trial_started":
                since = self._current[3] if self._current and self._current[0] == event.trial_id else now
                self._current = (event.trial_id, event.cell, "running", since)
            elif kind == "trial_finished":
                verdict = event.verdict if event.verdict in VERDICTS else "error"
                key = (str(event.cell), verdict)
                self._finished[key] = self._finished.get(key, 0) + 1
                self._current = None
            elif kind == "run_finished":
                self._running, self._status, self._current = 0, str(event.status), None

    def close(self) -> None:
        with self._lock:
            self._running, self._current = 0, None

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily

        clean = self._clean
        with self._lock:
            planned, total, finished = dict(self._planned), self._total, dict(self._finished)
            current, running, source = self._current, self._running, self._source
            already, status = self._already_done, self._status
        info = InfoMetricFamily(PREFIX, "the run: which engine (sweep, policy, queue_sweep) and how it ended",
                                labels=[])
        info.add_metric([], {"source": clean(source or "n/a"), "status": clean(status or "running")})
        yield info
        yield GaugeMetricFamily(f"{PREFIX}_running", "1 while the run goes on, 0 once it has ended", value=running)
        pl = GaugeMetricFamily(f"{PREFIX}_trials_planned", "trials the run plans per cell (cell=\"all\" when "
                               "the engine gives only the total)", labels=["cell"])
        for cell, n in sorted(planned.items()) or [("all", total)]:
            pl.add_metric([clean(cell)], n)
        yield pl
        yield GaugeMetricFamily(f"{PREFIX}_trials_already_done", "trials a resumed run found done before it "
                                "started (not counted in the counters below)", value=already)
        cells = sorted({c for c, _v in finished} | set(planned))
        names = {"pass": "passed", "fail": "failed", "error": "errored"}
        done = CounterMetricFamily(f"{PREFIX}_trials_done", "trials finished in this process, per cell, "
                                   "whatever their verdict", labels=["cell"])
        for cell in cells:
            done.add_metric([clean(cell)], sum(finished.get((cell, v), 0) for v in VERDICTS))
        yield done
        for verdict in VERDICTS:
            fam = CounterMetricFamily(f"{PREFIX}_trials_{names[verdict]}", f"trials finished with verdict "
                                      f"{verdict} (matrix.json's {verdict}), per cell", labels=["cell"])
            for cell in cells:
                fam.add_metric([clean(cell)], finished.get((cell, verdict), 0))
            yield fam
        cur = GaugeMetricFamily(f"{PREFIX}_current_trial_elapsed_seconds", "seconds since the current trial "
                                "was launched; absent between trials (alert when it passes the trial timeout)",
                                labels=["trial_id", "cell", "phase"])
        phase = GaugeMetricFamily(f"{PREFIX}_current_trial_phase", "the current trial's phase (1 on the phase "
                                  f"it is in: {', '.join(PHASES)})", labels=["phase"])
        now_phase = "idle"
        if current is not None:
            trial_id, cell, now_phase, since = current
            cur.add_metric([clean(trial_id), clean(cell), now_phase], time.monotonic() - since)
        for p in PHASES:
            phase.add_metric([p], 1 if p == now_phase else 0)
        yield cur
        yield phase
