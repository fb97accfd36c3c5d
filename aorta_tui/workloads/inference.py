"""``inference``: offline batches or a continuous-batching scheduler over a small LM.

Offline (``mode: offline_batch``): each step serves one batch of ``request.batch_size``
requests: a batched prefill of the prompts, then ``request.generate_tokens`` greedy decode
steps. Continuous (``mode: continuous_batch``): ``request.batch_size`` requests arrive by
``serving.continuous_batch.arrival_pattern``; each step is one scheduler tick that admits
arrived requests while fewer than ``max_active_requests`` are active, prefills the admitted
ones, decodes one token for the others and retires the finished ones.

With ``serving.kv_cache`` the decoder keeps each active request's keys and values in a slot of
a real (small, non-paged) KV cache and decodes one position per step; without it every decode
step recomputes the whole history. Encoders have no decode phase: they serve prefill only.

The logits the loop produces are hashed (SHA-256 of the raw bytes, per request, in token
order) into ``metrics["logits_fingerprint"]``. The model, the prompts and the arrival schedule
come from ``seed``, so every trial of a cell must produce the same fingerprint on a
deterministic stack; :func:`compare_fingerprints` compares them across the trials of a cell.
``perturb_logits`` adds noise from an unseeded generator to the logits (a NaN magnitude writes
NaNs), which that comparison (or the NaN check) must catch.
"""

from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING, Any, ClassVar

from aorta_tui.core.errors import UsageError
from aorta_tui.registry.workload import (
    ConfigField,
    Failure,
    LaunchSpec,
    Workload,
    WorkloadContext,
    WorkloadResult,
)
from aorta_tui.workloads._common import device_field, dtype_field

if TYPE_CHECKING:  # torch is imported where a workload runs, not to list it
    import torch

REQUEST_FIELDS = (
    ConfigField("batch_size", "int", 4,
                "offline: requests per batch; continuous: requests served in total", min=1),
    ConfigField("prompt_len", "int", 16, min=1),
    ConfigField("generate_tokens", "int", 8, "greedy tokens generated per request", min=0),
)
MODEL_FIELDS = (
    ConfigField("kind", "str", "decoder_transformer",
                choices=("mlp", "encoder_transformer", "decoder_transformer")),
    ConfigField("hidden_size", "int", 64, min=8),
    ConfigField("num_layers", "int", 2, min=1),
    ConfigField("num_heads", "int", 4, "attention heads (must divide hidden_size)", min=1),
    ConfigField("ffn_size", "int", 128, min=1),
    ConfigField("vocab_size", "int", 256, min=2),
    ConfigField("num_experts", "int", 1, "more than 1: top-1 MoE feed-forward", min=1),
    ConfigField("moe", "dict", {}, "upstream spelling of num_experts", fields=(
        ConfigField("num_experts", "int", None, min=1),
        ConfigField("enabled", "bool", None),
    )),
)
CONTINUOUS_FIELDS = (
    ConfigField("enabled", "bool", False, "same as mode: continuous_batch"),
    ConfigField("max_active_requests", "int", 4, "requests decoded together at most", min=1),
    ConfigField("arrival_pattern", "str", "fixed",
                "fixed: one request per tick; burst: all at tick 1; poisson: "
                "Poisson(arrival_rate) per tick from seed", choices=("fixed", "burst", "poisson")),
    ConfigField("arrival_rate", "float", 1.0, "mean arrivals per tick (poisson)", min=0.0),
)
SERVING_FIELDS = (
    ConfigField("kv_cache", "bool", True, "keep keys/values per request (else recompute)"),
    ConfigField("continuous_batch", "dict", {}, fields=CONTINUOUS_FIELDS),
)
CHECK_FIELDS = (
    ConfigField("fail_on_nan_logits", "bool", True, "NaN logits are a failure"),
    ConfigField("fail_on_nonfinite_output", "bool", True, "infinite logits are a failure"),
    ConfigField("compare_logits_checksum", "bool", True,
                "compare the logits fingerprint across the trials of a cell"),
)


