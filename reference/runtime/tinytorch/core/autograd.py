"""Autograd entry points of the course runtime (TinyTorch module 05 / 06).

Every Tensor operation records its graph already; `enable_autograd()` exists because course code
calls it (and importing this module calls it), and it only marks the Tensor class as enabled.
`Function` here is the same class as `tinytorch.core.tensor.Function`.

The older generation's module 05 also hands students its backward nodes, old style (`apply(grad)`
returning one gradient per saved tensor, `None` for one that needs none), which a student may wire
by hand: `out._grad_fn = SoftmaxBackward(x, out, dim=-1)`. They are offered under the same names,
with the same constructors and rules (`EPSILON` too); the runtime's own operations do not use them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from tinytorch.core import tensor as _tensor
from tinytorch.core.tensor import Function, Tensor

__all__ = ["EPSILON", "AddBackward", "BCEBackward", "CrossEntropyBackward", "DivBackward", "EmbeddingBackward",
           "Function", "GELUBackward", "MSEBackward", "MatmulBackward", "MulBackward", "PermuteBackward",
           "ReLUBackward", "ReshapeBackward", "SigmoidBackward", "SliceBackward", "SoftmaxBackward", "SubBackward",
           "SumBackward", "Tensor", "TransposeBackward", "enable_autograd", "no_grad"]

EPSILON = 1e-7  # the older module 05's step for numerical gradients (and BCE's clip)


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


def _wants(t: Any) -> bool:
    return isinstance(t, Tensor) and t.requires_grad


def _value(t: Any) -> Any:
    return t.data if isinstance(t, Tensor) else t


class AddBackward(Function):
    """a + b: the output gradient, unchanged, to each input."""

    def apply(self, grad_output: np.ndarray) -> tuple[Any, Any]:
        a, b = self.saved_tensors
        return (grad_output if _wants(a) else None), (grad_output if _wants(b) else None)


class SubBackward(Function):
    """a - b: the output gradient to a, its negation to b."""

    def apply(self, grad_output: np.ndarray) -> tuple[Any, Any]:
        a, b = self.saved_tensors
        return (grad_output if _wants(a) else None), (-grad_output if _wants(b) else None)


class MulBackward(Function):
    """a * b: each input gets the output gradient times the other input (b may be a plain number)."""

    def apply(self, grad_output: np.ndarray) -> tuple[Any, Any]:
        a, b = self.saved_tensors
        return (grad_output * _value(b) if _wants(a) else None), (grad_output * _value(a) if _wants(b) else None)


class DivBackward(Function):
    """a / b: grad / b for a, -grad * a / b**2 for b."""

    def apply(self, grad_output: np.ndarray) -> tuple[Any, Any]:
        a, b = self.saved_tensors
        grad_a = grad_output / _value(b) if _wants(a) else None
        grad_b = -grad_output * _value(a) / (_value(b) ** 2) if _wants(b) else None
        return grad_a, grad_b


class MatmulBackward(Function):
    """a @ b: grad @ b^T for a and a^T @ grad for b, transposing the last two axes only."""

    def apply(self, grad_output: np.ndarray) -> tuple[Any, Any]:
        a, b = self.saved_tensors

        def flip(x: np.ndarray) -> np.ndarray:
            return np.swapaxes(x, -2, -1) if x.ndim >= 2 else x.T

        grad_a = np.matmul(grad_output, flip(b.data)) if _wants(a) else None
        grad_b = np.matmul(flip(a.data), grad_output) if _wants(b) else None
        return grad_a, grad_b


class TransposeBackward(Function):
    """x.transpose(dim0, dim1): the gradient swapped back (both None: the last two axes)."""

    def __init__(self, tensor: Any, dim0: Any, dim1: Any) -> None:
        super().__init__(tensor)
        self.dim0 = dim0
        self.dim1 = dim1

    def apply(self, grad_output: np.ndarray) -> tuple[Any]:
        (x,) = self.saved_tensors
        if not _wants(x):
            return (None,)
        if self.dim0 is None and self.dim1 is None:
            if grad_output.ndim < 2:
                return (grad_output.copy(),)
            return (np.swapaxes(grad_output, -2, -1),)
        return (np.swapaxes(grad_output, self.dim0, self.dim1),)


class PermuteBackward(Function):
    """A permutation of the axes: the gradient permuted back by the inverse (`inverse_axes`)."""

    def __init__(self, tensor: Any, axes: Any) -> None:
        super().__init__(tensor)
        self.axes = axes
        self.inverse_axes = tuple(np.argsort(axes))

    def apply(self, grad_output: np.ndarray) -> tuple[Any]:
        (x,) = self.saved_tensors
        return (np.transpose(grad_output, self.inverse_axes) if _wants(x) else None,)


class SliceBackward(Function):
    """x[key]: the gradient written into zeros of x's shape (`original_shape`) at `key`."""

    def __init__(self, tensor: Any, key: Any) -> None:
        super().__init__(tensor)
        self.key = key
        self.original_shape = tensor.shape

    def apply(self, grad_output: np.ndarray) -> tuple[Any]:
        (x,) = self.saved_tensors
        if not _wants(x):
            return (None,)
        grad = np.zeros(self.original_shape, dtype=np.float32)
        grad[_tensor._plain_key(self.key)] = grad_output  # assigned, as there: a repeated id keeps one row
        return (grad,)


