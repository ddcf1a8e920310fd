"""Tensor, Function and the reverse-mode engine of the course runtime (TinyTorch modules 01 and 05).

`Tensor.grad` is a plain float32 ndarray (None until a backward pass reaches the tensor), as in
both TinyTorch generations: optimizers write `p.data -= lr * p.grad`.

`Tensor.backward` understands two kinds of graph node (a tensor's `_grad_fn`):
- new style: `SomeFunction.apply(*tensors, **params)` runs `forward` on the tensors' arrays and
  records the node; its `backward(grad)` returns one gradient per entry of `inputs`;
- old style: a subclass that overrides `apply` as an instance method, `apply(grad)` returning one
  gradient per entry of `saved_tensors`; student code wires it with `out._grad_fn = Node(...)`.
Gradients handed to a node and taken from it are ndarrays (a returned Tensor is unwrapped).

`tests/reference/test_conformance.py` holds this module to values observed on both TinyTorch
generations; change a pinned behaviour there only with new observations of the real course.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

# module 01's constants for memory sizes (the older generation has all three, the newer the first and last)
BYTES_PER_FLOAT32 = 4
KB_TO_BYTES = 1024
MB_TO_BYTES = 1024 * 1024

_grad_tracking = True


def _set_grad_tracking(enabled: bool) -> bool:
    """Turn graph recording by `Function.apply` on or off; return the previous setting."""
    global _grad_tracking
    previous, _grad_tracking = _grad_tracking, bool(enabled)
    return previous


def _as_tensor(value: Any) -> Tensor:
    """Wrap a scalar, list or array as a constant Tensor; pass a Tensor through."""
    return value if isinstance(value, Tensor) else Tensor(value)


def _plain_key(key: Any) -> Any:
    """Replace Tensors inside an index key by integer arrays (token ids arrive as float32)."""
    if isinstance(key, Tensor):
        return key.data.astype(np.intp)
    if isinstance(key, tuple):
        return tuple(_plain_key(part) for part in key)
    return key


def _fit_to_shape(
    grad: np.ndarray, shape: tuple[int, ...], origin: str, expand: bool = False
) -> np.ndarray:
    """Sum a broadcast gradient back down to `shape` (or, if `expand`, broadcast it up)."""
    if grad.shape == shape:
        return grad
    fitted = grad
    while fitted.ndim > len(shape):
        fitted = fitted.sum(axis=0)
    if fitted.ndim == len(shape):
        axes = tuple(i for i, (g, s) in enumerate(zip(fitted.shape, shape)) if s == 1 and g != 1)
        if axes:
            fitted = fitted.sum(axis=axes, keepdims=True)
    if fitted.shape == shape:
        return fitted
    if expand:
        try:
            return np.broadcast_to(fitted, shape).copy()
        except ValueError:
            pass
    raise ValueError(
        f"{origin} gave a gradient of shape {grad.shape} for a tensor of shape {shape}"
    )


class Function:
    """A differentiable operation; one instance is one node of the computation graph."""

    def __init__(self, *inputs: Any, **params: Any) -> None:
        """Keep the inputs (as `inputs` and, for old-style code, `saved_tensors`) and the params."""
        self.inputs: tuple[Any, ...] = inputs
        self.saved_tensors: tuple[Any, ...] = inputs
        self.next_functions: list[Any] = [
            t._grad_fn for t in inputs if isinstance(t, Tensor) and t._grad_fn is not None
        ]
        for name, value in params.items():
            setattr(self, name, value)

    def forward(self, *arrays: Any) -> Any:
        """Compute the output array from the input arrays (new style)."""
        raise NotImplementedError(f"{type(self).__name__}.forward is not implemented")

    def backward(self, grad_output: np.ndarray) -> tuple[np.ndarray | None, ...]:
        """Return one gradient per entry of `inputs` (new style)."""
        raise NotImplementedError(f"{type(self).__name__}.backward is not implemented")

    @classmethod
    def apply(cls, *inputs: Any, **params: Any) -> Tensor:
        """Run the operation forward on Tensors; record the node when an input requires grad.

        Old-style subclasses shadow this with an instance method `apply(grad_output)`.
        """
        node = _make_node(cls, inputs, params)
        result = node.forward(*[t.data if isinstance(t, Tensor) else t for t in inputs])
        out = Tensor(result.data if isinstance(result, Tensor) else result)
        node.output = out
        if _grad_tracking and any(isinstance(t, Tensor) and t.requires_grad for t in inputs):
            out.requires_grad = True
            out._grad_fn = node
        return out

    def __repr__(self) -> str:
        name = type(self).__name__.lstrip("_")
        for suffix in ("Function", "Backward"):
            if name.endswith(suffix) and name != suffix:
                name = name[: -len(suffix)]
        return f"<{name}Backward>"


def _make_node(cls: type, inputs: Sequence[Any], params: dict[str, Any]) -> Any:
    """Build `cls(*inputs, **params)`, or set params as attributes if `__init__` rejects them."""
    try:
        inspect.signature(cls).bind(*inputs, **params)
        accepts_params = True
    except TypeError:
        accepts_params = False
    except ValueError:  # no introspectable signature: try the plain call
        accepts_params = True
    node = cls(*inputs, **params) if accepts_params else cls(*inputs)
    for name, value in params.items():
        if not hasattr(node, name):
            setattr(node, name, value)
    if not hasattr(node, "inputs"):
        node.inputs = tuple(inputs)
    if not hasattr(node, "saved_tensors"):
        node.saved_tensors = tuple(inputs)
    return node


def _is_old_style(node: Any) -> bool:
    """True when the node's class overrides `apply` with an instance method (module-05 style)."""
    for klass in type(node).__mro__:
        attr = vars(klass).get("apply")
        if attr is not None:
            return not isinstance(attr, (classmethod, staticmethod))
    return False


