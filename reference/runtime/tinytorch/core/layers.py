"""The `Layer` base class of the course runtime (TinyTorch module 03, `tinytorch.core.layers`).

A module-11 class may subclass `Layer` and rely on the base class for `__call__`
(which passes every argument on to `forward`, so `layer(x, start_pos=3)` reaches
`forward(x, start_pos=3)`), for an empty `parameters()` and for `__repr__`. Both TinyTorch
generations define the base class with this behaviour. Module 03's concrete layers (`Linear`,
`Dropout`, `Sequential`) are not part of what module 11 builds on, so they are not offered here.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Layer"]


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
