"""Trusted reference solution of TinyTorch module 11 (Embeddings), answering both generations' probes.

Written to the newer generation's API, which holds the older one: `start_pos` on PositionalEncoding
and EmbeddingLayer, and the lookup's graph node a Function of its own with `backward(grad_output)`
(the judge reads a submission's generation from both, grader/modules/embeddings/judge/api.py).
Runs on the course runtime in `reference/runtime` (or any TinyTorch with the same API). Weights are
drawn from the global `np.random`, as in the course; probes overwrite them when they need values.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from tinytorch.core.tensor import Function, Tensor

__all__ = ["Embedding", "EmbeddingLayer", "PositionalEncoding", "create_sinusoidal_embeddings"]

_POS_ENCODINGS = ("learned", "sinusoidal", None)


def _check_start(start_pos: Any, seq_len: int, max_seq_len: int) -> int:
    """Validate that positions start_pos .. start_pos+seq_len-1 exist; return start_pos."""
    if isinstance(start_pos, bool) or not isinstance(start_pos, (int, np.integer)) or start_pos < 0:
        raise ValueError(f"start_pos must be a non-negative integer, got {start_pos!r}")
    if start_pos + seq_len > max_seq_len:
        raise ValueError(
            f"positions {start_pos}..{start_pos + seq_len - 1} exceed max_seq_len={max_seq_len}"
        )
    return int(start_pos)


class EmbeddingFunction(Function):  # type: ignore[misc]  # the runtime is untyped
    """The lookup's graph node: backward scatters the upstream rows into the rows that were read."""

    def __init__(self, weight: Tensor, indices: np.ndarray) -> None:
        Function.__init__(self, weight)
        self.indices = indices

    def backward(self, grad_output: np.ndarray) -> tuple[np.ndarray | None]:
        """`(grad_weight,)`: zeros except the rows read, each the sum of its reads' upstream rows."""
        (weight,) = self.inputs  # the node exists only when the weight requires grad (Embedding.forward)
        ids = np.asarray(self.indices).astype(int).ravel()
        rows = np.asarray(grad_output).reshape((ids.size, *weight.shape[1:]))
        table_grad = np.zeros_like(weight.data)
        np.add.at(table_grad, ids, rows)  # a repeated id collects every one of its rows
        return (table_grad,)


class Embedding:
    """Lookup table mapping token ids to learnable rows of a (vocab_size, embed_dim) matrix."""

    def __init__(self, vocab_size: int, embed_dim: int) -> None:
        """Xavier-uniform table: U(-l, l) with l = sqrt(6 / (vocab_size + embed_dim))."""
        self.vocab_size = vocab_size
        self.embed_dim = embed_dim
        limit = math.sqrt(6.0 / (vocab_size + embed_dim))
        self.weight = Tensor(
            np.random.uniform(-limit, limit, (vocab_size, embed_dim)), requires_grad=True
        )

    def forward(self, indices: Tensor) -> Tensor:
        """Rows of the table for `indices` (any shape); output shape indices.shape + (D,)."""
        ids_tensor = indices if isinstance(indices, Tensor) else Tensor(indices)
        ids = ids_tensor.data
        if not np.all(np.isfinite(ids)) or np.any(ids != np.floor(ids)):
            raise ValueError("token ids must be finite integers")
        if np.any(ids < 0) or np.any(ids >= self.vocab_size):
            raise ValueError(
                f"token ids must lie in [0, {self.vocab_size - 1}], "
                f"got min {ids.min()} and max {ids.max()}"
            )
        result = Tensor(self.weight.data[ids.astype(int)], requires_grad=self.weight.requires_grad)
        if result.requires_grad:
            # a private copy: later edits to the caller's ids cannot change the gradient
            result._grad_fn = EmbeddingFunction(self.weight, ids.copy())
        return result

    def __call__(self, indices: Tensor) -> Tensor:
        return self.forward(indices)

    def parameters(self) -> list[Tensor]:
        """The trainable table."""
        return [self.weight]

    def __repr__(self) -> str:
        return f"Embedding(vocab_size={self.vocab_size}, embed_dim={self.embed_dim})"


