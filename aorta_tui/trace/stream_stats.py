"""Streaming statistics over parsed batches: histograms, exact percentiles, rates, breakdowns.

Events mode keeps every value (int64) so percentiles are exact up to ``exact_limit`` values,
then falls back to the log-linear histogram (within 6.25 %); the result says which.
Aggregate mode receives bucket counts and exact counts from the kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from aorta_tui.trace.hdr import LogLinearHistogram, bucket_index
from aorta_tui.trace.metrics import Metric
from aorta_tui.trace.parser import Batch
from aorta_tui.trace.result_doc import Histogram, KeyFigures, KeySpread, MetricSummary

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
MAX_BREAKDOWN = 64


def _pct_name(q: float) -> str:
    return f"p{q:g}"


@dataclass
class KeyStats:
    count: int = 0
    total: int = 0
    max: int | None = None
    hist: LogLinearHistogram = field(default_factory=LogLinearHistogram)


class MetricStats:
    """Accumulates one metric's records (events mode) or kernel snapshots (aggregate mode)."""

    def __init__(self, metric: Metric, *, exact_limit: int = 20_000_000) -> None:
        self.metric = metric
        self.count = 0
        self.hist = LogLinearHistogram()
        self.exact_limit = exact_limit
        self._values: list[np.ndarray] = []
        self._kept = 0
        self.exact = True
        # a record's key, or its label's code; aggregate mode's string keys (``nl``/``suml``) as text
        self.by_key: dict[int | str, KeyStats] = {}
        self.by_pid: dict[int, int] = {}
        self._last_ts: dict[int, int] = {}
        self.first_ts: int | None = None
        self.last_ts: int | None = None
        self.value_sum = 0
        self._label_codes: dict[str, int] = {}
        self._label_names: dict[int, str] = {}  # the inverse, rebuilt when codes were added
        self.aggregate = False
        # (interval end ts, interval) -> mask of intervals to keep, or None for all: lets a caller
        # leave out intervals that span a known pause (the trace monitor's workload phases)
        self.interval_filter: Callable[[np.ndarray, np.ndarray], np.ndarray | None] | None = None

    # -- events mode ---------------------------------------------------------------------------
    def add(self, ts: np.ndarray, pid: np.ndarray, key: np.ndarray, value: np.ndarray,
            labels: tuple[np.ndarray, list[str]] | None) -> None:
        """``labels``: (code per record, names) as the parser gives them, or None (all ``-``)."""
        n = int(len(ts))
        if n == 0:
            return
        self.count += n
        lo, hi = int(ts.min()), int(ts.max())
        self.first_ts = lo if self.first_ts is None else min(self.first_ts, lo)
        self.last_ts = hi if self.last_ts is None else max(self.last_ts, hi)
        pids, pc = np.unique(pid, return_counts=True)
        for p, c in zip(pids.tolist(), pc.tolist(), strict=False):
            self.by_pid[p] = self.by_pid.get(p, 0) + c
        if self.metric.breakdown_by == "label":
            # strings become small integer codes once, so everything below is integer numpy
            codes = self._label_codes
            if labels is None:
                keys = np.full(n, codes.setdefault("-", len(codes)), dtype=np.int64)
            else:
                batch_codes, names = labels
                lut = np.array([codes.setdefault(nm, len(codes)) for nm in names], dtype=np.int64)
                keys = lut[batch_codes]
        else:
            keys = key
        measured = self._gaps(ts, keys) if self.metric.kind == "point" else (ts, keys, value)
        if self.metric.kind == "size":
            self.value_sum += int(value.sum())
        m_ts, m_keys, m_vals = measured
        self._record_values(m_vals)
        self._breakdown(keys, m_keys, m_vals)

    def _gaps(self, ts: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Interval between consecutive events on the same key, across batch boundaries."""
        order = np.lexsort((ts, keys))
        ks = keys[order]
        tss = ts[order]
        same = np.empty(len(ks), dtype=bool)
        same[0] = False
        same[1:] = ks[1:] == ks[:-1]
        gaps = np.empty(len(tss), dtype=np.int64)
        gaps[1:] = tss[1:] - tss[:-1]
        valid = same.copy()
        # first event of each key in this batch: gap to the last one seen before
        firsts = np.flatnonzero(~same)
        for i in firsts.tolist():
            k = int(ks[i])
            prev = self._last_ts.get(k)
            if prev is not None:
                gaps[i] = int(tss[i]) - prev
                valid[i] = True
        lasts = np.append(firsts[1:] - 1, len(ks) - 1)
        for i in lasts.tolist():
            self._last_ts[int(ks[i])] = int(tss[i])
        t, k, g = tss[valid], ks[valid], gaps[valid]
        keep = self.interval_filter(t, g) if self.interval_filter is not None else None
        return (t, k, g) if keep is None else (t[keep], k[keep], g[keep])

    def _record_values(self, values: np.ndarray) -> None:
        if len(values) == 0:
            return
        values = np.asarray(values, dtype=np.int64)
        self.hist.add_array(values)
        if self.exact and self._kept + len(values) <= self.exact_limit:
            self._values.append(values)
            self._kept += len(values)
        elif self.exact:
            self.exact = False
            self._values = []

    def _breakdown(self, all_keys: np.ndarray, keys: np.ndarray, values: np.ndarray) -> None:
        uk, counts = np.unique(all_keys, return_counts=True)
        for k, c in zip(uk.tolist(), counts.tolist(), strict=True):
            self.by_key.setdefault(k, KeyStats()).count += c
        if len(values) == 0:
            return
        values = np.asarray(values, dtype=np.int64)
        uk, inv = np.unique(keys, return_inverse=True)
        sums = np.bincount(inv, weights=values.astype(np.float64), minlength=len(uk))
        order = np.argsort(inv, kind="stable")
        firsts = np.searchsorted(inv[order], np.arange(len(uk)))
        maxes = np.maximum.reduceat(values[order], firsts)
        # one np.unique over (key, bucket) pairs gives every key's histogram
        pairs, pair_counts = np.unique(inv * 4096 + bucket_index(values), return_counts=True)
        per_key: dict[int, dict[int, int]] = {}
        for pk, pc in zip(pairs.tolist(), pair_counts.tolist(), strict=True):
            per_key.setdefault(pk >> 12, {})[pk & 4095] = pc
        for i, k in enumerate(uk.tolist()):
            ks = self.by_key.setdefault(k, KeyStats())
            ks.total += int(sums[i])
            mx = int(maxes[i])
            ks.max = mx if ks.max is None else max(ks.max, mx)
            ks.hist.add_bucket_counts(per_key.get(i, {}))
            ks.hist.max = ks.max

    # -- aggregate mode ------------------------------------------------------------------------
    def set_aggregate(self, *, sent: int, buckets: dict[int, int], per_key_count: dict[int | str, int],
                      per_key_sum: dict[int | str, int], maximum: int | None) -> None:
        """Kernel maps are cumulative, so each snapshot replaces the previous state."""
        self.aggregate = True
        self.count = sent
        self.hist.replace_bucket_counts(buckets)
        self.hist.max = maximum
        self.exact = False
        self.by_key = {}
        for k, c in per_key_count.items():
            ks = KeyStats(count=c, total=per_key_sum.get(k, 0))
            self.by_key[k] = ks
        if self.metric.kind == "size":
            self.value_sum = sum(per_key_sum.values())

    def key_text(self, k: int | str) -> str:
        """Key ``k`` as the result names it: a label's text, a stream or pointer in hex."""
        return _key_text(self._label_of(k), self.metric)

    def _label_of(self, k: int | str) -> int | str:
        """A label metric's code as its label's text; any other key as it is."""
        if self.metric.breakdown_by != "label" or isinstance(k, str):
            return k
        if len(self._label_names) != len(self._label_codes):
            self._label_names = {v: name for name, v in self._label_codes.items()}
        return self._label_names.get(k, str(k))

    # -- results -------------------------------------------------------------------------------
    def percentiles(self, exact_up_to: int | None = None) -> tuple[dict[str, float | None], str]:
        scale = 1000.0 if self.metric.unit == "us" else 1.0
        out: dict[str, float | None] = {}
        if self.exact and self._kept and (exact_up_to is None or self._kept <= exact_up_to):
            allv = np.concatenate(self._values)
            self._values = [allv]
            qs = np.percentile(allv, PERCENTILES, method="inverted_cdf")
            for q, v in zip(PERCENTILES, qs.tolist(), strict=False):
                out[_pct_name(q)] = v / scale
            out["max"] = float(allv.max()) / scale
            return out, "exact (every recorded value)"
        for q in PERCENTILES:
            v = self.hist.percentile(q)
            out[_pct_name(q)] = None if v is None else v / scale
        out["max"] = None if self.hist.max is None else self.hist.max / scale
        if self.hist.total == 0:
            return out, "no values"
        return out, "upper edge of the log-linear bucket (within 6.25 %)"

    def summary(self, wall_s: float | None, exact_up_to: int | None = None) -> MetricSummary:
        m = self.metric
        scale = 1000.0 if m.unit == "us" else 1.0
        pct, how = self.percentiles(exact_up_to)
        rate = (self.count / wall_s) if wall_s and wall_s > 0 else None
        keys = sorted(self.by_key.items(), key=lambda kv: -kv[1].count)[:MAX_BREAKDOWN]
        return MetricSummary(
            measures=m.measures, histogram_measures=m.histogram_measures, kind=m.kind, unit=m.unit,
            count=self.count, events_per_s=rate,
            histogram=Histogram(count=self.hist.total,
                                buckets=tuple((lo, hi, int(n)) for lo, hi, n in self.hist.buckets(scale)),
                                percentiles=pct, percentile_method=how),
            total_bytes=self.value_sum if m.kind == "size" else None,
            breakdown_by=m.label_name if m.breakdown_by == "label" else m.key_name,
            breakdown={self.key_text(k): self._key_figures(ks, scale) for k, ks in keys},
            breakdown_truncated=max(0, len(self.by_key) - MAX_BREAKDOWN),
            breakdown_reason=("aggregate mode: the kernel keeps a count and a sum per key, so "
                              "per-key max and p50 are null") if self.aggregate else None,
            per_pid={str(p): c for p, c in sorted(self.by_pid.items())},
        )

    def _key_figures(self, ks: KeyStats, scale: float) -> KeyFigures:
        """A key's count and, unless it is a point metric's key with no interval yet, its
        mean (over its histogrammed values; over its events in aggregate mode), max and p50."""
        if self.metric.kind == "point" and not ks.hist.total:
            return KeyFigures(count=ks.count, spread=None)
        hist_n = ks.hist.total or 0
        mean = (ks.total / hist_n / scale) if hist_n else (
            ks.total / ks.count / scale if ks.count and ks.total else None)
        p50 = ks.hist.percentile(50)
        return KeyFigures(count=ks.count, spread=KeySpread(
            mean=mean, max=None if ks.max is None else ks.max / scale,
            p50=None if p50 is None else p50 / scale))


def _key_text(k: int | str, m: Metric) -> str:
    if isinstance(k, str):
        return k
    if m.key_name in ("stream", "event", "pointer", "signal"):
        return hex(int(k) & 0xFFFFFFFFFFFFFFFF)
    return str(k)


def split_batch(batch: Batch, metric_ids: dict[int, MetricStats]) -> dict[int, int]:
    """Route a batch's records to their metric's stats; returns records per metric id."""
    out: dict[int, int] = {}
    if len(batch) == 0:
        return out
    mids = batch.metric
    uniq = np.unique(mids).tolist()
    for mid in uniq:
        st = metric_ids.get(mid)
        sel = mids == mid
        n = int(sel.sum())
        out[mid] = n
        if st is None:
            continue
        labels = None
        if batch.label_codes is not None and batch.label_names is not None:
            labels = (batch.label_codes if len(uniq) == 1 else batch.label_codes[sel], batch.label_names)
        if len(uniq) == 1:
            st.add(batch.ts, batch.pid, batch.key, batch.value, labels)
        else:
            st.add(batch.ts[sel], batch.pid[sel], batch.key[sel], batch.value[sel], labels)
    return out


__all__ = ["MetricStats", "split_batch", "bucket_index", "PERCENTILES"]
