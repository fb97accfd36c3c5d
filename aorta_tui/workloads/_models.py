"""Small language models the reproducers train and serve: MLP, transformer, MoE transformer.

One model class covers every kind so training, inference and the determinism check exercise
the same code: token + position embeddings, ``num_layers`` residual blocks, a final norm and
an output head. A block is attention (causal for decoders, bidirectional for encoders; none
for the MLP kind) plus a feed-forward network or a top-1 mixture of experts.

Attention can read and write a slot-based KV cache (:class:`KVCache`): one slot per active
request, filled by prefill and extended one position per decode step — a real cache, kept
small, not a paged serving stack. This module imports torch and is only imported by workload
methods.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

MODEL_KINDS = (
    "mlp", "transformer", "moe", "moe_transformer", "encoder_transformer", "decoder_transformer",
)


@dataclass(frozen=True)
class ModelShape:
    kind: str  # one of MODEL_KINDS
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    ffn_size: int
    max_seq_len: int
    num_experts: int = 1
    dropout: float = 0.0  # consumes the RNG in training, so an RNG restore is put to the test

    def __post_init__(self) -> None:
        if self.has_attention and self.hidden_size % self.num_heads:
            from aorta_tui.core.errors import UsageError

            raise UsageError(
                f"workload_config: hidden_size {self.hidden_size} is not divisible by num_heads "
                f"{self.num_heads}",
                hint=f"e.g. num_heads: {next(h for h in (8, 4, 2, 1) if self.hidden_size % h == 0)}",
            )

    @property
    def has_attention(self) -> bool:
        return self.kind != "mlp"

    @property
    def causal(self) -> bool:
        return self.kind != "encoder_transformer"

    @property
    def experts(self) -> int:
        if self.kind in ("moe", "moe_transformer"):
            return max(self.num_experts, 2)
        return max(self.num_experts, 1)


class KVCache:
    """Keys and values per layer for ``slots`` concurrent requests of up to ``max_len`` tokens."""

    def __init__(self, shape: ModelShape, slots: int, max_len: int, device: torch.device,
                 dtype: torch.dtype) -> None:
        head_dim = shape.hidden_size // shape.num_heads
        size = (slots, shape.num_heads, max_len, head_dim)
        self.keys = [torch.zeros(size, device=device, dtype=dtype) for _ in range(shape.num_layers)]
        self.values = [torch.zeros(size, device=device, dtype=dtype) for _ in range(shape.num_layers)]
        self.max_len = max_len

    @property
    def bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int, causal: bool) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden_size {hidden} is not divisible by num_heads {heads}")
        self.heads = heads
        self.causal = causal
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor, key_valid: torch.Tensor | None = None,
                cache: KVCache | None = None, layer: int = 0, slots: torch.Tensor | None = None,
                start: torch.Tensor | None = None) -> torch.Tensor:
        b, t, h = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        if cache is None:
            keys, values = k, v
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device)
            if self.causal:
                mask = torch.tril(mask)
            mask = mask.expand(b, 1, t, t)
            if key_valid is not None:
                mask = mask & key_valid[:, None, None, :]
        else:
            assert slots is not None and start is not None
            pos = start[:, None] + torch.arange(t, device=x.device)[None, :]  # [b, t]
            kc, vc = cache.keys[layer], cache.values[layer]
            kc[slots[:, None], :, pos] = k.permute(0, 2, 1, 3)
            vc[slots[:, None], :, pos] = v.permute(0, 2, 1, 3)
            keys, values = kc[slots], vc[slots]
            key_pos = torch.arange(cache.max_len, device=x.device)
            mask = (key_pos[None, None, :] <= pos[:, :, None])[:, None, :, :]
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        return self.proj(out.transpose(1, 2).reshape(b, t, h))


class FeedForward(nn.Module):
    def __init__(self, hidden: int, ffn: int) -> None:
        super().__init__()
        self.up = nn.Linear(hidden, ffn)
        self.down = nn.Linear(ffn, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class TopOneMoE(nn.Module):
    """Each token goes to the expert its router scores highest, scaled by that score."""

    def __init__(self, hidden: int, ffn: int, experts: int) -> None:
        super().__init__()
        self.router = nn.Linear(hidden, experts)
        self.experts = nn.ModuleList(FeedForward(hidden, ffn) for _ in range(experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        probs = F.softmax(self.router(flat).float(), dim=-1)
        gate, choice = probs.max(dim=-1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            idx = (choice == e).nonzero(as_tuple=True)[0]
            # every expert runs (on zero tokens if need be) so DDP sees a gradient for all
            out[idx] = expert(flat[idx]) * gate[idx, None].to(flat.dtype)
        return out.view_as(x)


class Block(nn.Module):
    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        h = shape.hidden_size
        self.dropout = shape.dropout
        self.attn_norm = nn.LayerNorm(h) if shape.has_attention else None
        self.attn = Attention(h, shape.num_heads, shape.causal) if shape.has_attention else None
        self.ffn_norm = nn.LayerNorm(h)
        self.ffn: nn.Module = (TopOneMoE(h, shape.ffn_size, shape.experts) if shape.experts > 1
                               else FeedForward(h, shape.ffn_size))

    def forward(self, x: torch.Tensor, key_valid: torch.Tensor | None = None,
                cache: KVCache | None = None, layer: int = 0, slots: torch.Tensor | None = None,
                start: torch.Tensor | None = None) -> torch.Tensor:
        p = self.dropout if self.training else 0.0
        if self.attn is not None and self.attn_norm is not None:
            a = self.attn(self.attn_norm(x), key_valid, cache, layer, slots, start)
            x = x + F.dropout(a, p) if p else x + a
        f = self.ffn(self.ffn_norm(x))
        return x + F.dropout(f, p) if p else x + f


class TinyLM(nn.Module):
    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.shape = shape
        self.embed = nn.Embedding(shape.vocab_size, shape.hidden_size)
        self.pos = nn.Embedding(shape.max_seq_len, shape.hidden_size)
        self.blocks = nn.ModuleList(Block(shape) for _ in range(shape.num_layers))
        self.norm = nn.LayerNorm(shape.hidden_size)
        self.head = nn.Linear(shape.hidden_size, shape.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor, key_valid: torch.Tensor | None = None,
                cache: KVCache | None = None, slots: torch.Tensor | None = None,
                start: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``[batch, time, vocab]``. With ``cache``, ``start`` is each row's first position."""
        t = tokens.shape[1]
        if start is None:
            positions = torch.arange(t, device=tokens.device)[None, :]
        else:
            positions = start[:, None] + torch.arange(t, device=tokens.device)[None, :]
        x = self.embed(tokens) + self.pos(positions)
        for i, block in enumerate(self.blocks):
            x = block(x, key_valid, cache, i, slots, start)
        return self.head(self.norm(x))


def build_model(shape: ModelShape, device: torch.device, dtype: torch.dtype, seed: int) -> TinyLM:
    """The same seed gives the same weights on every rank and every trial."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TinyLM(shape)
    return model.to(device=device, dtype=dtype)


def synthetic_tokens(batch: int, seq_len: int, vocab: int, seed: int,
                     device: torch.device) -> torch.Tensor:
    """A learnable sequence: each row follows ``t[k+1] = (a * t[k] + c) mod vocab``.

    Training on it makes the loss fall, so the trajectory says something; the start tokens
    come from ``seed``.
    """
    g = torch.Generator().manual_seed(seed)
    first = torch.randint(0, vocab, (batch, 1), generator=g)
    rows = [first]
    for _ in range(seq_len - 1):
        rows.append((rows[-1] * 5 + 3) % vocab)
    return torch.cat(rows, dim=1).to(device)