class Inference(Workload):
    name: ClassVar[str] = "inference"
    description: ClassVar[str] = (
        "offline and continuous-batching serving of a small LM with a KV cache; prefill/decode "
        "latency, tokens/s, and a logits fingerprint compared across trials"
    )
    launch: ClassVar[LaunchSpec] = LaunchSpec(mode="single", min_world_size=1)
    hint: ClassVar[str] = (
        "logits that differ between trials of one cell: nondeterministic kernels or a numerics "
        "change (try deterministic / tf32_off); NaN logits: a numerics fault"
    )
    preload: ClassVar[tuple[str, ...]] = (
        "torch.nn.functional", "aorta_tui.workloads._common", "aorta_tui.workloads._models",
        "aorta_tui.registry.switches",
    )
    config_schema: ClassVar[tuple[ConfigField, ...]] = (
        ConfigField("mode", "str", "offline_batch", choices=("offline_batch", "continuous_batch")),
        ConfigField("seed", "int", 1234, "weights, prompts and arrivals (same in every trial)"),
        device_field(),
        dtype_field("bfloat16"),
        ConfigField("warmup_steps", "int", 1, "untimed prefill passes before measuring", min=0),
        ConfigField("request", "dict", {}, fields=REQUEST_FIELDS),
        ConfigField("model", "dict", {}, fields=MODEL_FIELDS),
        ConfigField("serving", "dict", {}, fields=SERVING_FIELDS),
        ConfigField("checks", "dict", {}, fields=CHECK_FIELDS),
        ConfigField("perturb_logits", "float", 0.0,
                    "fault injection: add unseeded noise of this size to the logits (.nan "
                    "writes NaNs: Python API only, since recipes refuse non-finite numbers); "
                    "0 = off", min=0.0, nan_ok=True),
    )

    @classmethod
    def cross_trial_checks(cls, results: list[dict[str, Any]]) -> list[Failure]:
        return compare_fingerprints(results)

    # -- set-up --------------------------------------------------------------------------
    def setup(self, ctx: WorkloadContext) -> None:
        from aorta_tui.registry.switches import apply_switches
        from aorta_tui.workloads._common import pick_device, torch_dtype
        from aorta_tui.workloads._models import ModelShape, build_model

        self.applied = apply_switches(ctx.switches)
        cfg = ctx.config
        self.continuous = (cfg["mode"] == "continuous_batch"
                           or cfg["serving"]["continuous_batch"]["enabled"])
        m, req = cfg["model"], cfg["request"]
        if self.continuous and m["kind"] == "encoder_transformer":
            raise UsageError(
                "workload_config.model.kind encoder_transformer has no decode phase, so it "
                "cannot be served with continuous batching",
                hint="use mode: offline_batch, or model.kind: decoder_transformer",
            )
        if self.continuous and req["generate_tokens"] < 1:
            raise UsageError("workload_config.request.generate_tokens must be >= 1 for "
                             "continuous batching", hint="e.g. generate_tokens: 8")
        experts = m["moe"]["num_experts"] or m["num_experts"]
        if m["moe"]["enabled"] is False:
            experts = 1
        self.shape = ModelShape(
            kind=m["kind"], vocab_size=m["vocab_size"], hidden_size=m["hidden_size"],
            num_layers=m["num_layers"], num_heads=m["num_heads"], ffn_size=m["ffn_size"],
            max_seq_len=req["prompt_len"] + req["generate_tokens"], num_experts=experts)
        self.dev = pick_device(cfg["device"], ctx.local_rank)
        self.dtype = torch_dtype(cfg["dtype"])
        self.model = build_model(self.shape, self.dev.device, self.dtype, cfg["seed"]).eval()
        # an encoder serves one pass per request and the MLP has no attention: nothing to cache
        self.use_cache = cfg["serving"]["kv_cache"] and m["kind"] == "decoder_transformer"
        self.notes: list[str] = []
        if cfg["serving"]["kv_cache"] and not self.use_cache:
            self.notes.append(f"model.kind {m['kind']} keeps no KV cache (no decode attention)")
        if m["kind"] == "encoder_transformer" and req["generate_tokens"]:
            self.notes.append("encoder_transformer serves prefill only: generate_tokens ignored")

    # -- the model calls -----------------------------------------------------------------
    def _prompts(self, n: int, seed: int) -> torch.Tensor:
        import torch

        g = torch.Generator().manual_seed(seed)
        plen = self.cfg["request"]["prompt_len"]
        return torch.randint(0, self.shape.vocab_size, (n, plen), generator=g).to(self.dev.device)

    def _full_forward(self, histories: list[Any]) -> torch.Tensor:
        """Logits at each history's last token, recomputing everything (no cache)."""
        import torch

        lengths = torch.tensor([len(h) for h in histories], device=self.dev.device)
        width = int(lengths.max())
        tokens = torch.zeros(len(histories), width, dtype=torch.long, device=self.dev.device)
        for i, h in enumerate(histories):
            tokens[i, : len(h)] = h
        valid = torch.arange(width, device=self.dev.device)[None, :] < lengths[:, None]
        logits = self.model(tokens, key_valid=valid)
        return logits[torch.arange(len(histories), device=self.dev.device), lengths - 1]

    def _cached_forward(self, tokens: torch.Tensor, slots: list[int], start: list[int]
                        ) -> torch.Tensor:
        import torch

        s = torch.tensor(slots, device=self.dev.device)
        st = torch.tensor(start, device=self.dev.device)
        return self.model(tokens, cache=self.cache, slots=s, start=st)[:, -1]

    def _perturb(self, logits: torch.Tensor) -> torch.Tensor:
        import torch

        size = self.cfg["perturb_logits"]
        if size == 0.0:
            return logits
        if math.isnan(size):
            out = logits.clone()
            out[..., 0] = math.nan
            return out
        g = torch.Generator(device=logits.device)
        g.seed()  # unseeded: a different draw in every trial, as a nondeterministic kernel is
        noise = torch.randn(logits.shape, generator=g, device=logits.device, dtype=torch.float32)
        return logits + (size * noise).to(logits.dtype)

    # -- the loops -----------------------------------------------------------------------
    def run(self, ctx: WorkloadContext) -> WorkloadResult:
        import torch

        self.cfg = ctx.config
        self.stats = _Stats()
        self.result = WorkloadResult(device=self.dev.label, applied_switches=list(self.applied),
                                     notes=list(self.notes))
        with torch.inference_mode():
            for i in range(self.cfg["warmup_steps"]):
                self.model(self._prompts(self.cfg["request"]["batch_size"], -1 - i))
            if self.continuous:
                self._continuous(ctx)
            else:
                self._offline(ctx)
        self.result.metrics.update(self.stats.metrics(self.cfg, self.continuous))
        if self.use_cache and getattr(self, "cache", None) is not None:
            self.result.metrics["kv_cache_bytes"] = self.cache.bytes
        else:
            self.result.metrics["kv_cache_bytes"] = None
            self.result.metrics["kv_cache_bytes_reason"] = (
                f"model.kind {self.shape.kind} keeps no KV cache" if self.cfg["serving"]["kv_cache"]
                else "serving.kv_cache is off")
        return self.result

    def _offline(self, ctx: WorkloadContext) -> None:
        import torch

        from aorta_tui.workloads._common import StepTimer

        req = self.cfg["request"]
        n, plen = req["batch_size"], req["prompt_len"]
        encoder = self.shape.kind == "encoder_transformer"
        gen = 0 if encoder else req["generate_tokens"]
        if self.use_cache:
            from aorta_tui.workloads._models import KVCache

            self.cache = KVCache(self.shape, n, plen + gen, self.dev.device, self.dtype)
        for step in range(1, ctx.steps + 1):
            prompts = self._prompts(n, self.cfg["seed"] + step)
            ids = [(step - 1) * n + i for i in range(n)]
            with StepTimer(self.dev.device) as total:
                with StepTimer(self.dev.device) as t:
                    if encoder:
                        logits = self.model(prompts)  # every position's logits
                    elif self.use_cache:
                        logits = self._cached_forward(prompts, list(range(n)), [0] * n)
                    else:
                        logits = self._full_forward(list(prompts))
                    logits = self._perturb(logits)
                self.stats.prefill_s.append(t.seconds)
                self._observe(ids, logits, step)
                histories = list(prompts)
                for k in range(gen):
                    nxt = logits.float().argmax(dim=-1)
                    histories = [torch.cat([h, nxt[i : i + 1]]) for i, h in enumerate(histories)]
                    with StepTimer(self.dev.device) as t:
                        if self.use_cache:
                            logits = self._cached_forward(nxt[:, None], list(range(n)),
                                                          [plen + k] * n)
                        else:
                            logits = self._full_forward(histories)
                        logits = self._perturb(logits)
                    self.stats.decode_s.append(t.seconds)
                    self.stats.decode_tokens += n
                    self._observe(ids, logits, step)
            self.stats.generated += n * gen
            self.stats.prompt_tokens += n * plen
            self.stats.completed += n
            self._record_step(ctx, step, total.seconds)
            if self.result.failures:
                break

    def _continuous(self, ctx: WorkloadContext) -> None:
        import torch

        from aorta_tui.workloads._common import StepTimer
        from aorta_tui.workloads._models import KVCache

        req, cb = self.cfg["request"], self.cfg["serving"]["continuous_batch"]
        total_requests, plen, gen = req["batch_size"], req["prompt_len"], req["generate_tokens"]
        max_active = cb["max_active_requests"]
        arrivals = _arrival_ticks(total_requests, cb["arrival_pattern"], cb["arrival_rate"],
                                  self.cfg["seed"])
        prompts = self._prompts(total_requests, self.cfg["seed"])
        if self.use_cache:
            self.cache = KVCache(self.shape, max_active, plen + gen, self.dev.device, self.dtype)
        queue: list[int] = []
        active: dict[int, dict[str, Any]] = {}  # request id -> slot, history, generated
        free_slots = list(range(max_active))
        next_arrival = 0
        for tick in range(1, ctx.steps + 1):
            while next_arrival < total_requests and arrivals[next_arrival] <= tick:
                queue.append(next_arrival)
                next_arrival += 1
            admitted = []
            while queue and free_slots:
                rid = queue.pop(0)
                active[rid] = {"slot": free_slots.pop(0), "history": prompts[rid], "done": 0}
                admitted.append(rid)
            running = [r for r in active if r not in admitted]
            with StepTimer(self.dev.device) as total:
                if admitted:
                    with StepTimer(self.dev.device) as t:
                        if self.use_cache:
                            logits = self._cached_forward(
                                prompts[admitted], [active[r]["slot"] for r in admitted],
                                [0] * len(admitted))
                        else:
                            logits = self._full_forward([active[r]["history"] for r in admitted])
                        logits = self._perturb(logits)
                    self.stats.prefill_s.append(t.seconds)
                    self.stats.prompt_tokens += len(admitted) * plen
                    self._advance(admitted, logits, active, tick)
                if running:
                    with StepTimer(self.dev.device) as t:
                        if self.use_cache:
                            last = torch.stack([active[r]["history"][-1:] for r in running])
                            logits = self._cached_forward(
                                last, [active[r]["slot"] for r in running],
                                [len(active[r]["history"]) - 1 for r in running])
                        else:
                            logits = self._full_forward([active[r]["history"] for r in running])
                        logits = self._perturb(logits)
                    self.stats.decode_s.append(t.seconds)
                    self.stats.decode_tokens += len(running)
                    self._advance(running, logits, active, tick)
            self.stats.max_active = max(self.stats.max_active, len(active))
            for rid in [r for r, s in active.items() if s["done"] >= gen]:
                free_slots.append(active.pop(rid)["slot"])
                self.stats.completed += 1
            self._record_step(ctx, tick, total.seconds)
            if self.result.failures:
                break
            if next_arrival == total_requests and not queue and not active:
                self.result.notes.append(f"all {total_requests} requests done after {tick} ticks")
                break
        self.stats.unfinished = total_requests - self.stats.completed

    def _advance(self, rids: list[int], logits: torch.Tensor, active: dict[int, Any], tick: int) -> None:
        """Observe the logits, append each request's greedy token (only while it still needs one)."""
        import torch

        self._observe(rids, logits, tick)
        nxt = logits.float().argmax(dim=-1)
        for i, r in enumerate(rids):
            s = active[r]
            s["done"] += 1
            self.stats.generated += 1
            s["history"] = torch.cat([s["history"], nxt[i : i + 1]])

    def _observe(self, rids: list[int], logits: torch.Tensor, step: int) -> None:
        """Checks and fingerprint: outside the prefill/decode timers (it copies to the host),
        inside the step's."""
        import torch

        from aorta_tui.workloads._fingerprint import update_with_tensor

        checks = self.cfg["checks"]
        host = logits.detach().cpu()
        if checks["fail_on_nan_logits"] and bool(torch.isnan(host).any()):
            self._fail("nan_logits", f"NaN logits at step {step}", step)
        elif checks["fail_on_nonfinite_output"] and not bool(torch.isfinite(host).all()):
            self._fail("nonfinite_output", f"infinite logits at step {step}", step)
        for i, r in enumerate(rids):
            update_with_tensor(self.stats.hashers.setdefault(r, hashlib.sha256()), host[i])

    def _fail(self, code: str, message: str, step: int) -> None:
        if any(f.code == code for f in self.result.failures):
            return  # the first occurrence is the one worth reporting
        size = self.cfg["perturb_logits"]
        injected = size != 0.0
        why = f" (injected fault: perturb_logits={size})" if injected else ""
        self.result.failures.append(Failure(code, message + why,
                                            {"step": step, "injected": injected}))

    def _record_step(self, ctx: WorkloadContext, step: int, seconds: float) -> None:
        self.result.step_times_s.append(seconds)
        if ctx.on_step:
            ctx.on_step(step, seconds)


