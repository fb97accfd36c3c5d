"""``race``: a collective/runtime race reproducer with known values and a verifier.

Every iteration writes known values (a function of buffer, rank, iteration and element) into
pinned host buffers, copies them to the device on an ``h2d`` stream, runs the mode's
collectives on a ``comm`` stream and the consumer arithmetic on a ``compute`` stream, with an
event wait for every dependency. A verifier on a fourth stream waits for all of them and
compares every buffer with the values it must hold; any difference is a ``corruption`` failure
naming the iteration, the buffer and the first wrong element.

Modes (what the comm stream does):

* ``default``: ``all_to_all_single`` of one buffer and ``all_reduce`` of another.
* ``ddp``: ``all_reduce`` of four gradient buckets, launched back to back as DDP's reducer does.
* ``fsdp``: ``all_gather_into_tensor`` of a parameter shard, compute on the gathered
  parameters, then ``reduce_scatter_tensor`` of the resulting gradients (a second dependency,
  compute -> comm).

``drop_wait`` removes one wait (fault injection, off by default): ``h2d`` (the collective
does not wait for the copy), ``comm`` (compute does not wait for the collective) or
``compute`` (in fsdp the reduce-scatter, elsewhere the verifier, does not wait for compute).
On a GPU the result depends on timing (``producer_delay_us`` makes that producer late); on CPU
the streams are emulated consumers-first, so a dropped wait always corrupts (see
``aorta_tui/workloads/_streams.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from aorta_tui.core.workload import (
    ConfigField,
    Failure,
    LaunchSpec,
    Workload,
    WorkloadContext,
    WorkloadResult,
)
from aorta_tui.workloads._common import device_field, dtype_field, world_size_field

DROPPABLE = ("none", "h2d", "comm", "compute")
MAX_FAILURES = 20  # corrupted_iterations counts the rest
VALUE_RANGE = 15  # known values are 1..15: sums over 8 ranks stay exact in bfloat16


class Race(Workload):
    name: ClassVar[str] = "race"
    description: ClassVar[str] = (
        "known values through H2D copies, collectives and compute on three streams; every "
        "buffer verified every iteration (modes default, ddp, fsdp)"
    )
    launch: ClassVar[LaunchSpec] = LaunchSpec(mode="torchrun", min_world_size=1)
    hint: ClassVar[str] = (
        "corrupted buffers: a missing stream dependency or a collective/runtime bug; compare "
        "cells with hip_launch_blocking / cuda_launch_blocking, gpu_max_hw_queues_2, "
        "nccl_launch_order_implicit"
    )
    config_schema: ClassVar[tuple[ConfigField, ...]] = (
        ConfigField("mode", "str", "default", choices=("default", "ddp", "fsdp")),
        ConfigField("warmup_iterations", "int", 2, "iterations before the timed ones (also "
                    "verified)", min=0),
        ConfigField("verify_iterations", "int", None,
                    "timed, verified iterations; unset = the trial's steps", min=1),
        ConfigField("stop_on_first_corruption", "bool", True,
                    "end the trial at the first corrupted iteration (else count them all)"),
        ConfigField("alltoall_tensor_size", "int", 4096, "elements (default mode)", min=1),
        ConfigField("allreduce_tensor_size", "int", 4096, "elements (default and ddp modes)",
                    min=4),
        ConfigField("fsdp_shard_size", "int", 4096, "elements per rank (fsdp mode)", min=1),
        dtype_field("bfloat16", "dtype of every buffer (the known values are exact in each)"),
        ConfigField("simulate_compute", "bool", False,
                    "extra GEMMs on the compute stream (busier device, wider race windows)"),
        ConfigField("gemm_size", "int", 256, "GEMM side for simulate_compute", min=1),
        ConfigField("gemm_layers", "int", 2, "GEMMs per iteration for simulate_compute", min=1),
        ConfigField("pin_memory", "bool", True, "pinned host buffers (asynchronous H2D on GPUs)"),
        ConfigField("producer_delay_us", "int", 0,
                    "GPU only: spin the stream that produces the dependency drop_wait names (the "
                    "h2d stream when none) this long before its work each iteration", min=0),
        device_field(),
        world_size_field(),
        ConfigField("drop_wait", "str", "none",
                    "fault injection: remove one stream wait (h2d, comm or compute); off by "
                    "default", choices=DROPPABLE),
    )

    def setup(self, ctx: WorkloadContext) -> None:
        from aorta_tui.workloads._common import pick_device, torch_dtype
        from aorta_tui.workloads._dist import init_distributed
        from aorta_tui.workloads.switches import apply_switches

        self.applied = apply_switches(ctx.switches)
        cfg = ctx.config
        self.dev = pick_device(cfg["device"], ctx.local_rank)
        self.dist = init_distributed(ctx.rank, ctx.world_size, self.dev.device, ctx.trial_dir)
        self.rank, self.world = self.dist.rank, self.dist.world_size
        self.dtype = torch_dtype(cfg["dtype"])
        if self.dev.is_gpu:
            from aorta_tui.workloads._streams import GpuStreams

            self.streams: Any = GpuStreams(self.dev.device)
        else:
            from aorta_tui.workloads._streams import EmulatedStreams

            self.streams = EmulatedStreams()
        self.plan = _PLANS[cfg["mode"]](self, cfg)

    # -- known values --------------------------------------------------------------------
    def known(self, tag: int, rank: int, it: int, n: int, offset: int = 0,
              device: Any = None) -> Any:
        import torch

        idx = torch.arange(offset, offset + n, device=device or self.dev.device)
        v = (idx * 7 + it * 13 + rank * 29 + tag * 3) % VALUE_RANGE + 1
        return v.to(self.dtype)

    def alloc(self, n: int) -> Any:
        import torch

        # poison: no iteration's known values are negative
        return torch.full((n,), -1.0, dtype=self.dtype, device=self.dev.device)

    def host(self, n: int, pin: bool) -> Any:
        import torch

        pin = pin and self.dev.is_gpu
        return torch.empty(n, dtype=self.dtype, pin_memory=pin)

    # -- the loop ------------------------------------------------------------------------
    def run(self, ctx: WorkloadContext) -> WorkloadResult:
        import torch

        from aorta_tui.core.stats import percentile_ms
        from aorta_tui.workloads._common import StepTimer

        cfg = ctx.config
        warm = cfg["warmup_iterations"]
        measured = cfg["verify_iterations"] or ctx.steps
        result = WorkloadResult(device=self.dev.label, applied_switches=list(self.applied),
                                emulated=not self.dev.is_gpu)
        if not self.dev.is_gpu:
            result.notes.append("CPU: streams emulated, most downstream first (a missing wait "
                                "lets the consumer run before its producer)")
            if cfg["producer_delay_us"]:
                result.notes.append("producer_delay_us has no effect on CPU")
        checks = self.plan.checks()
        report = torch.zeros(len(checks), 4, dtype=torch.float64, device=self.dev.device)
        corrupted_iterations = 0
        verified = 0
        for it in range(1, warm + measured + 1):
            with StepTimer(self.dev.device) as timer:
                # the expected values first, so that once its waits are met the verifier reads
                # the buffers at once (a late read would hide a missing wait on a GPU)
                expected: list[Any] = []
                self.streams.submit("verify", lambda it=it, out=expected: out.extend(
                    fn(it) for _name, _buf, fn in checks))
                events = self.plan.enqueue(it, cfg["drop_wait"])
                for name, ev in events.items():
                    if not (cfg["drop_wait"] == "compute" and name == "compute"
                            and self.plan.verifier_waits_compute):
                        self.streams.wait("verify", ev)
                self.streams.submit("verify",
                                    lambda exp=expected: _verify(checks, exp, report))
                self.streams.finish()
                rows = report.cpu().tolist()  # synchronises with the verifier
            verified += 1
            found = [(checks[i][0], r) for i, r in enumerate(rows) if r[0] > 0]
            for name, (count, first, got, expected) in found:
                if len(result.failures) < MAX_FAILURES:
                    result.failures.append(self._corruption(it, name, count, first, got,
                                                            expected, checks, cfg["drop_wait"]))
            if found:
                corrupted_iterations += 1
            if it > warm:
                result.step_times_s.append(timer.seconds)
                if ctx.on_step:
                    ctx.on_step(it - warm, timer.seconds)
            if found and cfg["stop_on_first_corruption"]:
                break
        result.metrics.update({
            "mode": cfg["mode"], "iterations_verified": verified,
            "corrupted_iterations": corrupted_iterations,
            "buffers_verified_per_iteration": [c[0] for c in checks],
            "elements_verified_per_iteration": sum(c[1].numel() for c in checks),
            "iteration_ms_p50": percentile_ms(result.step_times_s, 50),
            "iteration_ms_p99": percentile_ms(result.step_times_s, 99),
            "drop_wait": cfg["drop_wait"], "streams": "gpu" if self.dev.is_gpu else "emulated",
            "backend": self.dist.backend, "world_size": self.world,
            "timing": "host wall time per timed iteration: enqueue, the streams, and the "
                      "verification of every buffer, ended by a device synchronize",
        })
        if not result.step_times_s:
            result.metrics["iteration_ms_reason"] = (
                f"no timed iteration: the trial stopped at a corruption within the "
                f"{warm} warmup iterations")
        return result

    def _corruption(self, it: int, name: str, count: float, first: float, got: float,
                    expected: float, checks: list[Any], drop: str) -> Failure:
        n = next(c[1].numel() for c in checks if c[0] == name)
        why = f" (injected fault: drop_wait={drop})" if drop != "none" else ""
        return Failure(
            "corruption",
            f"iteration {it} on rank {self.rank}: buffer {name} element {int(first)} is {got:g}, "
            f"expected {expected:g} ({int(count)} of {n} elements wrong){why}",
            {"iteration": it, "rank": self.rank, "buffer": name, "first_wrong_index": int(first),
             "got": got, "expected": expected, "wrong_elements": int(count), "elements": n,
             "injected": drop != "none"},
        )

    def cleanup(self, ctx: WorkloadContext) -> None:
        handle = getattr(self, "dist", None)
        if handle is not None:
            if self.dev.is_gpu:
                import torch

                torch.cuda.synchronize(self.dev.device)
            handle.close()


def _verify(checks: list[tuple[str, Any, Callable[[int], Any]]], expected: list[Any],
            report: Any) -> None:
    """On the verify stream: count wrong elements and record the first one, per buffer."""
    import torch

    for row, ((_name, buf, _fn), exp) in enumerate(zip(checks, expected, strict=True)):
        bad = buf.ne(exp)
        first = bad.to(torch.int32).argmax().reshape(1)
        report[row, 0] = bad.sum()
        report[row, 1] = first[0]
        report[row, 2] = buf.index_select(0, first)[0]
        report[row, 3] = exp.index_select(0, first)[0]


class _Plan:
    """One mode's buffers, its work per iteration and what every buffer must hold."""

    verifier_waits_compute = True

    def __init__(self, race: Race, cfg: dict[str, Any]) -> None:
        self.r = race
        self.cfg = cfg
        self.gemm: Any = None
        if cfg["simulate_compute"]:
            import torch

            g = torch.Generator().manual_seed(0)
            n = cfg["gemm_size"]
            self.gemm = (torch.randn(n, n, generator=g) / n ** 0.5).to(race.dev.device, race.dtype)

    def simulate(self) -> None:
        if self.gemm is not None:
            x = self.gemm
            for _ in range(self.cfg["gemm_layers"]):
                x = x @ self.gemm

    def delay(self, stream: str) -> None:
        """Make the producer of the dropped dependency late (GPU; a no-op when emulated)."""
        target = self.cfg["drop_wait"] if self.cfg["drop_wait"] != "none" else "h2d"
        if stream == target:
            self.r.streams.delay(stream, self.cfg["producer_delay_us"])

    def h2d(self, pairs: list[tuple[Any, Any]]) -> Any:
        """Copy this iteration's host buffers to the device on the h2d stream."""
        s = self.r.streams
        self.delay("h2d")

        def copy() -> None:
            for dev, host in pairs:
                dev.copy_(host, non_blocking=True)

        s.submit("h2d", copy)
        return s.record("h2d")

    def checks(self) -> list[tuple[str, Any, Callable[[int], Any]]]:
        raise NotImplementedError

    def enqueue(self, it: int, drop: str) -> dict[str, Any]:
        raise NotImplementedError


