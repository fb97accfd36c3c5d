"""What a probe set measures: one :class:`Metric` per record stream a program emits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricKind = Literal["duration", "point", "size", "count"]


@dataclass(frozen=True)
class Metric:
    """One stream of records.

    ``kind``: ``duration`` (value is a latency in ns: histogram of it), ``point`` (an
    occurrence: counted, and in events mode the gap between consecutive events on the same key
    is histogrammed), ``size`` (value is a byte count: histogram of sizes, total bytes).
    ``measures`` is the sentence printed beside every histogram of this metric.
    ``key_name`` says what the numeric key is (stream handle, ioctl cmd, job id...);
    ``breakdown_by`` is ``key`` or ``label`` (e.g. a ring name).
    ``probe_hits`` is how many probe firings produce one record (observer-cost estimate).
    """

    name: str
    kind: MetricKind
    measures: str
    key_name: str = "key"
    breakdown_by: Literal["key", "label"] = "key"
    label_name: str = ""
    # cupti / rocprofiler: from the device collector's records, not from a probe hit
    probe_type: Literal["uprobe", "tracepoint", "cupti", "rocprofiler"] = "uprobe"
    probe_hits: int = 1
    aux_name: str = ""

    @property
    def unit(self) -> str:
        return {"size": "bytes", "count": "kernels"}.get(self.kind, "us")

    @property
    def histogram_measures(self) -> str:
        if self.kind == "point":
            return (
                f"interval between consecutive events on the same {self.key_name} "
                f"({self.measures})"
            )
        return self.measures
