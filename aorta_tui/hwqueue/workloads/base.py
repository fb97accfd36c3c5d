"""The queue-workload contract: what a workload declares and how it describes an iteration.

A workload never touches streams or events itself. ``setup`` allocates its tensors on the
device of each stream; ``iteration`` returns the launches of one iteration in issue order;
the harness issues each launch inside its stream and times it. Only ``setup`` and the launch
callables touch torch (imported inside them), so listing workloads stays cheap.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from aorta_tui.core.errors import UsageError
from aorta_tui.registry.workload import ConfigField, validate_config

if TYPE_CHECKING:  # torch is imported where a workload runs, not to list it
    # by name: in QueueWorkloadContext's body its field ``torch`` hides the module
    from torch import Tensor
    from torch import dtype as TorchDtype

DTYPES = ("float32", "float16", "bfloat16")


class LaunchCall(Protocol):
    """``Launch.fn``: called with no arguments. A protocol, not ``Callable[[], Any]``: a lambda
    that binds loop values as defaults (``lambda i=i: ...``) is a call with no required
    arguments, which mypy cannot infer against ``Callable[[], Any]``."""

    def __call__(self) -> object: ...


@dataclass(frozen=True)
class Launch:
    """One host call that issues work on one stream.

    ``waits`` lists indices of earlier launches *in the same iteration* whose completion this
    launch's stream must wait for (a cross-stream dependency, e.g. a pipeline stage).
    ``fn`` is called as is, with no arguments, inside the timed loop: launch-bound workloads
    bind it once (``functools.partial``, a bound method) so the call is all the host work a
    launch costs. ``kernels`` is how many device kernels one call issues, where the workload
    knows it (per-kernel costs; ``None``: not declared, the profiler's count is used).
    """

    stream: int
    label: str
    fn: LaunchCall
    waits: tuple[int, ...] = ()
    kernels: int | None = None


@dataclass
class QueueWorkloadContext:
    """What ``setup`` is given: torch, the dtype, and the device of every stream."""

    torch: ModuleType
    dtype: TorchDtype
    stream_devices: list[str]
    backend: str  # cuda, rocm or cpu
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def streams(self) -> int:
        return len(self.stream_devices)

    def device(self, stream: int) -> str:
        return self.stream_devices[stream % len(self.stream_devices)]

    def randn(self, *shape: int, stream: int = 0) -> Tensor:
        return self.torch.randn(*shape, dtype=self.dtype, device=self.device(stream))

    def zeros(self, *shape: int, stream: int = 0) -> Tensor:
        return self.torch.zeros(*shape, dtype=self.dtype, device=self.device(stream))


@dataclass(frozen=True)
class WorkloadInfo:
    name: str
    category: str
    description: str
    min_streams: int
    max_streams: int
    recommended_streams: int
    switch_latency_sensitivity: str
    throughput_unit: str
    defaults: dict[str, Any]
    tiny: dict[str, Any]
    # why --graph cannot capture it at its defaults (None: it can; see graph_unsupported_reason)
    graph_unsupported: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class QueueWorkload(ABC):
    """Base class: subclasses set the class attributes and implement the three methods."""

    name: ClassVar[str]
    category: ClassVar[str]  # distributed, inference, latency_sensitive, pipeline
    description: ClassVar[str]
    min_streams: ClassVar[int]
    max_streams: ClassVar[int]
    recommended_streams: ClassVar[int]
    switch_latency_sensitivity: ClassVar[str] = "medium"
    work_unit: ClassVar[str]  # what work_per_iteration counts: FLOP, token, sample, ...
    throughput_unit: ClassVar[str]  # e.g. TFLOP/s
    throughput_scale: ClassVar[float] = 1.0  # work units per throughput unit (1e12 for TFLOP)
    # the parameters (``--param KEY=VALUE``), declared and checked as a recipe workload's
    # ``workload_config`` is (registry/workload.py); ``defaults`` is derived from it
    config_schema: ClassVar[tuple[ConfigField, ...]]
    defaults: ClassVar[dict[str, Any]]
    tiny: ClassVar[dict[str, Any]]  # overrides that make it run in milliseconds on a CPU
    # True when streams never exchange tensors, so --devices may put them on different GPUs
    independent_streams: ClassVar[bool] = False
    # what the latency-critical streams run (``--stream-priority lc``); None: the workload has none
    latency_critical_role: ClassVar[str | None] = None
    # why ``--graph`` cannot capture an iteration of this workload (None: it can); a workload
    # whose answer depends on its parameters overrides ``graph_unsupported_reason``
    graph_unsupported: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "config_schema" in vars(cls):
            cls.defaults = {f.name: f.default for f in cls.config_schema}

    def __init__(self, params: Mapping[str, Any] | None = None, *, size: str = "default") -> None:
        if size not in ("default", "tiny"):
            raise UsageError(f"unknown size {size!r}", hint="use --size default or --size tiny")
        base = dict(self.tiny) if size == "tiny" else {}
        # strings are command-line text (``--param KEY=VALUE``): validate_config reads them as
        # a recipe's YAML would, so the two paths accept and reject the same values
        self.params: dict[str, Any] = validate_config(
            self.config_schema, {**base, **(params or {})}, path="--param",
            location=f"queue workload {self.name!r}", from_text=True)
        self.size = size

    @classmethod
    def info(cls) -> WorkloadInfo:
        return WorkloadInfo(
            name=cls.name,
            category=cls.category,
            description=cls.description,
            min_streams=cls.min_streams,
            max_streams=cls.max_streams,
            recommended_streams=cls.recommended_streams,
            switch_latency_sensitivity=cls.switch_latency_sensitivity,
            throughput_unit=cls.throughput_unit,
            defaults=dict(cls.defaults),
            tiny=dict(cls.tiny),
            graph_unsupported=cls(size="default").graph_unsupported_reason(),
        )

    def latency_critical_streams(self, streams: int) -> tuple[int, ...]:
        """Indices of the streams whose work is on the latency-critical path at ``streams``.

        ``--stream-priority lc`` gives these the highest stream priority and leaves the rest at
        the default. It depends on the stream count only (the streams are created after
        ``setup``) and must pick the same streams ``setup`` gives that role. The default, no
        latency-critical streams, makes the option a no-op that the result says it was.
        """
        return ()

    def graph_unsupported_reason(self) -> str | None:
        """Why an iteration cannot be captured as a CUDA/HIP graph with these parameters.

        Valid before ``setup`` (``QueueRunConfig.validate`` asks it without torch): stream
        capture forbids host synchronisation, shapes that change between iterations and
        collectives outside a captured communicator, so a workload with any of them says which.
        """
        return type(self).graph_unsupported

    @abstractmethod
    def setup(self, ctx: QueueWorkloadContext) -> None:
        """Allocate tensors and models; called once, outside the timed region."""

    @abstractmethod
    def iteration(self, index: int) -> list[Launch]:
        """The launches of iteration ``index``, in issue order."""

    @abstractmethod
    def work_per_iteration(self) -> float:
        """Work done by one iteration, in ``work_unit`` (valid after ``setup``)."""

    def throughput_unavailable(self) -> str | None:
        """Why this configuration has no throughput to report (valid after ``setup``).

        A run that did none of the work ``work_unit`` counts has no throughput: it is ``null``
        with this reason, never 0.0. Workloads whose counted work can be switched off by a
        parameter say which one.
        """
        if self.work_per_iteration() == 0:
            return f"the workload did no counted work ({self.work_unit} per iteration is 0)"
        return None

    def cleanup(self) -> None:
        """Drop references so device memory can be freed."""
        for key in list(vars(self)):
            if key not in ("params", "size"):
                delattr(self, key)


def gemm_flops(m: int, n: int, k: int) -> float:
    return 2.0 * m * n * k


def split_roles(streams: int, groups: int) -> list[list[int]]:
    """Split stream indices into ``groups`` contiguous, non-empty role groups.

    With fewer streams than groups, roles share streams (round-robin) so every role has one.
    """
    if streams >= groups:
        size, extra = divmod(streams, groups)
        out, start = [], 0
        for g in range(groups):
            n = size + (1 if g < extra else 0)
            out.append(list(range(start, start + n)))
            start += n
        return out
    return [[g % streams] for g in range(groups)]
