"""``training``: a real forward -> loss -> backward -> optimizer loop under DDP or FSDP.

Each step checks the model's outputs, the loss and every gradient for non-finite values, and
records the loss. The ranks agree after every step (one tiny all-reduce), so a NaN on one rank
stops all of them at the same step instead of leaving the others waiting in a collective.
``inject_nan_at_step`` writes a NaN into rank 0's activations at that step: the run must then
fail with ``nonfinite_output`` naming that step.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

from aorta_tui.registry.workload import (
    ConfigField,
    Failure,
    LaunchSpec,
    Workload,
    WorkloadContext,
    WorkloadResult,
)
from aorta_tui.workloads._common import device_field, dtype_field, world_size_field

if TYPE_CHECKING:  # torch is imported where a workload runs, not to list it
    import torch

MODEL_FIELDS = (
    ConfigField("kind", "str", "transformer", "model family",
                choices=("mlp", "transformer", "moe_transformer", "moe")),
    ConfigField("hidden_size", "int", 64, min=8),
    ConfigField("num_layers", "int", 2, min=1),
    ConfigField("num_heads", "int", 4, "attention heads (must divide hidden_size)", min=1),
    ConfigField("ffn_size", "int", 128, min=1),
    ConfigField("vocab_size", "int", 256, min=2),
    ConfigField("num_experts", "int", 4, "experts of the MoE kinds (top-1 routing)", min=1),
)
OPTIMIZER_FIELDS = (
    ConfigField("kind", "str", "adamw", choices=("adamw", "sgd")),
    ConfigField("lr", "float", 1e-3, min=0.0),
    ConfigField("weight_decay", "float", 0.01, min=0.0),
    ConfigField("betas", "list", [0.9, 0.98], "AdamW betas"),
    ConfigField("eps", "float", 1e-8, min=0.0),
)
CHECK_FIELDS = (
    ConfigField("fail_on_nan_loss", "bool", True, "a non-finite loss is a failure"),
    ConfigField("fail_on_nan_grad", "bool", True, "a non-finite gradient is a failure"),
    ConfigField("fail_on_nonfinite_output", "bool", True, "non-finite logits are a failure"),
)


class Training(Workload):
    name: ClassVar[str] = "training"
    description: ClassVar[str] = (
        "forward/loss/backward/optimizer under DDP or FSDP2 (mlp, transformer, MoE); "
        "fails on non-finite outputs, loss or gradients"
    )
    launch: ClassVar[LaunchSpec] = LaunchSpec(mode="torchrun", min_world_size=1)
    hint: ClassVar[str] = (
        "non-finite values: compare cells with tf32_off / deterministic, a float32 dtype, a "
        "lower optimizer.lr; the failure names the step, the rank and the first bad tensor"
    )
    # torch.optim's step imports torch._dynamo (which pulls in sympy and torch.fx): 4 s of a
    # trial's start when bytecode is not cached, so the warm zygote pays it once
    preload: ClassVar[tuple[str, ...]] = (
        "torch.nn.functional", "torch.optim", "torch._dynamo", "torch.distributed",
        "torch.nn.parallel", "aorta_tui.workloads._common", "aorta_tui.workloads._dist",
        "aorta_tui.workloads._models", "aorta_tui.registry.switches",
    )
    config_schema: ClassVar[tuple[ConfigField, ...]] = (
        ConfigField("parallelism", "str", "ddp",
                    "ddp, or fsdp (FSDP2 fully_shard where torch has it)",
                    choices=("ddp", "fsdp")),
        ConfigField("seed", "int", 1234, "model weights and data (same on every rank)"),
        device_field(),
        dtype_field("float32"),
        ConfigField("batch_size", "int", 4, "sequences per rank per step", min=1),
        ConfigField("seq_len", "int", 32, min=2),
        ConfigField("warmup_steps", "int", 1, "untimed steps before the measured ones", min=0),
        ConfigField("model", "dict", {}, fields=MODEL_FIELDS),
        ConfigField("optimizer", "dict", {}, fields=OPTIMIZER_FIELDS),
        ConfigField("checks", "dict", {}, fields=CHECK_FIELDS),
        world_size_field(),
        ConfigField("inject_nan_at_step", "int", None,
                    "fault injection: write a NaN into rank 0's activations at this measured "
                    "step (1-based); off by default", min=1),
    )

    @classmethod
    def preload_modules(cls, configs: list[dict[str, Any]]) -> tuple[str, ...]:
        fsdp = any(c.get("parallelism") == "fsdp" for c in configs)
        return cls.preload + (("torch.distributed.fsdp",) if fsdp else ())

    def setup(self, ctx: WorkloadContext) -> None:
        from aorta_tui.registry.switches import apply_switches
        from aorta_tui.workloads._common import pick_device, seed_everything

        self.applied = apply_switches(ctx.switches)
        cfg = ctx.config
        self.dev = pick_device(cfg["device"], ctx.local_rank)
        seed_everything(cfg["seed"])
        from aorta_tui.workloads._dist import init_distributed

        # DDP over one rank is the identity: no process group (no NCCL/RCCL init) for it
        self.dist = init_distributed(ctx.rank, ctx.world_size, self.dev.device, ctx.trial_dir,
                                     need_group=cfg["parallelism"] != "ddp")
        self.notes: list[str] = []
        self.model, self.wrapper = self._build(cfg)
        self.optimizer = self._optimizer(cfg["optimizer"])

    def _build(self, cfg: dict[str, Any]) -> tuple[Any, str]:
        from aorta_tui.workloads._common import torch_dtype
        from aorta_tui.workloads._models import ModelShape, build_model

        m = cfg["model"]
        shape = ModelShape(kind=m["kind"], vocab_size=m["vocab_size"], hidden_size=m["hidden_size"],
                           num_layers=m["num_layers"], num_heads=m["num_heads"],
                           ffn_size=m["ffn_size"], max_seq_len=cfg["seq_len"],
                           num_experts=m["num_experts"] if m["kind"].startswith("moe") else 1)
        model = build_model(shape, self.dev.device, torch_dtype(cfg["dtype"]), cfg["seed"])
        self.raw_model = model
        if cfg["parallelism"] == "ddp" and not self.dist.grouped:
            return model, "none (one rank: DistributedDataParallel over one rank is the identity)"
        if cfg["parallelism"] == "ddp":
            from torch.nn.parallel import DistributedDataParallel as DDP

            ids = [self.dev.device.index] if self.dev.is_gpu else None
            return DDP(model, device_ids=ids), "DistributedDataParallel"
        try:
            from torch.distributed.fsdp import fully_shard
        except ImportError:  # torch < 2.6: the FSDP1 wrapper
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

            self.notes.append("FSDP2 (fully_shard) not in this torch: used FSDP1")
            return FSDP(model, device_id=self.dev.device if self.dev.is_gpu else None,
                        use_orig_params=True), "FullyShardedDataParallel (FSDP1)"
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        return model, "fully_shard (FSDP2)"

    def _optimizer(self, o: dict[str, Any]) -> torch.optim.Optimizer:
        import torch

        params = self.model.parameters()
        if o["kind"] == "sgd":
            return torch.optim.SGD(params, lr=o["lr"], weight_decay=o["weight_decay"])
        betas = tuple(float(b) for b in o["betas"])
        if len(betas) != 2:
            from aorta_tui.core.errors import UsageError

            raise UsageError(f"workload_config.optimizer.betas must have 2 numbers, got {o['betas']!r}")
        return torch.optim.AdamW(params, lr=o["lr"], weight_decay=o["weight_decay"],
                                 betas=betas, eps=o["eps"])

    def run(self, ctx: WorkloadContext) -> WorkloadResult:
        import torch.nn.functional as F

        from aorta_tui.workloads._common import StepTimer, finite_or_none
        from aorta_tui.workloads._dist import all_true
        from aorta_tui.workloads._models import synthetic_tokens

        cfg = ctx.config
        checks = cfg["checks"]
        vocab = cfg["model"]["vocab_size"]
        # each rank trains on its own shard of the data, as data parallelism does
        tokens = synthetic_tokens(cfg["batch_size"], cfg["seq_len"] + 1, vocab,
                                  cfg["seed"] + 1000 * (ctx.rank + 1), self.dev.device)
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        inject_at = cfg["inject_nan_at_step"]
        result = WorkloadResult(device=self.dev.label, applied_switches=list(self.applied),
                                notes=list(self.notes))
        losses: list[float | None] = []
        hook = None
        total = cfg["warmup_steps"] + ctx.steps
        for i in range(total):
            measured = i >= cfg["warmup_steps"]
            step = i - cfg["warmup_steps"] + 1  # 1-based measured step
            injecting = measured and step == inject_at and ctx.rank == 0
            if injecting:
                hook = self.raw_model.blocks[0].register_forward_hook(_nan_hook)
            with StepTimer(self.dev.device) as timer:
                self.optimizer.zero_grad(set_to_none=True)
                logits = self.model(inputs)
                loss = F.cross_entropy(logits.float().reshape(-1, vocab), targets.reshape(-1))
                loss.backward()
                bad = self._nonfinite(logits, loss)
                if not any(bad.values()):
                    self.optimizer.step()
            if hook is not None:
                hook.remove()
                hook = None
            if not measured:
                if not all_true(not any(bad.values()), self.dev.device):
                    result.failures.append(Failure("nonfinite_warmup",
                                                   f"non-finite values during warmup step {i + 1}"))
                    break
                continue
            result.step_times_s.append(timer.seconds)
            losses.append(finite_or_none(float(loss.item())))
            if ctx.on_step:
                ctx.on_step(step, timer.seconds)
            found = self._report(bad, step, ctx.rank, inject_at, checks)
            result.failures.extend(found)
            if not all_true(not any(bad.values()), self.dev.device):
                if not found:
                    result.notes.append(f"stopped at step {step}: another rank saw non-finite values")
                break
        result.metrics.update(self._metrics(cfg, losses, ctx))
        return result

    def _nonfinite(self, logits: torch.Tensor, loss: torch.Tensor) -> dict[str, Any]:
        """Which of logits, loss and gradients hold a non-finite value. The flags come back in
        one device-to-host copy: this runs inside the timed step, and a read per tensor would
        stall it once per parameter."""
        import torch

        names: list[str] = []
        flags = [torch.isfinite(logits).all(), torch.isfinite(loss).all()]
        for name, p in self.raw_model.named_parameters():
            g = p.grad
            if g is None:
                continue
            local = g.to_local() if hasattr(g, "to_local") else g
            names.append(name)
            flags.append(torch.isfinite(local).all())
        finite = torch.stack(flags).tolist()
        return {
            "output": not finite[0],
            "loss": not finite[1],
            "grads": [n for n, ok in zip(names, finite[2:], strict=True) if not ok],
        }

    @staticmethod
    def _report(bad: dict[str, Any], step: int, rank: int, inject_at: int | None,
                checks: dict[str, Any]) -> list[Failure]:
        injected = inject_at == step  # written on rank 0; DDP/FSDP carry it to the others
        why = f" (injected fault: inject_nan_at_step={inject_at} on rank 0)" if injected else ""
        details: dict[str, Any] = {"step": step, "rank": rank, "injected": injected}
        out = []
        if bad["output"] and checks["fail_on_nonfinite_output"]:
            out.append(Failure("nonfinite_output",
                               f"non-finite logits at step {step} on rank {rank}{why}", details))
        if bad["loss"] and checks["fail_on_nan_loss"]:
            out.append(Failure("nonfinite_loss",
                               f"non-finite loss at step {step} on rank {rank}{why}", details))
        if bad["grads"] and checks["fail_on_nan_grad"]:
            out.append(Failure(
                "nonfinite_grad",
                f"non-finite gradients at step {step} on rank {rank} (first: {bad['grads'][0]}, "
                f"{len(bad['grads'])} tensors){why}",
                {**details, "tensors": bad["grads"][:20]}))
        return out

    def _metrics(self, cfg: dict[str, Any], losses: list[float | None],
                 ctx: WorkloadContext) -> dict[str, Any]:
        finite = [x for x in losses if x is not None]
        params = sum(p.numel() for p in self.raw_model.parameters())
        tokens = cfg["batch_size"] * cfg["seq_len"] * ctx.world_size
        return {
            "loss_trajectory": losses,
            "loss_first": finite[0] if finite else None,
            "loss_last": finite[-1] if finite else None,
            "loss_decreased": (finite[-1] < finite[0]) if len(finite) > 1 else None,
            "parallelism": self.wrapper,
            "model_kind": cfg["model"]["kind"],
            "parameters": params,
            "tokens_per_step_global": tokens,
            "dtype": cfg["dtype"],
            "backend": self.dist.backend,
        }

    def cleanup(self, ctx: WorkloadContext) -> None:
        # DDP's reducer and FSDP's hooks hold the process group: let them go while it lives
        # (tearing them down after destroy_process_group can hang in the C++ destructors)
        for name in ("optimizer", "model", "raw_model"):
            if hasattr(self, name):
                delattr(self, name)
        import gc

        gc.collect()
        handle = getattr(self, "dist", None)
        if handle is not None:
            handle.close()


def _nan_hook(module: torch.nn.Module, inputs: tuple[object, ...], output: torch.Tensor
              ) -> torch.Tensor:
    out = output.clone()
    out.view(-1)[0] = math.nan
    return out