def _parents(node: Any) -> tuple[Any, ...]:
    """The inputs a node's gradients are aligned with."""
    names = ("saved_tensors", "inputs")
    first, second = names if _is_old_style(node) else names[::-1]
    found = getattr(node, first, None)
    return tuple(found if found is not None else getattr(node, second, ()))


def _run_node(node: Any, grad: np.ndarray) -> tuple[tuple[Any, ...], list[np.ndarray | None]]:
    """Call the node's backward rule; return its parents and their gradients as arrays."""
    parents = _parents(node)
    raw = node.apply(grad) if _is_old_style(node) else node.backward(grad)
    if raw is None:
        raw = (None,) * len(parents)
    elif isinstance(raw, (Tensor, np.ndarray)):
        # As in both course generations, the inputs are zipped with what backward returned: a
        # bare array (not a one-element tuple) hands its first row to the first input, whose
        # gradient then has the wrong shape. Iterating a 0-d array raises TypeError, as there.
        raw = list(raw.data if isinstance(raw, Tensor) else raw)
    grads = [
        None if g is None else np.asarray(g.data if isinstance(g, Tensor) else g, dtype=np.float32)
        for g in raw
    ]
    return parents, grads


def _topological_order(root: Tensor) -> list[Tensor]:
    """Tensors reachable from `root`, each listed before every tensor it was computed from."""
    order: list[Tensor] = []
    seen = set()
    stack: list[tuple[Tensor, bool]] = [(root, False)]
    while stack:
        tensor, expanded = stack.pop()
        if expanded:
            order.append(tensor)
            continue
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        stack.append((tensor, True))
        if tensor._grad_fn is not None:
            stack.extend((p, False) for p in _parents(tensor._grad_fn) if isinstance(p, Tensor))
    order.reverse()
    return order


