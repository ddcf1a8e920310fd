"""Conformance of the course runtime with the rest of TinyTorch's public Tensor and autograd API that
a module-11 or module-12 student may call (both generations), beyond what the two modules need.

- older generation (MLSysBook/TinyTorch 02364f80, `tinytorch/core/autograd.py`, module 05): the
  backward nodes its `__all__` exports, old style (`apply(grad)` returning one gradient per saved
  tensor, None for one that needs none), with their constructors (`TransposeBackward(t, dim0,
  dim1)`, `SoftmaxBackward(x, out, dim=-1)`, ...) and `EPSILON = 1e-7`; `tinytorch/core/tensor.py`'s
  `BYTES_PER_FLOAT32`, `KB_TO_BYTES`, `MB_TO_BYTES` and `__str__`;
- newer generation (harvard-edge/cs249r_book `tinytorch/src/01_tensor/01_tensor.py`): `numel()`
  (the size), `contiguous()` (a copy through which the gradient flows), `view(*shape)` ("Alias for
  reshape"), `memory_footprint()` (bytes), `ndim`, and the operation classes its module 01 exports
  (`Add`, `Sub`, `Mul`, `Div`, `MatMul`, `Slice`, `Reshape`, `Permute`, `Copy`, `MaskedFill`, `Sum`,
  `Mean`, `Max`) with the parameters its Tensor methods pass them.

The values are ours, worked out by hand from the rules the course states.
"""

from __future__ import annotations

import numpy as np
import pytest
import tinytorch.core.autograd as autograd
from tinytorch.core import tensor as tensor_module
from tinytorch.core.activations import Softmax
from tinytorch.core.tensor import Tensor

OLDER_AUTOGRAD = ["EPSILON", "Function", "AddBackward", "MulBackward", "SubBackward", "DivBackward", "MatmulBackward",
                  "TransposeBackward", "PermuteBackward", "EmbeddingBackward", "SliceBackward", "ReshapeBackward",
                  "SumBackward", "ReLUBackward", "SigmoidBackward", "SoftmaxBackward", "GELUBackward", "MSEBackward",
                  "BCEBackward", "CrossEntropyBackward", "enable_autograd"]


def test_the_older_autograd_module_exports_every_name_its_module_05_does() -> None:
    assert set(OLDER_AUTOGRAD) <= set(autograd.__all__)
    assert all(hasattr(autograd, name) for name in autograd.__all__)
    assert autograd.EPSILON == 1e-7


def _leaf(values: object) -> Tensor:
    return Tensor(np.array(values, dtype=np.float32), requires_grad=True)


def _wired(data: np.ndarray, node: object) -> Tensor:
    out = Tensor(data, requires_grad=True)
    out._grad_fn = node
    return out