class _DefaultPlan(_Plan):
    def __init__(self, race: Race, cfg: dict[str, Any]) -> None:
        super().__init__(race, cfg)
        w = race.world
        self.chunk = max(cfg["alltoall_tensor_size"] // w, 1)
        n_a, n_r = self.chunk * w, cfg["allreduce_tensor_size"]
        pin = cfg["pin_memory"]
        self.host_a, self.host_r = race.host(n_a, pin), race.host(n_r, pin)
        self.a_in, self.a_out = race.alloc(n_a), race.alloc(n_a)
        self.reduced, self.out = race.alloc(n_r), race.alloc(n_a)

    def enqueue(self, it: int, drop: str) -> dict[str, Any]:
        import torch.distributed as dist

        r, s = self.r, self.r.streams
        self.host_a.copy_(r.known(1, r.rank, it, self.host_a.numel(), device="cpu"))
        self.host_r.copy_(r.known(2, r.rank, it, self.host_r.numel(), device="cpu"))
        ev_h2d = self.h2d([(self.a_in, self.host_a), (self.reduced, self.host_r)])
        if drop != "h2d":
            s.wait("comm", ev_h2d)

        def collectives() -> None:
            dist.all_to_all_single(self.a_out, self.a_in)
            dist.all_reduce(self.reduced)

        self.delay("comm")
        s.submit("comm", collectives)
        ev_comm = s.record("comm")
        if drop != "comm":
            s.wait("compute", ev_comm)

        def compute() -> None:
            self.simulate()
            self.out.copy_(self.a_out).mul_(2).add_(1)

        self.delay("compute")
        s.submit("compute", compute)
        return {"h2d": ev_h2d, "comm": ev_comm, "compute": s.record("compute")}

    def checks(self) -> list[tuple[str, Any, Callable[[int], Any]]]:
        import torch

        r, c = self.r, self.chunk

        def a_out(it: int) -> Any:
            return torch.cat([r.known(1, j, it, c, offset=r.rank * c) for j in range(r.world)])

        return [
            ("a2a_input", self.a_in, lambda it: r.known(1, r.rank, it, self.a_in.numel())),
            ("a2a_output", self.a_out, a_out),
            ("allreduce", self.reduced,
             lambda it: sum(r.known(2, j, it, self.reduced.numel()) for j in range(r.world))),
            ("compute_output", self.out, lambda it: a_out(it) * 2 + 1),
        ]


class _DdpPlan(_Plan):
    BUCKETS = 4

    def __init__(self, race: Race, cfg: dict[str, Any]) -> None:
        super().__init__(race, cfg)
        n = cfg["allreduce_tensor_size"] // self.BUCKETS
        pin = cfg["pin_memory"]
        self.hosts = [race.host(n, pin) for _ in range(self.BUCKETS)]
        self.grads = [race.alloc(n) for _ in range(self.BUCKETS)]
        self.outs = [race.alloc(n) for _ in range(self.BUCKETS)]

    def enqueue(self, it: int, drop: str) -> dict[str, Any]:
        import torch.distributed as dist

        r, s = self.r, self.r.streams
        for b, h in enumerate(self.hosts):
            h.copy_(r.known(10 + b, r.rank, it, h.numel(), device="cpu"))
        ev_h2d = self.h2d(list(zip(self.grads, self.hosts, strict=False)))
        if drop != "h2d":
            s.wait("comm", ev_h2d)

        def buckets() -> None:
            works = [dist.all_reduce(g, async_op=True) for g in self.grads]
            for w in works:
                w.wait()

        self.delay("comm")
        s.submit("comm", buckets)
        ev_comm = s.record("comm")
        if drop != "comm":
            s.wait("compute", ev_comm)

        def update() -> None:
            self.simulate()
            for g, o in zip(self.grads, self.outs, strict=False):
                o.copy_(g).mul_(2).add_(1)

        self.delay("compute")
        s.submit("compute", update)
        return {"h2d": ev_h2d, "comm": ev_comm, "compute": s.record("compute")}

    def checks(self) -> list[tuple[str, Any, Callable[[int], Any]]]:
        r = self.r
        out = []
        for b, (g, o) in enumerate(zip(self.grads, self.outs, strict=False)):
            def summed(it: int, b: int = b, n: int = g.numel()) -> Any:
                return sum(r.known(10 + b, j, it, n) for j in range(r.world))

            out.append((f"bucket{b}", g, summed))
            out.append((f"bucket{b}_update", o, lambda it, f=summed: f(it) * 2 + 1))
        return out


class _FsdpPlan(_Plan):
    verifier_waits_compute = False  # in fsdp, drop_wait=compute drops the reduce-scatter's wait

    def __init__(self, race: Race, cfg: dict[str, Any]) -> None:
        super().__init__(race, cfg)
        n, w = cfg["fsdp_shard_size"], race.world
        self.host = race.host(n, cfg["pin_memory"])
        self.shard = race.alloc(n)
        self.full = race.alloc(n * w)
        self.grads = race.alloc(n * w)
        self.grad_shard = race.alloc(n)

    def enqueue(self, it: int, drop: str) -> dict[str, Any]:
        import torch.distributed as dist

        r, s = self.r, self.r.streams
        self.host.copy_(r.known(20, r.rank, it, self.host.numel(), device="cpu"))
        ev_h2d = self.h2d([(self.shard, self.host)])
        if drop != "h2d":
            s.wait("comm", ev_h2d)
        # newer torch renames these; older (e.g. 2.11) only has the *_tensor spelling
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        self.delay("comm")
        s.submit("comm", lambda: gather(self.full, self.shard))
        ev_gather = s.record("comm")
        if drop != "comm":
            s.wait("compute", ev_gather)

        def backward() -> None:
            self.simulate()
            self.grads.copy_(self.full).mul_(2).add_(1)

        self.delay("compute")
        s.submit("compute", backward)
        ev_compute = s.record("compute")
        if drop != "compute":
            s.wait("comm", ev_compute)
        s.submit("comm", lambda: scatter(self.grad_shard, self.grads))
        ev_scatter = s.record("comm")
        return {"h2d": ev_h2d, "comm": ev_scatter, "compute": ev_compute}

    def checks(self) -> list[tuple[str, Any, Callable[[int], Any]]]:
        import torch

        r = self.r
        n = self.shard.numel()

        def full(it: int) -> Any:
            return torch.cat([r.known(20, j, it, n) for j in range(r.world)])

        return [
            ("param_shard", self.shard, lambda it: r.known(20, r.rank, it, n)),
            ("gathered_params", self.full, full),
            ("grads", self.grads, lambda it: full(it) * 2 + 1),
            ("grad_shard", self.grad_shard,
             lambda it: (r.known(20, r.rank, it, n) * 2 + 1) * r.world),
        ]


_PLANS: dict[str, type[_Plan]] = {"default": _DefaultPlan, "ddp": _DdpPlan, "fsdp": _FsdpPlan}
