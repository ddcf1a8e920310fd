"""Autograd entry points of the course runtime (TinyTorch module 05 / 06).

Every Tensor operation records its graph already; `enable_autograd()` exists because course code
calls it (and importing this module calls it), and it only marks the Tensor class as enabled.
`Function` here is the same class as `tinytorch.core.tensor.Function`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from tinytorch.core import tensor as _tensor
from tinytorch.core.tensor import Function, Tensor

__all__ = ["EmbeddingBackward", "Function", "Tensor", "enable_autograd", "no_grad"]


class EmbeddingBackward(Function):
    """Old-style node of an embedding lookup: scatter-add the output gradient into table rows."""

    def __init__(self, weight: Tensor, indices: Any) -> None:
        """`indices` (Tensor or array, any shape) are the ids that were read from `weight`."""
        super().__init__(weight)
        self.indices = indices

    def apply(self, grad_output: np.ndarray) -> tuple[np.ndarray | None]:
        """Return `(grad_weight,)`: zeros except the rows that were read, summed per read."""
        (weight,) = self.saved_tensors
        if not (isinstance(weight, Tensor) and weight.requires_grad):
            return (None,)
        ids = self.indices.data if isinstance(self.indices, Tensor) else np.asarray(self.indices)
        ids = ids.astype(int).reshape(-1)
        rows = np.asarray(grad_output, dtype=np.float32).reshape((ids.size,) + weight.shape[1:])
        grad_weight = np.zeros_like(weight.data)
        np.add.at(grad_weight, ids, rows)
        return (grad_weight,)


def enable_autograd(quiet: bool = True) -> None:
    """Mark autograd as enabled; idempotent and silent (`quiet` is accepted and ignored)."""
    Tensor._autograd_enabled = True  # type: ignore[attr-defined]


@contextlib.contextmanager
def no_grad() -> Iterator[None]:
    """Within the block, `Function.apply` does not record graph nodes."""
    previous = _tensor._set_grad_tracking(False)
    try:
        yield
    finally:
        _tensor._set_grad_tracking(previous)


enable_autograd()