def test_softmax_backward_wired_by_hand_gives_the_softmax_gradient() -> None:
    """A student's explicit numpy softmax wired to the given SoftmaxBackward(x, out, dim=-1)."""
    scores = _leaf([[1.0, 2.0, 4.0], [0.0, 0.0, 0.0]])
    e = np.exp(scores.data - scores.data.max(axis=-1, keepdims=True))
    s = e / e.sum(axis=-1, keepdims=True)
    out = _wired(s, autograd.SoftmaxBackward(scores, Tensor(s), dim=-1))
    upstream = np.array([[1.0, 0.0, 0.0], [0.0, 3.0, 0.0]], dtype=np.float32)
    out.backward(upstream)
    twin = _leaf(scores.data)
    Softmax()(twin, dim=-1).backward(upstream)
    assert scores.grad is not None and twin.grad is not None
    np.testing.assert_allclose(scores.grad, twin.grad, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(scores.grad[1], np.array([-1.0, 2.0, -1.0]) / 3, atol=1e-6)  # s = 1/3: s * (g - 1)


def test_the_elementwise_nodes() -> None:
    a, b = _leaf([1.0, 2.0]), _leaf([4.0, -2.0])
    g = np.array([1.0, 3.0], dtype=np.float32)
    assert [x.tolist() for x in autograd.AddBackward(a, b).apply(g)] == [[1, 3], [1, 3]]
    assert [x.tolist() for x in autograd.SubBackward(a, b).apply(g)] == [[1, 3], [-1, -3]]
    assert [x.tolist() for x in autograd.MulBackward(a, b).apply(g)] == [[4, -6], [1, 6]]
    grad_a, grad_b = autograd.DivBackward(a, b).apply(g)
    assert grad_a.tolist() == [0.25, -1.5] and grad_b.tolist() == [-1 / 16, -1.5]
    assert autograd.MulBackward(a, 3.0).apply(g)[0].tolist() == [3, 9]  # a plain number as b
    assert autograd.AddBackward(a, Tensor([1.0, 1.0])).apply(g)[1] is None  # no gradient for a constant


def test_matmul_transpose_permute_reshape_slice_sum() -> None:
    a, b = _leaf(np.arange(6.0).reshape(2, 3)), _leaf(np.ones((3, 2)))
    grad_a, grad_b = autograd.MatmulBackward(a, b).apply(np.ones((2, 2), dtype=np.float32))
    assert grad_a.tolist() == [[2, 2, 2], [2, 2, 2]] and grad_b.tolist() == [[3, 3], [5, 5], [7, 7]]
    x = _leaf(np.zeros((2, 3, 4)))
    g = np.arange(24.0).reshape(2, 4, 3)
    assert autograd.TransposeBackward(x, None, None).apply(g)[0].shape == (2, 3, 4)
    assert autograd.TransposeBackward(x, 0, 2).apply(np.zeros((4, 3, 2)))[0].shape == (2, 3, 4)
    node = autograd.PermuteBackward(x, (2, 0, 1))
    assert node.inverse_axes == (1, 2, 0) and node.apply(np.zeros((4, 2, 3)))[0].shape == (2, 3, 4)
    assert autograd.ReshapeBackward(x, (2, 3, 4)).apply(np.zeros(24))[0].shape == (2, 3, 4)
    v = _leaf([1.0, 2.0, 3.0, 4.0, 5.0])
    node = autograd.SliceBackward(v, slice(0, 3))
    assert node.original_shape == (5,) and node.apply(np.ones(3))[0].tolist() == [1, 1, 1, 0, 0]
    assert autograd.SumBackward(v).apply(np.float32(2.0))[0].tolist() == [2] * 5


def test_activation_and_loss_nodes() -> None:
    x = _leaf([-1.0, 0.0, 2.0])
    g = np.ones(3, dtype=np.float32)
    assert autograd.ReLUBackward(x).apply(g)[0].tolist() == [0, 0, 1]
    s = Tensor([0.5, 0.25, 0.75])
    np.testing.assert_allclose(autograd.SigmoidBackward(x, s).apply(g)[0], [0.25, 0.1875, 0.1875])
    np.testing.assert_allclose(autograd.GELUBackward(x).apply(g)[0][1], 0.5)  # gelu'(0) = 1/2
    p, y = _leaf([0.5, 1.0]), Tensor([0.0, 1.0])
    np.testing.assert_allclose(autograd.MSEBackward(p, y).apply(np.float32(1.0))[0], [0.5, 0.0])
    np.testing.assert_allclose(autograd.BCEBackward(p, y).apply(np.float32(1.0))[0][0], 1.0)  # 0.5 / (0.25 * 2)
    logits, targets = _leaf([[0.0, 0.0], [0.0, 0.0]]), Tensor([0, 1])
    np.testing.assert_allclose(autograd.CrossEntropyBackward(logits, targets).apply(np.float32(1.0))[0],
                               [[-0.25, 0.25], [0.25, -0.25]])


def test_view_is_reshape_and_contiguous_a_copy_the_gradient_flows_through() -> None:
    """Newer generation: `view(*shape)` is reshape; `contiguous()` copies (Copy.apply)."""
    x = _leaf(np.arange(6.0).reshape(2, 3))
    t = x.transpose()
    c = t.contiguous()
    assert c is not t and c.data.flags["C_CONTIGUOUS"] and c.data.tolist() == t.data.tolist()
    v = c.view(3, 2).view((6,))
    assert v.shape == (6,) and x.view(-1, 2).shape == (3, 2)
    (v * Tensor(np.arange(6.0))).sum().backward()
    assert x.grad is not None and x.grad.tolist() == [[0, 2, 4], [1, 3, 5]]


@pytest.mark.parametrize(("values", "count"), [(5.0, 1), ([1.0, 2.0, 3.0], 3), (np.zeros((2, 3, 4)), 24)])
def test_numel_ndim_and_memory_footprint(values: float | list[float] | np.ndarray, count: int) -> None:
    t = Tensor(values)
    assert t.numel() == t.size == count and t.memory_footprint() == 4 * count and t.ndim == np.ndim(values)


def test_module_01_constants_and_str() -> None:
    assert (tensor_module.BYTES_PER_FLOAT32, tensor_module.KB_TO_BYTES, tensor_module.MB_TO_BYTES) == (4, 1024, 2**20)
    assert str(Tensor([1.0, 2.0])) == "Tensor([1. 2.])"


def test_the_newer_module_01_operation_classes() -> None:
    """Newer generation: `from tinytorch.core.tensor import MaskedFill, Permute, ...`, applied with
    the parameters its Tensor methods pass (key, shape, axes, mask and value, axis and keepdims)."""
    x = _leaf(np.arange(6.0).reshape(2, 3))
    ops = tensor_module
    assert ops.Add.apply(x, Tensor(1.0)).data.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert ops.MatMul.apply(x, Tensor(np.ones((3, 1)))).data.tolist() == [[3], [12]]
    assert ops.Slice.apply(x, key=(0, slice(1, 3))).data.tolist() == [1, 2]
    assert ops.Reshape.apply(x, shape=(3, 2)).shape == (3, 2)
    assert ops.Permute.apply(x, axes=(1, 0)).shape == (3, 2)
    assert ops.Copy.apply(x).data.tolist() == x.data.tolist()
    assert ops.Sum.apply(x).data == 15 and ops.Max.apply(x, axis=1, keepdims=True).data.tolist() == [[2], [5]]
    assert ops.Mean.apply(x, axis=0).data.tolist() == [1.5, 2.5, 3.5]
    filled = ops.MaskedFill.apply(x, mask=np.array([True, False, False]), value=-1.0)
    assert filled.data.tolist() == [[-1, 1, 2], [-1, 4, 5]]
    filled.sum().backward()
    assert x.grad is not None and x.grad.tolist() == [[0, 1, 1], [0, 1, 1]]
