"""``llm_determinism``: is one transformer training step bit-exact when it is run twice?

Each measured step snapshots the parameters and the RNG state, runs forward, loss, backward and
an SGD update (run A), restores the snapshot and runs the same again (run B). Every block's
output activation, the loss, every gradient (in the order backward produces them) and every
updated parameter is fingerprinted with SHA-256 of its raw bytes; the first entry where A and B
differ is reported by name. With ``checksum_mode: global`` the forward fingerprints (and the
gradients and parameters when nothing is sharded) are also compared across ranks, which all see
the same data.

``inject_nondeterminism`` proves the check can fail:
``unseeded_op`` adds noise from an unseeded generator to the middle block's output in run B
(diverges on every device); ``atomic_accumulate`` adds a ``scatter_add_`` with many colliding
indices to the middle block in both runs, which is nondeterministic where the device
accumulates with atomics (CUDA and ROCm GPUs; unless the ``deterministic`` mitigation is on)
and deterministic on CPU.
"""

from __future__ import annotations

import json
from pathlib import Path
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

if TYPE_CHECKING:  # torch is imported where a workload runs, not to list it
    import torch

    from aorta_tui.workloads._fingerprint import FingerprintLog

INJECTIONS = ("none", "unseeded_op", "atomic_accumulate")


