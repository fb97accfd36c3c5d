"""A real training loop and an inference decode loop, none of aorta-tui's code (issue 34).

Training: a 6-layer transformer encoder (d_model 512, 8 heads, ff 2048), AdamW, bf16 autocast,
batch 32 x 128 tokens: ~450 kernel launches per step, launch-bound on an H200. Decode: the same
kind of model (4 layers, causal mask) generating tokens greedily one at a time with no KV cache,
``argmax().item()`` per token (a sync per step, as a serving loop has). Every step is timed on
the host with a synchronize at its end; one JSON line on stdout:
``{"train_step_ms": [...], "decode_step_ms": [...], ...}``.

    python3 train_loop.py [--train-steps 60] [--decode-steps 64] [--warmup 15]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn


def train_steps(n: int, warmup: int) -> list[float]:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True, dropout=0.1)
    model = nn.Sequential(nn.Embedding(8192, 512), nn.TransformerEncoder(layer, 6, enable_nested_tensor=False),
                          nn.Linear(512, 8192)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, 8192, (32, 128), device="cuda")
    y = torch.randint(0, 8192, (32, 128), device="cuda")
    out = []
    for i in range(warmup + n):
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if i >= warmup:
            out.append((time.perf_counter() - t0) * 1e3)
    return out


@torch.no_grad()
def decode_steps(n: int, warmup: int) -> list[float]:
    torch.manual_seed(1)
    layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True, dropout=0.0)
    emb, body, head = (nn.Embedding(8192, 512).cuda(), nn.TransformerEncoder(layer, 4).cuda().eval(),
                       nn.Linear(512, 8192).cuda())
    tokens = torch.randint(0, 8192, (1, 16), device="cuda")
    out = []
    for i in range(warmup + n):
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1], device="cuda")
            logits = head(body(emb(tokens), mask=mask, is_causal=True)[:, -1])
        nxt = int(logits.argmax(-1).item())
        tokens = torch.cat([tokens[:, -63:], torch.tensor([[nxt]], device="cuda")], dim=1)
        if i >= warmup:
            out.append((time.perf_counter() - t0) * 1e3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--train-steps", type=int, default=60)
    ap.add_argument("--decode-steps", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=15)
    a = ap.parse_args()
    t0 = time.monotonic_ns()
    tr = train_steps(a.train_steps, a.warmup) if a.train_steps else []
    t1 = time.monotonic_ns()
    de = decode_steps(a.decode_steps, a.warmup) if a.decode_steps else []
    t2 = time.monotonic_ns()
    print(json.dumps({"train_step_ms": tr, "decode_step_ms": de, "train_steps": a.train_steps,
                      "decode_steps": a.decode_steps, "warmup": a.warmup,
                      "train_wall_ns": t1 - t0, "decode_wall_ns": t2 - t1}), flush=True)


if __name__ == "__main__":
    main()