class _Stats:
    def __init__(self) -> None:
        self.prefill_s: list[float] = []
        self.decode_s: list[float] = []
        self.hashers: dict[int, Any] = {}
        self.generated = 0
        self.prompt_tokens = 0
        # one new token per request per decode call: the rates divide these, not ``generated``,
        # because under continuous batching each request's first token comes from its prefill
        self.decode_tokens = 0
        self.completed = 0
        self.unfinished = 0
        self.max_active = 0

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for rid in sorted(self.hashers):
            h.update(f"{rid}:{self.hashers[rid].hexdigest()};".encode())
        return h.hexdigest()

    def metrics(self, cfg: dict[str, Any], continuous: bool) -> dict[str, Any]:
        from aorta_tui.core.stats import percentile_ms as ms

        decode_time = sum(self.decode_s)
        prefill_time = sum(self.prefill_s)
        out: dict[str, Any] = {
            "mode": "continuous_batch" if continuous else "offline_batch",
            "model_kind": cfg["model"]["kind"],
            "prefill_ms_p50": ms(self.prefill_s, 50), "prefill_ms_p99": ms(self.prefill_s, 99),
            "decode_ms_p50": ms(self.decode_s, 50), "decode_ms_p99": ms(self.decode_s, 99),
            "prefill_tokens_per_s": (self.prompt_tokens / prefill_time) if prefill_time else None,
            "decode_tokens_per_s": (self.decode_tokens / decode_time) if decode_time else None,
            "tokens_per_s": ((self.decode_tokens + self.prompt_tokens)
                             / (decode_time + prefill_time) if decode_time + prefill_time
                             else None),
            "decode_tokens": self.decode_tokens,
            "tokens_generated": self.generated,
            "requests_completed": self.completed,
            "logits_fingerprint": self.fingerprint() if self.hashers else None,
            "logits_fingerprint_scope": _scope(cfg),
            "logits_fingerprint_compare": cfg["checks"]["compare_logits_checksum"],
            "perturb_logits": cfg["perturb_logits"] if not math.isnan(cfg["perturb_logits"])
            else "nan",
            "timing": "host wall time around device-synchronised prefill/decode calls",
        }
        if not self.decode_s:
            out["decode_ms_reason"] = (
                "no decode calls (encoder, generate_tokens: 0, or generate_tokens: 1 under "
                "continuous batching, where the prefill call yields the only token)")
            # the same cause leaves the decode rate without a time to divide by
            out["decode_tokens_per_s_reason"] = out["decode_ms_reason"]
        if continuous:
            out["requests_unfinished"] = self.unfinished
            out["max_active_observed"] = self.max_active
        return out


