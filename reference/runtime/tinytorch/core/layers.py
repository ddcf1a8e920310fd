"""The `Layer` base class of the course runtime (TinyTorch module 03, `tinytorch.core.layers`).

A module-11 class may subclass `Layer` and rely on the base class for `__call__`
(which passes every argument on to `forward`, so `layer(x, start_pos=3)` reaches
`forward(x, start_pos=3)`), for an empty `parameters()` and for `__repr__`. Both TinyTorch
generations define the base class with this behaviour.

`Linear` is what module 12 (Attention) builds its projections from. In both generations it is
`Linear(in_features, out_features, bias=True)`, holds `weight` of shape (in, out) and `bias` of
shape (out,) (zeros; None without bias), both requiring grad, computes `x.matmul(weight) + bias`,
and returns `[weight, bias]` (or `[weight]`) from `parameters()`. Its initial weights are random
in both generations (graders inject known ones). Module 03's `Dropout` and `Sequential` are not
offered here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinytorch.core.tensor import Tensor

__all__ = ["Layer", "Linear"]


class Layer:
    """Base of every layer: subclasses implement `forward` and, when they learn, `parameters`."""

    def forward(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        """Compute the layer's output; every subclass must override it."""
        raise NotImplementedError(f"{type(self).__name__}.forward is not implemented")

    def __call__(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        """`layer(x, ...)` is `layer.forward(x, ...)`."""
        return self.forward(x, *args, **kwargs)

    def parameters(self) -> list[Any]:
        """The trainable tensors: none for the base class."""
        return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Linear(Layer):
    """y = x W + b, with W of shape (in_features, out_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        self.in_features = in_features
        self.out_features = out_features
        scale = np.sqrt(1.0 / in_features)
        self.weight = Tensor(np.random.randn(in_features, out_features) * scale, requires_grad=True)
        self.bias: Tensor | None = Tensor(np.zeros(out_features), requires_grad=True) if bias else None

    def forward(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        """`x.matmul(weight) + bias` over the last axis of `x`."""
        out = x.matmul(self.weight)
        return out + self.bias if self.bias is not None else out

    def parameters(self) -> list[Any]:
        """`[weight, bias]`, or `[weight]` without bias."""
        return [self.weight] if self.bias is None else [self.weight, self.bias]

    def __repr__(self) -> str:
        return f"Linear(in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None})"
