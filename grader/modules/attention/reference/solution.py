"""Trusted reference solution of TinyTorch module 12 (Attention).

Runs on the course runtime in `reference/runtime` (Tensor, Linear, Softmax with autograd). Masks
follow the course: 1 allows a key, 0 blocks it; a blocked score becomes -inf before the softmax.
The probes only give binary masks that leave every query at least one key, where the older
generation's additive -1e9 and the newer one's -inf agree exactly.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from tinytorch.core.activations import Softmax
from tinytorch.core.layers import Linear
from tinytorch.core.tensor import Tensor

__all__ = ["MultiHeadAttention", "scaled_dot_product_attention"]


def scaled_dot_product_attention(Q: Tensor, K: Tensor, V: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k), blocked keys at -inf) V over the last two axes; returns
    (output, attention_weights)."""
    d_k = Q.shape[-1]
    scores = Q.matmul(K.transpose(-2, -1)) * (1.0 / math.sqrt(d_k))
    if mask is not None:
        keep = np.asarray(mask.data if isinstance(mask, Tensor) else mask)
        if np.any((keep != 0) & (keep != 1)):
            raise ValueError("an attention mask holds only 0 (blocked) and 1 (allowed)")
        keep = np.broadcast_to(keep, scores.shape)
        if np.any(keep.sum(axis=-1) == 0):
            raise ValueError("every query needs at least one allowed key")
        scores = scores.masked_fill(keep == 0, float("-inf"))
    weights = Softmax()(scores, dim=-1)
    return weights.matmul(V), weights


class MultiHeadAttention:
    """num_heads attention heads of embed_dim // num_heads each, between four Linear maps."""

    def __init__(self, embed_dim: int, num_heads: int) -> None:
        for name, value in (("embed_dim", embed_dim), ("num_heads", num_heads)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim={embed_dim} is not a multiple of num_heads={num_heads}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = Linear(embed_dim, embed_dim)
        self.k_proj = Linear(embed_dim, embed_dim)
        self.v_proj = Linear(embed_dim, embed_dim)
        self.out_proj = Linear(embed_dim, embed_dim)

    def _heads(self, t: Tensor, batch: int, seq: int) -> Tensor:
        """(batch, seq, embed_dim) -> (batch, heads, seq, head_dim)."""
        return t.reshape(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        batch, seq, width = x.shape
        if width != self.embed_dim:
            raise ValueError(f"the input's last axis is {width}, not embed_dim={self.embed_dim}")
        q = self._heads(self.q_proj.forward(x), batch, seq)
        k = self._heads(self.k_proj.forward(x), batch, seq)
        v = self._heads(self.v_proj.forward(x), batch, seq)
        if mask is not None and len(mask.shape) == 3:
            mask = Tensor(np.asarray(mask.data).reshape(mask.shape[0], 1, mask.shape[1], mask.shape[2]))
        attended, _ = scaled_dot_product_attention(q, k, v, mask)
        merged = attended.transpose(1, 2).reshape(batch, seq, self.embed_dim)
        return self.out_proj.forward(merged)

    def __call__(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        return self.forward(x, mask)

    def parameters(self) -> list[Any]:
        """q, k, v and output projections' [weight, bias], in that order."""
        return [p for layer in (self.q_proj, self.k_proj, self.v_proj, self.out_proj) for p in layer.parameters()]