class Tensor:
    """An n-d float32 array that records the operations applied to it."""

    # Makes `ndarray <op> Tensor` defer to Tensor's reflected operators.
    __array_ufunc__ = None

    def __init__(self, data: Any, requires_grad: bool = False) -> None:
        """Copy `data` (scalar, list, ndarray, Tensor or list of Tensors) into float32."""
        if isinstance(data, Tensor):
            data = data.data
        elif isinstance(data, (list, tuple)) and data and all(isinstance(d, Tensor) for d in data):
            data = np.stack([d.data for d in data])
        self.data = np.array(data, dtype=np.float32)
        self.requires_grad: bool = bool(requires_grad)
        self.grad: np.ndarray | None = None
        self._grad_fn: Any = None

    @property
    def data(self) -> np.ndarray:
        """The values, always a float32 ndarray."""
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        raw = value.data if isinstance(value, Tensor) else value
        self._data = np.asarray(raw, dtype=np.float32)

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the data."""
        return self._data.shape

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(self._data.size)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return self._data.ndim

    @property
    def dtype(self) -> np.dtype:
        """Element type (float32)."""
        return self._data.dtype

    def numpy(self) -> np.ndarray:
        """The underlying array."""
        return self._data

    def numel(self) -> int:
        """Number of elements, as PyTorch names it (the newer generation)."""
        return self.size

    def memory_footprint(self) -> int:
        """Bytes the values take (the newer generation)."""
        return int(self._data.nbytes)

    def contiguous(self) -> Tensor:
        """A copy of the values in row-major order; the gradient passes straight through (newer)."""
        return _Copy.apply(self)

    def view(self, *shape: Any) -> Tensor:
        """The same as `reshape` (the newer generation's alias, named after PyTorch's)."""
        return self.reshape(*shape)

    def __str__(self) -> str:
        return f"Tensor({self._data})"

    def item(self) -> float:
        """The single value of a size-1 tensor."""
        return float(self._data.item())

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        flag = ", requires_grad=True" if self.requires_grad else ""
        return f"Tensor(data={self._data}, shape={self.shape}{flag})"

    def __add__(self, other: Any) -> Tensor:
        return _Add.apply(self, _as_tensor(other))

    def __radd__(self, other: Any) -> Tensor:
        return _Add.apply(_as_tensor(other), self)

    def __sub__(self, other: Any) -> Tensor:
        return _Sub.apply(self, _as_tensor(other))

    def __rsub__(self, other: Any) -> Tensor:
        return _Sub.apply(_as_tensor(other), self)

    def __mul__(self, other: Any) -> Tensor:
        return _Mul.apply(self, _as_tensor(other))

    def __rmul__(self, other: Any) -> Tensor:
        return _Mul.apply(_as_tensor(other), self)

    def __truediv__(self, other: Any) -> Tensor:
        return _Div.apply(self, _as_tensor(other))

    def __rtruediv__(self, other: Any) -> Tensor:
        return _Div.apply(_as_tensor(other), self)

    def __neg__(self) -> Tensor:
        return _Neg.apply(self)

    def matmul(self, other: Any) -> Tensor:
        """Matrix product (numpy `matmul` rules, including 1-d and batched operands)."""
        return _MatMul.apply(self, _as_tensor(other))

    def __matmul__(self, other: Any) -> Tensor:
        return self.matmul(other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return _MatMul.apply(_as_tensor(other), self)

    def __getitem__(self, key: Any) -> Tensor:
        return _GetItem.apply(self, key=_plain_key(key))

    def reshape(self, *shape: Any) -> Tensor:
        """Reshape to `shape`, given as ints or as one tuple (-1 allowed)."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return _Reshape.apply(self, shape=tuple(int(s) for s in shape))

    def transpose(self, *dims: Any) -> Tensor:
        """No args: swap the last two axes; two ints: swap them; more, or a tuple: permute."""
        dims = tuple(d for d in dims if d is not None)
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            axes = tuple(int(d) for d in dims[0])
        elif len(dims) in (0, 2):
            axes_list = list(range(self.ndim))
            if self.ndim >= 2:
                first, second = (dims[0], dims[1]) if dims else (-2, -1)
                axes_list[first], axes_list[second] = axes_list[second], axes_list[first]
            axes = tuple(axes_list)
        else:
            axes = tuple(int(d) for d in dims)
        return _Transpose.apply(self, axes=axes)

    def sum(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        """Sum over `axis` (None: all elements)."""
        return _Sum.apply(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        """Mean over `axis` (None: all elements)."""
        return _Mean.apply(self, axis=axis, keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        """Maximum over `axis`; ties share the gradient equally."""
        return _Max.apply(self, axis=axis, keepdims=keepdims)

    def masked_fill(self, mask: Any, value: float) -> Tensor:
        """A new Tensor with `value` where `mask` (bool array or Tensor, broadcast) is true; the
        gradient reaches only the positions that kept their value (module 12's newer `_apply_mask`)."""
        where = np.asarray(mask.data if isinstance(mask, Tensor) else mask).astype(bool)
        return _MaskedFill.apply(self, where=np.broadcast_to(where, self.shape), value=float(value))

    def zero_grad(self) -> None:
        """Forget the accumulated gradient."""
        self.grad = None

    def backward(self, gradient: Any = None, retain_graph: bool = False) -> None:
        """Accumulate d(self)/d(t) into `t.grad` for every t in the graph that requires grad.

        `gradient` may be None (size-1 tensors only), a list, an ndarray or a Tensor. The graph is
        always kept, so `retain_graph` is accepted for compatibility and has no effect.
        """
        if not self.requires_grad:
            return
        if gradient is None:
            if self.size != 1:
                raise ValueError(
                    f"backward() on a tensor of shape {self.shape} needs a gradient argument"
                )
            seed = np.ones_like(self._data)
        else:
            raw = gradient.data if isinstance(gradient, Tensor) else gradient
            seed = _fit_to_shape(np.asarray(raw, dtype=np.float32), self.shape, "backward()", True)
        pending: dict[int, np.ndarray] = {id(self): seed}
        for tensor in _topological_order(self):
            grad = pending.pop(id(tensor), None)
            if grad is None or not tensor.requires_grad:
                continue
            if tensor.grad is None:
                tensor.grad = np.zeros_like(tensor.data)
            tensor.grad += grad
            node = tensor._grad_fn
            if node is None:
                continue
            parents, grads = _run_node(node, grad.copy())
            for parent, parent_grad in zip(parents, grads):
                if parent_grad is None or not isinstance(parent, Tensor):
                    continue
                if not parent.requires_grad:
                    continue
                parent_grad = _fit_to_shape(parent_grad, parent.shape, repr(node))
                key = id(parent)
                pending[key] = pending[key] + parent_grad if key in pending else parent_grad


def _expand_reduced(
    grad: np.ndarray, shape: tuple[int, ...], axis: Any, keepdims: bool
) -> np.ndarray:
    """Broadcast the gradient of a reduction back to the input's shape."""
    if axis is not None and not keepdims:
        axes = axis if isinstance(axis, tuple) else (axis,)
        grad = np.expand_dims(grad, tuple(sorted(a % len(shape) for a in axes)))
    return np.broadcast_to(grad, shape)


class _Add(Function):
    def forward(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b

    def backward(self, grad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return grad, grad


class _Sub(Function):
    def forward(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a - b

    def backward(self, grad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return grad, -grad


class _Mul(Function):
    def forward(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a * b

    def backward(self, grad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, b = (t.data for t in self.inputs)
        return grad * b, grad * a


class _Div(Function):
    def forward(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a / b

    def backward(self, grad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, b = (t.data for t in self.inputs)
        return grad / b, -grad * a / (b * b)


class _Neg(Function):
    def forward(self, a: np.ndarray) -> np.ndarray:
        return -a

    def backward(self, grad: np.ndarray) -> tuple[np.ndarray]:
        return (-grad,)


class _MatMul(Function):
    def forward(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.matmul(a, b)

    def backward(self, grad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, b = (t.data for t in self.inputs)
        a2 = a if a.ndim > 1 else a[np.newaxis, :]  # 1-d operands as a row / a column
        b2 = b if b.ndim > 1 else b[:, np.newaxis]
        g2 = grad.reshape(np.matmul(a2, b2).shape)
        grad_a = np.matmul(g2, np.swapaxes(b2, -1, -2))
        grad_b = np.matmul(np.swapaxes(a2, -1, -2), g2)
        grad_a = _fit_to_shape(grad_a, a2.shape, "matmul").reshape(a.shape)
        grad_b = _fit_to_shape(grad_b, b2.shape, "matmul").reshape(b.shape)
        return grad_a, grad_b


class _GetItem(Function):
    def forward(self, a: np.ndarray) -> np.ndarray:
        return a[self.key]

    def backward(self, grad: np.ndarray) -> tuple[np.ndarray]:
        out = np.zeros_like(self.inputs[0].data)
        picked = self.output.shape
        np.add.at(out, self.key, _fit_for_assignment(grad, picked))  # repeated indices accumulate
        return (out,)


def _fit_for_assignment(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Shape `grad` the way `array[key] = grad` would: drop extra leading 1s, then broadcast.

    The older course's slice backward assigns (`grad[key] = grad_output`), so a (1, T, D)
    gradient for a (T, D) slice is accepted there; its official module-11 solution relies on it
    (it moves a slice's `_grad_fn` onto a rewrapped `(1, T, D)` tensor).
    """
    fitted = grad
    while fitted.ndim > len(shape) and fitted.shape[0] == 1:
        fitted = fitted[0]
    try:
        return np.broadcast_to(fitted, shape)
    except ValueError:
        raise ValueError(
            f"slice backward got a gradient of shape {grad.shape} for a slice of shape {shape}"
        ) from None


class _Reshape(Function):
    def forward(self, a: np.ndarray) -> np.ndarray:
        return a.reshape(self.shape)

    def backward(self, grad: np.ndarray) -> tuple[np.ndarray]:
        return (grad.reshape(self.inputs[0].shape),)


class _Transpose(Function):
    def forward(self, a: np.ndarray) -> np.ndarray:
        return np.transpose(a, self.axes)

    def backward(self, grad: np.ndarray) -> tuple[np.ndarray]:
        return (np.transpose(grad, np.argsort(self.axes)),)


class _Sum(Function):
    def forward(self, a: np.ndarray) -> np.ndarray:
        return np.sum(a, axis=self.axis, keepdims=self.keepdims)

    def backward(self, grad: np.ndarray) -> tuple[np.ndarray]:
        shape = self.inputs[0].shape
        return (_expand_reduced(grad, shape, self.axis, self.keepdims).copy(),)


class _Mean(Function):
    def forward(self, a: np.ndarray) -> np.ndarray:
        return np.mean(a, axis=self.axis, keepdims=self.keepdims)

    def backward(self, grad: np.ndarray) -> tuple[np.ndarray]:
        a = self.inputs[0].data
        count = a.size // max(np.asarray(self.output.data).size, 1)
        return (_expand_reduced(grad, a.shape, self.axis, self.keepdims) / count,)


class _Max(Function):
    def forward(self, a: np.ndarray) -> np.ndarray:
        return np.max(a, axis=self.axis, keepdims=self.keepdims)

    def backward(self, grad: np.ndarray) -> tuple[np.ndarray]:
        a = self.inputs[0].data
        hits = (a == np.max(a, axis=self.axis, keepdims=True)).astype(np.float32)
        hits /= hits.sum(axis=self.axis, keepdims=True)
        return (hits * _expand_reduced(grad, a.shape, self.axis, self.keepdims),)


class _Copy(Function):
    def forward(self, a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a).copy()

    def backward(self, grad: np.ndarray) -> tuple[np.ndarray]:
        return (grad,)


class _MaskedFill(Function):
    def forward(self, a: np.ndarray) -> np.ndarray:
        return np.where(self.where, np.float32(self.value), a)

    def backward(self, grad: np.ndarray) -> tuple[np.ndarray]:
        return (np.where(self.where, np.float32(0.0), grad),)


class MaskedFill(_MaskedFill):
    """The newer generation's operation class: parameters `mask` (bool array, broadcast) and `value`."""

    def forward(self, a: np.ndarray) -> np.ndarray:
        self.where = np.broadcast_to(np.asarray(self.mask, dtype=bool), a.shape)
        return super().forward(a)


for _reduction in (_Sum, _Mean, _Max):  # the newer classes' defaults, for a bare Sum.apply(x)
    _reduction.axis = None  # type: ignore[attr-defined]
    _reduction.keepdims = False  # type: ignore[attr-defined]

# The newer generation's module 01 exports its operations under these names, with these parameters
# (Slice: key; Reshape: shape; Permute: axes; Sum, Mean, Max: axis, keepdims).
Add, Sub, Mul, Div, MatMul = _Add, _Sub, _Mul, _Div, _MatMul
Slice, Reshape, Permute, Copy = _GetItem, _Reshape, _Transpose, _Copy
Sum, Mean, Max = _Sum, _Mean, _Max
