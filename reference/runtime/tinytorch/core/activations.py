"""`Softmax` of the course runtime (TinyTorch module 02, `tinytorch.core.activations`).

Module 12 normalises its attention scores with `Softmax()(scores, dim=-1)`. Both TinyTorch
generations define `forward(x, dim=-1)` and `__call__(x, dim=-1)`, subtract the maximum along
`dim` before exponentiating, and (once autograd is on) give the input the softmax gradient
`s * (g - sum(g * s, dim))`. Module 02's other activations are not part of what module 12
builds on, so they are not offered here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinytorch.core.tensor import Function, Tensor

__all__ = ["Softmax"]


class _Softmax(Function):
    def forward(self, a: np.ndarray) -> np.ndarray:
        shifted = np.exp(a - np.max(a, axis=self.dim, keepdims=True))
        out: np.ndarray = shifted / np.sum(shifted, axis=self.dim, keepdims=True)
        return out

    def backward(self, grad: np.ndarray) -> tuple[np.ndarray]:
        s = self.output.data
        return (s * (grad - np.sum(grad * s, axis=self.dim, keepdims=True)),)


class Softmax:
    """softmax along `dim`: every slice along it becomes a probability distribution."""

    def forward(self, x: Tensor, dim: int = -1) -> Tensor:
        """The softmax of `x` along `dim` (default the last axis)."""
        return _Softmax.apply(x if isinstance(x, Tensor) else Tensor(x), dim=int(dim))

    def __call__(self, x: Tensor, dim: int = -1) -> Tensor:
        return self.forward(x, dim)

    def parameters(self) -> list[Any]:
        """An activation learns nothing."""
        return []

    def __repr__(self) -> str:
        return "Softmax()"