class LlmDeterminism(Workload):
    name: ClassVar[str] = "llm_determinism"
    description: ClassVar[str] = (
        "runs each transformer step twice from the same snapshot and compares SHA-256 "
        "fingerprints of activations, loss, gradients and parameters (and across ranks)"
    )
    launch: ClassVar[LaunchSpec] = LaunchSpec(mode="torchrun", min_world_size=1)
    hint: ClassVar[str] = (
        "a step that is not bit-exact: try the deterministic and cublas_deterministic "
        "mitigations; the failure names the first diverging block and tensor"
    )
    preload: ClassVar[tuple[str, ...]] = (
        "torch.nn.functional", "torch.distributed", "aorta_tui.workloads._common",
        "aorta_tui.workloads._dist", "aorta_tui.workloads._models", "aorta_tui.registry.switches",
    )

    @classmethod
    def preload_modules(cls, configs: list[dict[str, Any]]) -> tuple[str, ...]:
        fsdp = any(c.get("parallelism") == "fsdp" for c in configs)
        return cls.preload + (("torch.distributed.fsdp",) if fsdp else ())

    config_schema: ClassVar[tuple[ConfigField, ...]] = (
        ConfigField("num_layers", "int", 2, min=1),
        ConfigField("hidden_size", "int", 64, min=8),
        ConfigField("ffn_size", "int", 128, min=1),
        ConfigField("num_heads", "int", 4, "attention heads (must divide hidden_size)", min=1),
        ConfigField("vocab_size", "int", 256, min=2),
        ConfigField("seq_len", "int", 32, min=2),
        ConfigField("batch_size", "int", 2, min=1),
        ConfigField("num_experts", "int", 1, "more than 1: top-1 MoE feed-forward", min=1),
        ConfigField("dropout", "float", 0.1,
                    "dropout probability: draws from the RNG, so the RNG restore is checked",
                    min=0.0, max=0.9),
        dtype_field("float32"),
        device_field(),
        ConfigField("seed", "int", 1234, "weights and data (same on every rank)"),
        ConfigField("lr", "float", 1e-2, "SGD learning rate of the update in each run", min=0.0),
        ConfigField("parallelism", "str", "none",
                    "none (each rank a full replica) or fsdp (FSDP2 fully_shard per block)",
                    choices=("none", "fsdp")),
        ConfigField("checksum_mode", "str", "global",
                    "per_rank: each rank compares its two runs; global: also across ranks",
                    choices=("per_rank", "global")),
        ConfigField("capture_dir", "str", None,
                    "write every fingerprint of every run to <dir>/rank<N>.jsonl (relative to "
                    "the trial directory); off when unset"),
        ConfigField("model_label", "str", "tiny-transformer", "free text, copied to metrics"),
        world_size_field(),
        ConfigField("inject_nondeterminism", "str", "none",
                    "fault injection: unseeded_op (always diverges) or atomic_accumulate "
                    "(diverges on GPUs that accumulate with atomics); off by default",
                    choices=INJECTIONS),
    )

    @classmethod
    def cross_trial_checks(cls, results: list[dict[str, Any]]) -> list[Failure]:
        """Trials of one cell that passed must also end on the same parameters, bit for bit."""
        by_fp: dict[tuple[str, str], list[int]] = {}
        for i, r in enumerate(results):
            m = (r or {}).get("metrics") or {}
            if (r or {}).get("failures") or not m.get("final_fingerprint"):
                continue
            scope = f"{m.get('config_scope')}/{m.get('steps_compared')}"
            by_fp.setdefault((scope, m["final_fingerprint"]), []).append(i)
        out = []
        for scope in sorted({s for s, _ in by_fp}):
            groups = {fp: v for (s, fp), v in by_fp.items() if s == scope}
            if len(groups) > 1:
                layout = "; ".join(f"trials {v} -> {fp[:12]}" for fp, v in groups.items())
                out.append(Failure(
                    "trial_divergence",
                    f"each trial was bit-exact in itself, but the trials of this cell end on "
                    f"{len(groups)} different fingerprints ({layout})",
                    {"scope": scope, "fingerprints": groups}))
        return out

    def setup(self, ctx: WorkloadContext) -> None:
        from aorta_tui.registry.switches import apply_switches
        from aorta_tui.workloads._common import pick_device, torch_dtype
        from aorta_tui.workloads._dist import init_distributed
        from aorta_tui.workloads._models import ModelShape, build_model

        self.applied = apply_switches(ctx.switches)
        cfg = ctx.config
        self.dev = pick_device(cfg["device"], ctx.local_rank)
        self.dist = init_distributed(ctx.rank, ctx.world_size, self.dev.device, ctx.trial_dir)
        shape = ModelShape(kind="transformer", vocab_size=cfg["vocab_size"],
                           hidden_size=cfg["hidden_size"], num_layers=cfg["num_layers"],
                           num_heads=cfg["num_heads"], ffn_size=cfg["ffn_size"],
                           max_seq_len=cfg["seq_len"], num_experts=cfg["num_experts"],
                           dropout=cfg["dropout"])
        self.model = build_model(shape, self.dev.device, torch_dtype(cfg["dtype"]), cfg["seed"])
        self.sharded = cfg["parallelism"] == "fsdp"
        if self.sharded:
            from torch.distributed.fsdp import fully_shard

            for block in self.model.blocks:
                fully_shard(block)
            fully_shard(self.model)
        self.model.train()
        self.capture = None
        if cfg["capture_dir"]:
            folder = Path(cfg["capture_dir"])
            folder = folder if folder.is_absolute() else ctx.trial_dir / folder
            folder.mkdir(parents=True, exist_ok=True)
            self.capture = (folder / f"rank{ctx.rank}.jsonl").open("w")

    # -- one run of one step -------------------------------------------------------------
    def _one_run(self, tokens: torch.Tensor, run: str, inject: str, noise_seed: int
                 ) -> tuple[FingerprintLog, float]:
        import torch
        import torch.nn.functional as F

        from aorta_tui.workloads._fingerprint import FingerprintLog

        log = FingerprintLog()
        # before the forward: FSDP2 keeps root gradients it set up during the forward
        self.model.zero_grad(set_to_none=True)
        hooks = []
        middle = len(self.model.blocks) // 2
        if inject == "unseeded_op" and run == "b":
            hooks.append(self.model.blocks[middle].register_forward_hook(
                lambda m, i, o: o + 1e-3 * torch.randn(
                    o.shape, generator=torch.Generator(o.device).manual_seed(noise_seed),
                    device=o.device, dtype=o.dtype)))
        if inject == "atomic_accumulate":
            hooks.append(self.model.blocks[middle].register_forward_hook(_atomic_accumulate))
        hooks.append(self.model.embed.register_forward_hook(
            lambda m, i, o: log.add("embed.out", o)))
        for i, block in enumerate(self.model.blocks):
            hooks.append(block.register_forward_hook(
                lambda m, inp, o, i=i: log.add(f"blocks.{i}.out", o)))
        try:
            logits = self.model(tokens[:, :-1])
        finally:
            for h in hooks:
                h.remove()
        log.add("logits", logits)
        vocab = logits.shape[-1]
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        log.add("loss", loss)
        loss.backward()
        named = list(self.model.named_parameters())
        for name, p in reversed(named):  # backward produces the last layer's gradients first
            if p.grad is not None:
                log.add(f"grad.{name}", p.grad)
        with torch.no_grad():
            for name, p in named:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-self.lr)
                log.add(f"param.{name}", p)
        return log, float(loss.item())

    def run(self, ctx: WorkloadContext) -> WorkloadResult:
        import os

        import torch

        from aorta_tui.workloads._common import StepTimer
        from aorta_tui.workloads._models import synthetic_tokens

        cfg = ctx.config
        self.lr = cfg["lr"]
        inject = cfg["inject_nondeterminism"]
        tokens = synthetic_tokens(cfg["batch_size"], cfg["seq_len"] + 1, cfg["vocab_size"],
                                  cfg["seed"] + 1, self.dev.device)
        result = WorkloadResult(device=self.dev.label, applied_switches=list(self.applied))
        torch.manual_seed(cfg["seed"] + 7)
        compared = 0
        first_divergence: dict[str, Any] | None = None
        for step in range(1, ctx.steps + 1):
            snapshot = _snapshot(self.model, self.dev.device)
            with StepTimer(self.dev.device) as timer:
                log_a, loss_a = self._one_run(tokens, "a", inject, 0)
            _restore(self.model, snapshot, self.dev.device)
            log_b, loss_b = self._one_run(tokens, "b", inject,
                                          int.from_bytes(os.urandom(4), "little"))
            result.step_times_s.append(timer.seconds)
            if ctx.on_step:
                ctx.on_step(step, timer.seconds)
            self._capture(step, ctx.rank, log_a, log_b)
            compared += len(log_a.entries)
            failure = _compare_runs(log_a, log_b, step, ctx.rank, inject)
            if cfg["checksum_mode"] == "global" and ctx.world_size > 1:
                failure = failure or self._compare_ranks(log_b, step, ctx.rank)
            if failure is not None:
                result.failures.append(failure)
                first_divergence = failure.details
                break
        result.metrics.update({
            "steps_compared": len(result.step_times_s),
            "tensors_compared_per_run": compared // max(len(result.step_times_s), 1),
            "final_fingerprint": log_b.combined() if result.step_times_s else None,
            "first_divergence": first_divergence,
            "loss_run_a": loss_a, "loss_run_b": loss_b,
            "fingerprint": "sha256(dtype|shape|raw bytes) per tensor",
            "timing": "step time = host wall time of run A (forward, backward, update) after a "
                      "device synchronize; run B, the restore and the comparison are not timed",
            "parallelism": cfg["parallelism"], "checksum_mode": cfg["checksum_mode"],
            "inject_nondeterminism": inject, "model_label": cfg["model_label"],
            "backend": self.dist.backend,
            "config_scope": _config_scope(cfg),
        })
        return result

    def _compare_ranks(self, log: FingerprintLog, step: int, rank: int) -> Failure | None:
        import torch.distributed as dist

        # sharded gradients and parameters differ by design; activations and loss must not
        entries = [e for e in log.entries if not self.sharded or not e[0].startswith(("grad.", "param."))]
        gathered: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, entries)
        for other, theirs in enumerate(gathered):
            for mine, their in zip(entries, theirs, strict=False):
                if mine != their:
                    return Failure(
                        "rank_divergence",
                        f"step {step}: rank {rank} and rank {other} differ first at {mine[0]} "
                        "(same weights and data on every rank)",
                        {"step": step, "rank": rank, "other_rank": other, "tensor": mine[0],
                         "block": _block_of(mine[0]), "digest": mine[1], "other_digest": their[1]})
        return None

    def _capture(self, step: int, rank: int, *logs: FingerprintLog) -> None:
        if self.capture is None:
            return
        for run, log in zip("ab", logs, strict=False):
            self.capture.write(json.dumps({"step": step, "run": run, "rank": rank,
                                           "tensors": log.entries}) + "\n")
        self.capture.flush()

    def cleanup(self, ctx: WorkloadContext) -> None:
        capture = getattr(self, "capture", None)  # absent when setup failed early
        if capture is not None:
            capture.close()
        # DDP's reducer and FSDP's hooks hold the process group: let them go while it lives
        # (tearing them down after destroy_process_group can hang in the C++ destructors)
        for name in ("model",):
            if hasattr(self, name):
                delattr(self, name)
        import gc

        gc.collect()
        handle = getattr(self, "dist", None)
        if handle is not None:
            handle.close()


