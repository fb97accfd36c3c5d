"""Cryptographic fingerprints of tensors: SHA-256 over dtype, shape and the raw bytes.

A sum of bit patterns (what upstream AORTA computes) is blind to permuted elements and to
errors that cancel; a hash of the bytes changes when any bit of any element changes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # torch is imported where a workload runs, not to list it
    import torch


class _Hasher(Protocol):
    """A hashlib object, as update_with_tensor feeds it."""

    def update(self, data: bytes, /) -> None: ...


def update_with_tensor(h: _Hasher, tensor: torch.Tensor) -> None:
    """Feed dtype, shape and the raw bytes of ``tensor`` (any device, any dtype) into ``h``."""
    import torch

    t = tensor.detach()
    if hasattr(t, "to_local"):  # a DTensor (FSDP2): hash this rank's shard
        t = t.to_local()
    t = t.contiguous().cpu()
    h.update(f"{t.dtype}|{tuple(t.shape)}|".encode())
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())


def tensor_digest(tensor: torch.Tensor) -> str:
    h = hashlib.sha256()
    update_with_tensor(h, tensor)
    return h.hexdigest()


@dataclass
class FingerprintLog:
    """Ordered (name, digest) pairs of one run, in the order the tensors were produced."""

    entries: list[tuple[str, str]] = field(default_factory=list)

    def add(self, name: str, tensor: torch.Tensor) -> None:
        self.entries.append((name, tensor_digest(tensor)))

    def combined(self) -> str:
        h = hashlib.sha256()
        for name, digest in self.entries:
            h.update(f"{name}={digest};".encode())
        return h.hexdigest()


def first_divergence(a: FingerprintLog, b: FingerprintLog) -> dict[str, Any] | None:
    """The first entry where two logs differ (name or digest), or ``None`` when identical."""
    for i, (ea, eb) in enumerate(zip(a.entries, b.entries, strict=False)):
        if ea != eb:
            return {"index": i, "tensor": ea[0], "other_tensor": eb[0],
                    "digest_a": ea[1], "digest_b": eb[1]}
    if len(a.entries) != len(b.entries):
        i = min(len(a.entries), len(b.entries))
        return {"index": i, "tensor": "(one run produced more tensors)",
                "count_a": len(a.entries), "count_b": len(b.entries)}
    return None