class PositionalEncoding:
    """Learned positional encoding: one trainable row per position, added to the input."""

    def __init__(self, max_seq_len: int, embed_dim: int) -> None:
        """Table of shape (max_seq_len, embed_dim) drawn from U(-sqrt(2/D), sqrt(2/D))."""
        self.max_seq_len = max_seq_len
        self.embed_dim = embed_dim
        limit = math.sqrt(2.0 / embed_dim)
        self.position_embeddings = Tensor(
            np.random.uniform(-limit, limit, (max_seq_len, embed_dim)), requires_grad=True
        )

    def forward(self, x: Tensor, start_pos: int = 0) -> Tensor:
        """x (batch, seq, D) plus rows start_pos .. start_pos+seq-1, broadcast over the batch."""
        if len(x.shape) != 3:
            raise ValueError(f"expected a 3-D input (batch, seq, embed_dim), got shape {x.shape}")
        _, seq_len, embed_dim = x.shape
        if embed_dim != self.embed_dim:
            raise ValueError(f"input embed_dim {embed_dim} differs from {self.embed_dim}")
        start = _check_start(start_pos, seq_len, self.max_seq_len)
        return x + self.position_embeddings[start : start + seq_len]

    def __call__(self, x: Tensor, start_pos: int = 0) -> Tensor:
        return self.forward(x, start_pos)

    def parameters(self) -> list[Tensor]:
        """The trainable position table."""
        return [self.position_embeddings]

    def __repr__(self) -> str:
        return f"PositionalEncoding(max_seq_len={self.max_seq_len}, embed_dim={self.embed_dim})"


def create_sinusoidal_embeddings(max_seq_len: int, embed_dim: int) -> Tensor:
    """Fixed table PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(same angle); float32."""
    positions = np.arange(max_seq_len, dtype=np.float64)[:, np.newaxis]
    even_columns = np.arange(0, embed_dim, 2, dtype=np.float64)
    angles = positions / np.power(10000.0, even_columns / embed_dim)
    table = np.zeros((max_seq_len, embed_dim), dtype=np.float64)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : embed_dim // 2])  # odd D: one sine column more
    return Tensor(table.astype(np.float32), requires_grad=False)


class EmbeddingLayer:
    """Token embedding, optionally scaled by sqrt(D), plus learned, sinusoidal or no positions."""

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        max_seq_len: int = 512,
        pos_encoding: str | None = "learned",
        scale_embeddings: bool = False,
    ) -> None:
        """Build the sub-layers; pos_encoding is 'learned', 'sinusoidal' or None."""
        if pos_encoding not in _POS_ENCODINGS:
            raise ValueError(
                f"pos_encoding must be 'learned', 'sinusoidal' or None, got {pos_encoding!r}"
            )
        self.vocab_size = vocab_size
        self.embed_dim = embed_dim
        self.max_seq_len = max_seq_len
        self.pos_encoding_type = pos_encoding
        self.scale_embeddings = scale_embeddings
        self.token_embedding = Embedding(vocab_size, embed_dim)
        self.pos_encoding: Any = None
        if pos_encoding == "learned":
            self.pos_encoding = PositionalEncoding(max_seq_len, embed_dim)
        elif pos_encoding == "sinusoidal":
            self.pos_encoding = create_sinusoidal_embeddings(max_seq_len, embed_dim)

    def forward(self, tokens: Tensor, start_pos: int = 0) -> Tensor:
        """(batch, seq) ids -> (batch, seq, D); (seq,) ids -> (seq, D)."""
        tokens = tokens if isinstance(tokens, Tensor) else Tensor(tokens)
        if len(tokens.shape) not in (1, 2):
            raise ValueError(
                f"expected token ids of shape (seq,) or (batch, seq), got {tokens.shape}"
            )
        single = len(tokens.shape) == 1
        if single:
            tokens = tokens.reshape(1, -1)
        embedded = self.token_embedding(tokens)
        if self.scale_embeddings:
            embedded = embedded * math.sqrt(self.embed_dim)
        seq_len = tokens.shape[1]
        if self.pos_encoding_type == "learned":
            embedded = self.pos_encoding(embedded, start_pos)
        elif self.pos_encoding_type == "sinusoidal":
            start = _check_start(start_pos, seq_len, self.max_seq_len)
            embedded = embedded + self.pos_encoding[start : start + seq_len]
        return embedded.reshape(seq_len, self.embed_dim) if single else embedded

    def __call__(self, tokens: Tensor, start_pos: int = 0) -> Tensor:
        return self.forward(tokens, start_pos)

    def parameters(self) -> list[Tensor]:
        """Token table, plus the position table when positions are learned."""
        params = self.token_embedding.parameters()
        if self.pos_encoding_type == "learned":
            params += self.pos_encoding.parameters()
        return params

    def __repr__(self) -> str:
        return (
            f"EmbeddingLayer(vocab_size={self.vocab_size}, embed_dim={self.embed_dim}, "
            f"pos_encoding={self.pos_encoding_type!r})"
        )