def _compare_runs(a: FingerprintLog, b: FingerprintLog, step: int, rank: int, inject: str
                  ) -> Failure | None:
    from aorta_tui.workloads._fingerprint import first_divergence

    d = first_divergence(a, b)
    if d is None:
        return None
    why = f" (injected fault: inject_nondeterminism={inject})" if inject != "none" else ""
    block = _block_of(d["tensor"])
    where = f"block {block}, tensor {d['tensor']}" if block is not None else f"tensor {d['tensor']}"
    return Failure(
        "nondeterministic_step",
        f"step {step} on rank {rank} is not bit-exact: the two runs first differ at {where}{why}",
        {"step": step, "rank": rank, "block": block, **d, "injected": inject != "none"},
    )


def _config_scope(cfg: dict[str, Any]) -> str:
    import hashlib

    keep = {k: v for k, v in cfg.items() if k not in ("capture_dir", "model_label")}
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _block_of(name: str) -> int | None:
    parts = name.split(".")
    for i, part in enumerate(parts[:-1]):
        if part == "blocks" and ascii_digits(parts[i + 1]):
            return int(parts[i + 1])
    return None


def _snapshot(model: torch.nn.Module, device: torch.device) -> dict[str, Any]:
    import torch

    state = {k: (v.to_local() if hasattr(v, "to_local") else v).detach().clone()
             for k, v in model.state_dict().items()}
    rng = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        rng["cuda"] = torch.cuda.get_rng_state(device)
    return {"state": state, "rng": rng}


def _restore(model: torch.nn.Module, snap: dict[str, Any], device: torch.device) -> None:
    import torch

    with torch.no_grad():
        for k, v in model.state_dict().items():
            local = v.to_local() if hasattr(v, "to_local") else v
            local.copy_(snap["state"][k])
    torch.set_rng_state(snap["rng"]["cpu"])
    if "cuda" in snap["rng"]:
        torch.cuda.set_rng_state(snap["rng"]["cuda"], device)


def _atomic_accumulate(module: torch.nn.Module, inputs: tuple[object, ...], output: torch.Tensor
                       ) -> torch.Tensor:
    """Sum the activations into 16 bins with ``scatter_add_`` (float32, many collisions per bin).

    GPUs accumulate colliding indices with atomics in whatever order the threads arrive, so
    the float sums can differ in their last bits from run to run; the bins are fed back into
    the activations so a difference reaches the fingerprints.
    """
    import torch

    flat = output.reshape(-1).float()
    index = torch.arange(flat.numel(), device=flat.device) % 16
    bins = torch.zeros(16, device=flat.device, dtype=torch.float32)
    bins.scatter_add_(0, index, flat * 1e3)
    return output + (bins[index] * 1e-6).to(output.dtype).view_as(output)