def _scope(cfg: dict[str, Any]) -> str:
    """What the fingerprint depends on besides the stack: the config minus the fault knob."""
    import json

    keep = {k: v for k, v in cfg.items() if k not in ("perturb_logits", "warmup_steps")}
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _arrival_ticks(n: int, pattern: str, rate: float, seed: int) -> list[int]:
    """The tick (1-based) at which each request arrives, in request order."""
    import random

    if pattern == "burst":
        return [1] * n
    if pattern == "fixed":
        return list(range(1, n + 1))
    rng = random.Random(seed)
    ticks: list[int] = []
    tick = 1
    while len(ticks) < n:
        # Poisson(rate) arrivals this tick, by Knuth's product of uniforms
        limit, k, p = math.exp(-rate), 0, rng.random()
        while p > limit:
            k += 1
            p *= rng.random()
        ticks.extend([tick] * min(k, n - len(ticks)))
        tick += 1
    return ticks


def compare_fingerprints(results: list[dict[str, Any]]) -> list[Failure]:
    """Compare ``metrics.logits_fingerprint`` across the trials of one cell.

    ``results`` are the trials' result dicts (``WorkloadResult.to_dict()``), in trial order.
    Trials without a fingerprint (crashed, or the check turned off) are skipped; trials are
    only compared with trials of the same fingerprint scope (the same config). Returns one
    failure per scope whose trials disagree, naming which trials hold which fingerprint.
    """
    groups: dict[str, dict[str, list[int]]] = {}
    perturbed = set()
    for i, r in enumerate(results):
        m = (r or {}).get("metrics") or {}
        fp = m.get("logits_fingerprint")
        if not fp or m.get("logits_fingerprint_compare") is False:
            continue
        groups.setdefault(str(m.get("logits_fingerprint_scope")), {}).setdefault(fp, []).append(i)
        if m.get("perturb_logits") not in (None, 0, 0.0):
            perturbed.add(str(m.get("perturb_logits")))
    failures = []
    for scope, by_fp in groups.items():
        if len(by_fp) < 2:
            continue
        trials = sum(len(v) for v in by_fp.values())
        layout = "; ".join(f"trials {v} -> {fp[:12]}" for fp, v in
                           sorted(by_fp.items(), key=lambda kv: kv[1][0]))
        why = (f" (injected fault: perturb_logits={', '.join(sorted(perturbed))})"
               if perturbed else "")
        failures.append(Failure(
            "logits_fingerprint_mismatch",
            f"logits differ across trials of this cell: {len(by_fp)} distinct fingerprints "
            f"over {trials} trials ({layout}){why}",
            {"scope": scope, "fingerprints": {fp: v for fp, v in by_fp.items()},
             "injected": bool(perturbed)},
        ))
    return failures