class ReshapeBackward(Function):
    """x.reshape(...): the gradient reshaped to `original_shape`."""

    def __init__(self, tensor: Any, original_shape: Any) -> None:
        super().__init__(tensor)
        self.original_shape = original_shape

    def apply(self, grad_output: np.ndarray) -> tuple[Any]:
        (x,) = self.saved_tensors
        return (grad_output.reshape(self.original_shape) if _wants(x) else None,)


class SumBackward(Function):
    """x.sum(): the output gradient spread over every element of x."""

    def apply(self, grad_output: np.ndarray) -> tuple[Any]:
        (x,) = self.saved_tensors
        return (np.ones_like(x.data) * grad_output if _wants(x) else None,)


class ReLUBackward(Function):
    """relu(x): the gradient where x > 0, zero elsewhere."""

    def __init__(self, input_tensor: Any) -> None:
        super().__init__(input_tensor)

    def apply(self, grad_output: np.ndarray) -> tuple[Any]:
        (x,) = self.saved_tensors
        return (grad_output * (x.data > 0).astype(np.float32) if _wants(x) else None,)


class SigmoidBackward(Function):
    """sigmoid(x) = s: grad * s * (1 - s), from the saved output (`output_data`)."""

    def __init__(self, input_tensor: Any, output_tensor: Any) -> None:
        super().__init__(input_tensor)
        self.output_data = output_tensor.data

    def apply(self, grad_output: np.ndarray) -> tuple[Any]:
        (x,) = self.saved_tensors
        s = self.output_data
        return (grad_output * s * (1 - s) if _wants(x) else None,)


class SoftmaxBackward(Function):
    """softmax(x) = s along `dim`: s * (grad - sum(grad * s, dim)), from the saved output."""

    def __init__(self, input_tensor: Any, output_tensor: Any, dim: int = -1) -> None:
        super().__init__(input_tensor)
        self.output_data = output_tensor.data
        self.dim = dim

    def apply(self, grad_output: np.ndarray) -> tuple[Any]:
        (x,) = self.saved_tensors
        if not _wants(x):
            return (None,)
        s = self.output_data
        return (s * (grad_output - np.sum(grad_output * s, axis=self.dim, keepdims=True)),)


class GELUBackward(Function):
    """gelu(x), tanh approximation: the derivative of 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""

    def __init__(self, input_tensor: Any) -> None:
        super().__init__(input_tensor)

    def apply(self, grad_output: np.ndarray) -> tuple[Any]:
        (x,) = self.saved_tensors
        if not _wants(x):
            return (None,)
        v = x.data
        c = np.sqrt(2.0 / np.pi)
        t = np.tanh(c * (v + 0.044715 * v**3))
        slope = 0.5 * (1 + t) + 0.5 * v * (1 - t**2) * c * (1 + 3 * 0.044715 * v**2)
        return (grad_output * slope,)


class MSEBackward(Function):
    """mean((p - y)^2): 2 (p - y) / N times the output gradient, for the predictions only."""

    def __init__(self, predictions: Any, targets: Any) -> None:
        super().__init__(predictions)
        self.targets_data = targets.data
        self.num_samples = np.size(targets.data)

    def apply(self, grad_output: np.ndarray) -> tuple[Any]:
        (p,) = self.saved_tensors
        if not _wants(p):
            return (None,)
        return (2.0 * (p.data - self.targets_data) / self.num_samples * grad_output,)


class BCEBackward(Function):
    """binary cross-entropy: (p - y) / (p (1 - p) N), p clipped to [EPSILON, 1 - EPSILON]."""

    def __init__(self, predictions: Any, targets: Any) -> None:
        super().__init__(predictions)
        self.targets_data = targets.data
        self.num_samples = np.size(targets.data)

    def apply(self, grad_output: np.ndarray) -> tuple[Any]:
        (pred,) = self.saved_tensors
        if not _wants(pred):
            return (None,)
        p = np.clip(pred.data, EPSILON, 1 - EPSILON)
        return ((p - self.targets_data) / (p * (1 - p) * self.num_samples) * grad_output,)


class CrossEntropyBackward(Function):
    """cross-entropy of (batch, classes) logits and class ids: (softmax - one_hot) / batch."""

    def __init__(self, logits: Any, targets: Any) -> None:
        super().__init__(logits)
        self.targets_data = targets.data.astype(int)
        self.batch_size = logits.data.shape[0]
        self.num_classes = logits.data.shape[1]

    def apply(self, grad_output: np.ndarray) -> tuple[Any]:
        (logits,) = self.saved_tensors
        if not _wants(logits):
            return (None,)
        z = logits.data - np.max(logits.data, axis=1, keepdims=True)
        probs = np.exp(z) / np.sum(np.exp(z), axis=1, keepdims=True)
        probs[np.arange(self.batch_size), self.targets_data] -= 1.0
        return (probs / self.batch_size * grad_output,)


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
