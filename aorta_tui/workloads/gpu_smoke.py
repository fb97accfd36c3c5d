"""``gpu_smoke``: a tiny matrix-multiply loop on whichever device exists.

It proves the workload flow end to end on any box (CUDA, ROCm or CPU) and reports per-step
times measured the honest way for the device: CUDA/HIP events around each step on a GPU,
``perf_counter`` on the CPU. A numerical self-check (the product against a float64 reference)
makes it able to fail.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from aorta_tui.registry.workload import (
    ConfigField,
    Failure,
    LaunchSpec,
    Workload,
    WorkloadContext,
    WorkloadResult,
)

if TYPE_CHECKING:  # imported by setup (the registry lists workloads without torch)
    import torch


class GpuSmoke(Workload):
    name = "gpu_smoke"
    description = "tiny matmul loop on CUDA, ROCm or CPU; per-step times and a numerics check"
    launch = LaunchSpec(mode="single")
    hint = "gpu_smoke failing means the device or its runtime is broken: check `aorta-tui env probe --summary`"
    injected_hint = ("the failures were injected (workload_config inject_error: true): the self-check "
                     "works; the device is not at fault. Drop inject_error to test the device")
    preload = ("torch", "aorta_tui.registry.switches")  # its setup imports torch
    config_schema = (
        ConfigField("size", "int", 256, "matrix side", min=1, max=16384),
        # upstream AORTA's gpu_smoke key: its problem size (a vector length there), the
        # matrix side here; when given it wins over size
        ConfigField("n", "int", None, "upstream's name for size (wins when given)", min=1, max=16384),
        ConfigField("dtype", "str", "float32", "element type", choices=("float32", "float16", "bfloat16")),
        ConfigField("device", "str", "auto", "auto picks cuda (also ROCm) when present", choices=("auto", "cuda", "cpu")),
        ConfigField("tolerance", "float", 1e-2, "max relative error against a float64 reference", min=0.0),
        ConfigField("warmup_steps", "int", 1, "untimed steps first (allocator, kernel selection)", min=0),
        ConfigField("inject_error", "bool", False, "perturb one result to prove the check fails"),
    )

    @classmethod
    def failure_hint(cls, failing: list[dict[str, Any]]) -> str:
        """Injected failures are not the device's: say which hint applies to which trials."""
        def injected(result: dict[str, Any]) -> bool:
            fails = result.get("failures") or []
            return bool(fails) and all(isinstance(f, dict) and (f.get("details") or {}).get("injected") is True
                                       for f in fails)
        n_injected = sum(1 for r in failing if injected(r))
        if failing and n_injected == len(failing):
            return cls.injected_hint
        if n_injected:
            return f"{n_injected} of {len(failing)} failing trials were injected (inject_error: true); for the others: {cls.hint}"
        return cls.hint

    def setup(self, ctx: WorkloadContext) -> None:
        import torch

        from aorta_tui.registry.switches import apply_switches

        self._applied = apply_switches(ctx.switches)
        want = ctx.config["device"]
        if want == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("device=cuda but torch.cuda.is_available() is False")
        use_gpu = want == "cuda" or (want == "auto" and torch.cuda.is_available())
        self._device = torch.device("cuda", ctx.local_rank % max(1, torch.cuda.device_count())) if use_gpu else torch.device("cpu")
        torch.manual_seed(ctx.seed)
        dtype = getattr(torch, ctx.config["dtype"])
        n = ctx.config.get("n") or ctx.config["size"]
        self._a: torch.Tensor | None = torch.randn(n, n, device=self._device, dtype=dtype)
        self._b: torch.Tensor | None = torch.randn(n, n, device=self._device, dtype=dtype)

    def run(self, ctx: WorkloadContext) -> WorkloadResult:
        import torch

        a, b = self._a, self._b
        if a is None or b is None:
            raise RuntimeError("gpu_smoke ran without its setup (or after its cleanup)")
        gpu = self._device.type == "cuda"
        times: list[float] = []
        c = None
        for _ in range(ctx.config["warmup_steps"]):
            c = a @ b
        if gpu:
            torch.cuda.synchronize(self._device)
        for step in range(ctx.steps):
            if gpu:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                c = a @ b
                end.record()
                end.synchronize()
                seconds = start.elapsed_time(end) / 1e3
            else:
                t0 = time.perf_counter()
                c = a @ b
                seconds = time.perf_counter() - t0
            times.append(seconds)
            if ctx.on_step:
                ctx.on_step(step, seconds)

        failures: list[Failure] = []
        metrics: dict[str, Any] = {}
        if c is not None:
            if ctx.config["inject_error"]:
                c = c.clone()
                c.view(-1)[0] += 1e3
            ref = a.double() @ b.double()
            rel = float(((c.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item())
            metrics["max_rel_error"] = rel
            if not rel <= ctx.config["tolerance"]:
                injected = bool(ctx.config["inject_error"])
                failures.append(Failure(
                    "numerics",
                    f"matmul result differs from the float64 reference (max rel error {rel:.3g} "
                    f"> tolerance {ctx.config['tolerance']})"
                    + (" - injected on purpose (inject_error: true)" if injected else ""),
                    {"max_rel_error": rel, "injected": injected},
                ))
        name = torch.cuda.get_device_name(self._device) if gpu else "cpu"
        metrics["device_name"] = name
        metrics["timing_source"] = "cuda events" if gpu else "time.perf_counter"
        if gpu and times:
            n = ctx.config["size"]
            metrics["tflops_mean"] = 2 * n**3 / (sum(times) / len(times)) / 1e12
        return WorkloadResult(
            step_times_s=times,
            metrics=metrics,
            failures=failures,
            device=str(self._device),
            applied_switches=self._applied,
        )

    def cleanup(self, ctx: WorkloadContext) -> None:
        # released for the allocator; nothing reads them after cleanup
        self._a = self._b = None
