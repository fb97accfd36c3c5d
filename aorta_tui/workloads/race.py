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
from typing import TYPE_CHECKING, Any, ClassVar

from aorta_tui.core.numerals import ascii_digits
from aorta_tui.registry.workload import (
    ConfigField,
    Failure,
    LaunchSpec,
    Workload,
    WorkloadContext,
    WorkloadResult,
)
from aorta_tui.workloads._common import device_field, dtype_field, world_size_field

if TYPE_CHECKING:
    import torch

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
    # its ddp mode steps an optimizer, and torch.optim's step imports torch._dynamo
    preload: ClassVar[tuple[str, ...]] = (
        "torch.optim", "torch._dynamo", "torch.distributed", "aorta_tui.workloads._common",
        "aorta_tui.workloads._dist",
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
        # upstream AORTA's race fields (aorta.race.config.ReproducerConfig, docs/compat.md)
        ConfigField("log_interval", "int", 0, "a progress line on stdout every N iterations "
                    "(0: none)", min=0),
        ConfigField("h2d_tensor_size", "int", 0, "elements of an extra H2D payload copied on "
                    "the h2d stream and verified every iteration (0: none)", min=0),
        ConfigField("compute_type", "str", "gemm", "simulate_compute's work: GEMMs or "
                    "transformer encoder layers", choices=("gemm", "transformer")),
        ConfigField("model_dim", "int", 256, "transformer: d_model", min=1),
        ConfigField("num_layers", "int", 2, "transformer: encoder layers", min=1),
        ConfigField("num_heads", "int", 0, "transformer: heads (0: model_dim // 128, at least "
                    "1); must divide model_dim", min=0),
        ConfigField("ffn_size", "int", 0, "transformer: FFN size (0: 4 * model_dim)", min=0),
        ConfigField("seq_len", "int", 64, "transformer: sequence length of the input", min=1),
        ConfigField("batch_size", "int", 1, "transformer: batch of the input", min=1),
        ConfigField("include_backward_compute", "bool", False, "also a backward pass (gemm: "
                    "twice the GEMMs; transformer: the forward again, or real autograd with "
                    "real_backward)"),
        ConfigField("real_backward", "bool", False, "transformer: a real autograd backward "
                    "(grad-enabled forward + loss.backward) instead of the forward-rerun proxy"),
        ConfigField("shared_layer_weights", "bool", False, "transformer: one block for every "
                    "layer on the same input, so every layer's output must be identical "
                    "(a differing layer is a layer_checksum corruption)"),
        ConfigField("optimizer", "str", "none", "with real_backward: an optimizer step per "
                    "iteration", choices=("none", "adamw", "sgd")),
        ConfigField("optimizer_lr", "float", 1e-4, "optimizer learning rate", min=0),
        ConfigField("optimizer_weight_decay", "float", 0.01, "optimizer weight decay", min=0),
        ConfigField("optimizer_betas", "list", [0.9, 0.999], "adamw betas"),
        ConfigField("optimizer_eps", "float", 1e-8, "adamw epsilon", min=0),
        ConfigField("deterministic", "bool", False, "torch deterministic algorithms, and the "
                    "compute model seeded with deterministic_seed"),
        ConfigField("deterministic_seed", "int", 42, "seed of the compute model with "
                    "deterministic", min=0),
        ConfigField("ddp_bucketed", "bool", False, "ddp: the bucket all_reduces launched "
                    "asynchronously back to back (else one after another, each waited)"),
        ConfigField("reuse_buffers", "bool", True, "false: fresh device buffers every "
                    "iteration (not in fsdp mode, as upstream)"),
        ConfigField("h2d_prefetch", "bool", False, "the next iteration's payload copied while "
                    "this one computes (double buffered; with h2d_tensor_size)"),
        ConfigField("same_stream_mode", "bool", False, "H2D and the collectives on one stream "
                    "(not in fsdp mode, as upstream)"),
        ConfigField("gpu_max_hw_queues", "int", None, "GPU_MAX_HW_QUEUES (ROCm); read by HIP "
                    "at start-up, so it is set by the gpu_max_hw_queues_N mitigations here",
                    min=1),
        ConfigField("expected_local_world_size", "int", None, "ranks per host the recipe "
                    "expects; a mismatch is a note, not an error (as upstream)", min=1),
    )

    @classmethod
    def config_problems(cls, cfg: dict[str, Any]) -> list[tuple[str, str, str]]:
        """(key, problem, fix) for combinations upstream refuses too."""
        out = []
        if cfg.get("mode") == "fsdp" and cfg.get("reuse_buffers") is False:
            out.append(("reuse_buffers", "race fsdp mode does not implement reuse_buffers=false",
                        "remove the key (upstream refuses it too)"))
        if cfg.get("mode") == "fsdp" and cfg.get("same_stream_mode"):
            out.append(("same_stream_mode", "race fsdp mode does not implement "
                        "same_stream_mode=true", "remove the key (upstream refuses it too)"))
        dim, heads = cfg.get("model_dim", 256), cfg.get("num_heads", 0)
        if cfg.get("compute_type") == "transformer" and heads and dim % heads:
            out.append(("num_heads", f"num_heads {heads} does not divide model_dim {dim}",
                        "pick a divisor of model_dim, or 0 for model_dim // 128"))
        betas = cfg.get("optimizer_betas", [0.9, 0.999])
        if not (isinstance(betas, list) and len(betas) == 2 and all(
                isinstance(b, (int, float)) and not isinstance(b, bool) and 0 <= b < 1
                for b in betas)):
            out.append(("optimizer_betas", f"optimizer_betas must be two numbers in [0, 1), got "
                        f"{betas!r}", "write [0.9, 0.999]"))
        return out

    @classmethod
    def config_notes(cls, cfg: dict[str, Any]) -> list[tuple[str, str]]:
        """(key, note) for settings that do less here than their name says, and why."""
        out = []
        transformer = cfg.get("compute_type") == "transformer"
        if not cfg.get("simulate_compute", False) and (
                transformer or cfg.get("include_backward_compute")):
            out.append(("simulate_compute", "compute_type/include_backward_compute only shape "
                        "simulate_compute's work, which is off (upstream's default is on)"))
        if not transformer:
            for key in ("shared_layer_weights", "real_backward"):
                if cfg.get(key):
                    out.append((key, f"{key} has no effect with compute_type "
                                f"{cfg.get('compute_type', 'gemm')!r} (transformer only)"))
        if cfg.get("optimizer", "none") != "none" and not (transformer and cfg.get("real_backward")):
            out.append(("optimizer", "the optimizer steps only with compute_type transformer "
                        "and real_backward (there are no gradients otherwise)"))
        if cfg.get("gpu_max_hw_queues") is not None:
            out.append(("gpu_max_hw_queues", "GPU_MAX_HW_QUEUES is read by the HIP runtime when "
                        "it starts, before a workload's settings are read, and means nothing on "
                        "CUDA: use the gpu_max_hw_queues_N mitigation or extra_env instead; "
                        "this setting sets nothing"))
        if cfg.get("h2d_prefetch") and not cfg.get("h2d_tensor_size"):
            out.append(("h2d_prefetch", "h2d_prefetch double-buffers the h2d_tensor_size "
                        "payload, which is 0 (none)"))
        if cfg.get("ddp_bucketed") and cfg.get("mode", "default") != "ddp":
            out.append(("ddp_bucketed", "ddp_bucketed has no effect outside mode ddp"))
        return out

    def setup(self, ctx: WorkloadContext) -> None:
        from aorta_tui.registry.switches import apply_switches
        from aorta_tui.workloads._common import pick_device, torch_dtype
        from aorta_tui.workloads._dist import init_distributed

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
        if cfg["same_stream_mode"]:
            self.streams = _SameStream(self.streams)
        if cfg["deterministic"]:
            import torch

            torch.use_deterministic_algorithms(True, warn_only=True)
        self.cfg_layers = cfg["num_layers"]
        self.plan = _PLANS[cfg["mode"]](self, cfg)

    # -- known values --------------------------------------------------------------------
    def known(self, tag: int, rank: int, it: int, n: int, offset: int = 0,
              device: torch.device | str | None = None) -> torch.Tensor:
        import torch

        idx = torch.arange(offset, offset + n, device=device or self.dev.device)
        v = (idx * 7 + it * 13 + rank * 29 + tag * 3) % VALUE_RANGE + 1
        return v.to(self.dtype)

    def alloc(self, n: int) -> torch.Tensor:
        import torch

        # poison: no iteration's known values are negative
        return torch.full((n,), -1.0, dtype=self.dtype, device=self.dev.device)

    def host(self, n: int, pin: bool) -> torch.Tensor:
        import torch

        pin = pin and self.dev.is_gpu
        return torch.empty(n, dtype=self.dtype, pin_memory=pin)

    # -- the loop ------------------------------------------------------------------------
    def run(self, ctx: WorkloadContext) -> WorkloadResult:
        import torch

        cfg = ctx.config
        warm = cfg["warmup_iterations"]
        measured = cfg["verify_iterations"] or ctx.steps
        result = self._new_result(cfg)
        local = _expected_local(cfg, self.world, result)
        checks = self.plan.checks()
        report = torch.zeros(len(checks), 4, dtype=torch.float64, device=self.dev.device)
        corrupted_iterations = 0
        verified = 0
        total = warm + measured
        for it in range(1, total + 1):
            checks, rows, seconds = self._iteration(it, total, cfg, checks, report)
            verified += 1
            found = self._record_corruptions(it, rows, checks, cfg, result)
            if found:
                corrupted_iterations += 1
            if it > warm:
                result.step_times_s.append(seconds)
                if ctx.on_step:
                    ctx.on_step(it - warm, seconds)
            if cfg["log_interval"] and (it % cfg["log_interval"] == 0 or it == total):
                print(f"race: iteration {it}/{total} rank {self.rank}: "
                      f"{corrupted_iterations} corrupted so far", flush=True)
            if found and cfg["stop_on_first_corruption"]:
                break
        self._finish_metrics(result, cfg, verified, corrupted_iterations, checks, local)
        return result

    def _new_result(self, cfg: dict[str, Any]) -> WorkloadResult:
        """The result, with the notes on what this device and config change."""
        result = WorkloadResult(device=self.dev.label, applied_switches=list(self.applied),
                                emulated=not self.dev.is_gpu)
        if not self.dev.is_gpu:
            result.notes.append("CPU: streams emulated, most downstream first (a missing wait "
                                "lets the consumer run before its producer)")
            if cfg["producer_delay_us"]:
                result.notes.append("producer_delay_us has no effect on CPU")
        for key, note in self.config_notes(cfg):
            result.notes.append(f"workload_config.{key}: {note}")
        return result

    def _iteration(self, it: int, total: int, cfg: dict[str, Any], checks: list[Any],
                   report: torch.Tensor) -> tuple[list[Any], list[Any], float]:
        """One timed iteration: produce, verify; returns the checks it used, the verifier's
        report rows and the iteration's wall time."""
        from aorta_tui.workloads._common import StepTimer

        self.plan.it = it
        if it > 1 and not cfg["reuse_buffers"]:
            self.plan.buffers()  # fresh device buffers (and their layout) every iteration
        if it > 1 and (cfg["h2d_prefetch"] or not cfg["reuse_buffers"]):
            checks = self.plan.checks()  # the buffer each check reads changed
        with StepTimer(self.dev.device) as timer:
            # the expected values first, so that once its waits are met the verifier reads
            # the buffers at once (a late read would hide a missing wait on a GPU)
            expected: list[Any] = []
            self.streams.submit("verify", lambda it=it, out=expected, cs=checks: out.extend(
                fn(it) for _name, _buf, fn in cs))
            events = self.plan.enqueue(it, cfg["drop_wait"])
            self.plan.prefetch(it + 1 if it < total else None)
            for name, ev in events.items():
                if not (cfg["drop_wait"] == "compute" and name == "compute"
                        and self.plan.verifier_waits_compute):
                    self.streams.wait("verify", ev)
            self.streams.submit("verify",
                                lambda exp=expected, cs=checks: _verify(cs, exp, report))
            self.streams.finish()
            rows = report.cpu().tolist()  # synchronises with the verifier
        return checks, rows, timer.seconds

    def _record_corruptions(self, it: int, rows: list[Any], checks: list[Any],
                            cfg: dict[str, Any], result: WorkloadResult) -> list[Any]:
        """The iteration's corrupted buffers (and layers), each a failure up to the cap."""
        found = [(checks[i][0], r) for i, r in enumerate(rows) if r[0] > 0]
        bad_layers = self.plan.take_layer_mismatches()
        if bad_layers:
            found.append(("layer_checksum", (bad_layers, 0, 0.0, 0.0)))
        for name, (count, first, got, want) in found:
            if len(result.failures) < MAX_FAILURES:
                result.failures.append(self._corruption(it, name, count, first, got,
                                                        want, checks, cfg["drop_wait"]))
        return found

    def _finish_metrics(self, result: WorkloadResult, cfg: dict[str, Any], verified: int,
                        corrupted_iterations: int, checks: list[Any], local: int) -> None:
        from aorta_tui.core.stats import percentile_ms

        warm = cfg["warmup_iterations"]
        result.metrics.update({
            "mode": cfg["mode"], "iterations_verified": verified,
            "corrupted_iterations": corrupted_iterations,
            "buffers_verified_per_iteration": [c[0] for c in checks],
            "elements_verified_per_iteration": sum(c[1].numel() for c in checks),
            "iteration_ms_p50": percentile_ms(result.step_times_s, 50),
            "iteration_ms_p99": percentile_ms(result.step_times_s, 99),
            "drop_wait": cfg["drop_wait"], "streams": "gpu" if self.dev.is_gpu else "emulated",
            "compute_type": cfg["compute_type"] if cfg["simulate_compute"] else None,
            "layers_verified": self.plan.layers_verified,
            "local_world_size": local,
            "expected_local_world_size": cfg["expected_local_world_size"],
            "backend": self.dist.backend, "world_size": self.world,
            "timing": "host wall time per timed iteration: enqueue, the streams, and the "
                      "verification of every buffer, ended by a device synchronize",
        })
        if not result.step_times_s:
            result.metrics["iteration_ms_reason"] = (
                f"no timed iteration: the trial stopped at a corruption within the "
                f"{warm} warmup iterations")

    def _corruption(self, it: int, name: str, count: float, first: float, got: float,
                    expected: float, checks: list[Any], drop: str) -> Failure:
        n = next((c[1].numel() for c in checks if c[0] == name),
                 max(self.cfg_layers - 1, 1))  # layer_checksum: layers compared with layer 0
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
            report: torch.Tensor) -> None:
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
        self.it = 0
        self.gemm: torch.Tensor | None = None
        self.model: _Transformer | None = None
        self.layers_verified = 0
        self.payload_host: list[Any] = []
        self.payload_dev: list[Any] = []
        if cfg["simulate_compute"] and cfg["compute_type"] == "transformer":
            self.model = _Transformer(race, cfg)
        elif cfg["simulate_compute"]:
            import torch

            g = torch.Generator().manual_seed(cfg["deterministic_seed"] if cfg["deterministic"]
                                              else 0)
            n = cfg["gemm_size"]
            self.gemm = (torch.randn(n, n, generator=g) / n ** 0.5).to(race.dev.device, race.dtype)
        self.buffers()

    def buffers(self) -> None:
        """(Re)allocate the device buffers (every iteration with reuse_buffers: false)."""
        n = self.cfg["h2d_tensor_size"]
        if n:
            copies = 2 if self.cfg["h2d_prefetch"] else 1
            if not self.payload_host:
                self.payload_host = [self.r.host(n, self.cfg["pin_memory"]) for _ in range(copies)]
            self.payload_dev = [self.r.alloc(n) for _ in range(copies)]

    def _payload_slot(self, it: int) -> int:
        return it % len(self.payload_dev)

    def _copy_payload(self, it: int) -> None:
        slot = self._payload_slot(it)
        host = self.payload_host[slot]
        host.copy_(self.r.known(30, self.r.rank, it, host.numel(), device="cpu"))
        self.payload_dev[slot].copy_(host, non_blocking=True)

    def prefetch(self, next_it: int | None) -> None:
        """h2d_prefetch: the next iteration's payload goes to the other buffer now, while this
        iteration computes and is verified (nothing reads that buffer in this iteration)."""
        if self.payload_dev and self.cfg["h2d_prefetch"] and next_it is not None \
                and self.cfg["reuse_buffers"]:
            self.r.streams.submit("h2d", lambda: self._copy_payload(next_it))

    def payload_checks(self) -> list[tuple[str, Any, Callable[[int], Any]]]:
        if not self.payload_dev:
            return []
        buf = self.payload_dev[self._payload_slot(max(self.it, 1))]
        return [("h2d_payload", buf, lambda it: self.r.known(30, self.r.rank, it, buf.numel()))]

    def take_layer_mismatches(self) -> int:
        return self.model.take_mismatches() if self.model is not None else 0

    def simulate(self) -> None:
        if self.model is not None:
            self.layers_verified += self.model.step()
        elif self.gemm is not None:
            x = self.gemm
            twice = 2 if self.cfg["include_backward_compute"] else 1  # backward: as many again
            for _ in range(self.cfg["gemm_layers"] * twice):
                x = x @ self.gemm

    def delay(self, stream: str) -> None:
        """Make the producer of the dropped dependency late (GPU; a no-op when emulated)."""
        target = self.cfg["drop_wait"] if self.cfg["drop_wait"] != "none" else "h2d"
        if stream == target:
            self.r.streams.delay(stream, self.cfg["producer_delay_us"])

    def h2d(self, pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> Any:  # the streams' event
        """Copy this iteration's host buffers to the device on the h2d stream."""
        s = self.r.streams
        self.delay("h2d")

        it = self.it
        first = it == 1 or not self.cfg["h2d_prefetch"] or not self.cfg["reuse_buffers"]

        def copy() -> None:
            for dev, host in pairs:
                dev.copy_(host, non_blocking=True)
            if self.payload_dev and first:  # with h2d_prefetch, later ones came early
                self._copy_payload(it)

        s.submit("h2d", copy)
        return s.record("h2d")

    def checks(self) -> list[tuple[str, Any, Callable[[int], Any]]]:
        raise NotImplementedError

    def enqueue(self, it: int, drop: str) -> dict[str, Any]:
        raise NotImplementedError


class _DefaultPlan(_Plan):
    def buffers(self) -> None:
        super().buffers()
        race, cfg, w = self.r, self.cfg, self.r.world
        self.chunk = max(cfg["alltoall_tensor_size"] // w, 1)
        n_a, n_r = self.chunk * w, cfg["allreduce_tensor_size"]
        if not hasattr(self, "host_a"):
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

        def a_out(it: int) -> torch.Tensor:
            return torch.cat([r.known(1, j, it, c, offset=r.rank * c) for j in range(r.world)])

        return self.payload_checks() + [
            ("a2a_input", self.a_in, lambda it: r.known(1, r.rank, it, self.a_in.numel())),
            ("a2a_output", self.a_out, a_out),
            ("allreduce", self.reduced,
             lambda it: sum(r.known(2, j, it, self.reduced.numel()) for j in range(r.world))),
            ("compute_output", self.out, lambda it: a_out(it) * 2 + 1),
        ]


class _DdpPlan(_Plan):
    BUCKETS = 4

    def buffers(self) -> None:
        super().buffers()
        race = self.r
        n = self.cfg["allreduce_tensor_size"] // self.BUCKETS
        if not hasattr(self, "hosts"):
            self.hosts = [race.host(n, self.cfg["pin_memory"]) for _ in range(self.BUCKETS)]
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
            if not self.cfg["ddp_bucketed"]:  # one bulk phase: each bucket reduced in turn
                for g in self.grads:
                    dist.all_reduce(g)
                return
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
        out = self.payload_checks()
        for b, (g, o) in enumerate(zip(self.grads, self.outs, strict=False)):
            def summed(it: int, b: int = b, n: int = g.numel()) -> torch.Tensor | int:
                return sum(r.known(10 + b, j, it, n) for j in range(r.world))

            def updated(it: int, f: Callable[[int], torch.Tensor | int] = summed
                        ) -> torch.Tensor | int:
                return f(it) * 2 + 1

            out.append((f"bucket{b}", g, summed))
            out.append((f"bucket{b}_update", o, updated))
        return out


class _FsdpPlan(_Plan):
    verifier_waits_compute = False  # in fsdp, drop_wait=compute drops the reduce-scatter's wait

    def buffers(self) -> None:
        super().buffers()
        race, cfg = self.r, self.cfg
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

        def full(it: int) -> torch.Tensor:
            return torch.cat([r.known(20, j, it, n) for j in range(r.world)])

        return self.payload_checks() + [
            ("param_shard", self.shard, lambda it: r.known(20, r.rank, it, n)),
            ("gathered_params", self.full, full),
            ("grads", self.grads, lambda it: full(it) * 2 + 1),
            ("grad_shard", self.grad_shard,
             lambda it: (r.known(20, r.rank, it, n) * 2 + 1) * r.world),
        ]


_PLANS: dict[str, type[_Plan]] = {"default": _DefaultPlan, "ddp": _DdpPlan, "fsdp": _FsdpPlan}


class _Transformer:
    """simulate_compute with compute_type transformer: encoder layers on a fixed input.

    With shared_layer_weights every layer runs the same block on the same input, so every
    layer's output must equal layer 0's: a differing one is counted on the device (no host
    sync inside the compute stream's work) and reported as a layer_checksum corruption.
    """

    def __init__(self, race: Race, cfg: dict[str, Any]) -> None:
        import torch

        dim = cfg["model_dim"]
        heads = cfg["num_heads"] or max(1, dim // 128)
        ffn = cfg["ffn_size"] or 4 * dim
        torch.manual_seed(cfg["deterministic_seed"] if cfg["deterministic"] else 0)
        self.cfg = cfg
        self.shared = cfg["shared_layer_weights"]
        # float32 on CPU (bf16 kernels there are slow); the race dtype on a GPU
        dtype = race.dtype if race.dev.is_gpu else torch.float32
        blocks = 1 if self.shared else cfg["num_layers"]
        self.blocks = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(dim, heads, ffn, dropout=0.0, batch_first=True)
            for _ in range(blocks)).to(race.dev.device, dtype)
        self.x = torch.randn(cfg["batch_size"], cfg["seq_len"], dim, dtype=dtype,
                             generator=torch.Generator().manual_seed(1)).to(race.dev.device)
        self.bad = torch.zeros((), dtype=torch.int64, device=race.dev.device)
        self.opt: torch.optim.Optimizer | None = None
        if cfg["real_backward"] and cfg["optimizer"] != "none":
            params = self.blocks.parameters()
            if cfg["optimizer"] == "adamw":
                b1, b2 = cfg["optimizer_betas"]
                self.opt = torch.optim.AdamW(params, lr=cfg["optimizer_lr"], betas=(b1, b2),
                                             eps=cfg["optimizer_eps"],
                                             weight_decay=cfg["optimizer_weight_decay"])
            else:
                self.opt = torch.optim.SGD(params, lr=cfg["optimizer_lr"],
                                           weight_decay=cfg["optimizer_weight_decay"])

    def forward(self) -> list[torch.Tensor]:
        outs = []
        h = self.x
        for i in range(self.cfg["num_layers"]):
            block = self.blocks[0 if self.shared else i]
            h = block(self.x if self.shared else h)
            outs.append(h)
        return outs

    def step(self) -> int:
        """One iteration's work; returns the layers compared with layer 0."""
        import torch

        with torch.no_grad():
            outs = self.forward()
            if self.shared:
                for o in outs[1:]:
                    self.bad += (o != outs[0]).any().to(torch.int64)
        if self.cfg["include_backward_compute"]:
            if self.cfg["real_backward"]:
                with torch.enable_grad():
                    loss = sum(o.float().mean() for o in self.forward())
                    assert isinstance(loss, torch.Tensor)  # num_layers >= 1: a sum of tensors
                    loss.backward()
                if self.opt is not None:
                    self.opt.step()
                self.blocks.zero_grad(set_to_none=True)
            else:
                with torch.no_grad():
                    self.forward()  # upstream's timing proxy: the forward again
        return len(outs) - 1 if self.shared else 0

    def take_mismatches(self) -> int:
        n = int(self.bad.item())  # after the iteration's finish(): no extra sync in the race
        self.bad.zero_()
        return n


class _SameStream:
    """same_stream_mode: the collectives run on the h2d stream (ordered by the stream)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @staticmethod
    def _s(stream: str) -> str:
        return "h2d" if stream == "comm" else stream

    def submit(self, stream: str, fn: Callable[[], Any]) -> None:
        self.inner.submit(self._s(stream), fn)

    def record(self, stream: str) -> Any:
        return self.inner.record(self._s(stream))

    def wait(self, stream: str, event: Any) -> None:
        self.inner.wait(self._s(stream), event)

    def delay(self, stream: str, microseconds: int) -> None:
        self.inner.delay(self._s(stream), microseconds)

    def finish(self) -> None:
        self.inner.finish()


def _expected_local(cfg: dict[str, Any], world: int, result: WorkloadResult) -> int:
    """This host's ranks (torchrun's LOCAL_WORLD_SIZE, else the world: one host); a recipe's
    expected_local_world_size that differs is a note, as upstream warns and does not refuse."""
    import os

    raw = os.environ.get("LOCAL_WORLD_SIZE", "")
    local = int(raw) if ascii_digits(raw) and int(raw) > 0 else world
    want = cfg["expected_local_world_size"]
    if want is not None and want != local:
        result.notes.append(f"workload_config.expected_local_world_size: the recipe expects "
                            f"{want} ranks per host, this launch has {local}")
    return local
