"""Behaviour of the course runtime (`reference/runtime/tinytorch`) that student code relies on."""

from __future__ import annotations

import ast
import importlib.util
import math
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from tinytorch.core import autograd, tensor
from tinytorch.core.autograd import EmbeddingBackward, enable_autograd, no_grad
from tinytorch.core.tensor import Function, Tensor

RUNTIME = Path(__file__).resolve().parents[2] / "reference" / "runtime"

# ---------------------------------------------------------------------------------------------
# Tensor basics


@pytest.mark.parametrize(
    "data",
    [
        pytest.param([[1, 2], [3, 4]], id="list-of-ints"),
        pytest.param(np.arange(4, dtype=np.int64).reshape(2, 2), id="int-ndarray"),
        pytest.param(np.ones((2, 2), dtype=np.float64), id="float64-ndarray"),
        pytest.param(Tensor([[1.0, 2.0], [3.0, 4.0]]), id="tensor"),
    ],
)
def test_data_is_a_float32_copy(data: object) -> None:
    t = Tensor(data)
    assert type(t.data) is np.ndarray and t.data.dtype == np.float32
    assert t.shape == (2, 2) and t.size == 4 and t.dtype == np.float32 and len(t) == 2
    source = data.data if isinstance(data, Tensor) else data
    if isinstance(source, np.ndarray):
        assert not np.shares_memory(t.data, source)


def test_scalar_and_stacked_tensors() -> None:
    assert Tensor(3).shape == () and Tensor(3).item() == 3.0
    stacked = Tensor([Tensor([1, 2]), Tensor([3, 4])])
    assert stacked.shape == (2, 2) and np.array_equal(stacked.numpy(), [[1, 2], [3, 4]])


def test_assigning_data_keeps_float32_and_updates_shape() -> None:
    t = Tensor([1, 2])
    t.data = np.zeros((3, 1), dtype=np.float64)
    assert t.data.dtype == np.float32 and t.shape == (3, 1) and t.size == 3


def test_fresh_tensor_has_no_grad_and_repr_names_it() -> None:
    t = Tensor([1.0], requires_grad=True)
    assert t.grad is None and t._grad_fn is None and t.requires_grad is True
    assert repr(t).startswith("Tensor(")


# ---------------------------------------------------------------------------------------------
# Gradients of every op, against central finite differences


def _numeric_grads(
    fn: Callable[..., Tensor], arrays: Sequence[np.ndarray], weights: np.ndarray, eps: float = 1e-3
) -> list[np.ndarray]:
    """d sum(fn(*arrays) * weights) / d arrays[k], by central differences."""

    def loss(values: Sequence[np.ndarray]) -> float:
        return float(np.sum(fn(*[Tensor(v) for v in values]).data.astype(np.float64) * weights))

    grads = []
    for k, array in enumerate(arrays):
        grad = np.zeros_like(array, dtype=np.float64)
        for index in np.ndindex(array.shape):
            plus = [a.copy() for a in arrays]
            minus = [a.copy() for a in arrays]
            plus[k][index] += eps
            minus[k][index] -= eps
            grad[index] = (loss(plus) - loss(minus)) / (2 * eps)
        grads.append(grad)
    return grads


OPS: list[tuple[str, list[tuple[int, ...]], Callable[..., Tensor]]] = [
    ("add-broadcast-row", [(2, 3), (3,)], lambda a, b: a + b),
    ("add-broadcast-column", [(2, 3), (2, 1)], lambda a, b: a + b),
    ("radd-scalar", [(2, 3)], lambda a: 1.5 + a),
    ("rsub-ndarray", [(2, 3)], lambda a: np.arange(3.0) - a),
    ("sub-broadcast", [(3,), (2, 3)], lambda a, b: a - b),
    ("mul-broadcast", [(2, 1, 3), (4, 3)], lambda a, b: a * b),
    ("rmul-ndarray", [(2, 3)], lambda a: np.array([1.0, -2.0, 3.0]) * a),
    ("div-broadcast", [(2, 3), (3,)], lambda a, b: a / b),
    ("rdiv-scalar", [(2, 3)], lambda a: 2.0 / a),
    ("neg", [(2, 3)], lambda a: -a),
    ("matmul", [(2, 3), (3, 4)], lambda a, b: a @ b),
    ("matmul-method", [(2, 3), (3, 4)], lambda a, b: a.matmul(b)),
    ("matmul-vector-left", [(3,), (3, 4)], lambda a, b: a @ b),
    ("matmul-vector-right", [(2, 3), (3,)], lambda a, b: a @ b),
    ("matmul-batched-broadcast", [(2, 2, 3), (3, 4)], lambda a, b: a @ b),
    ("getitem-slices", [(3, 4)], lambda a: a[1:, ::2]),
    ("getitem-repeated-ids", [(4, 2)], lambda a: a[np.array([0, 0, 2])]),
    ("getitem-tensor-ids", [(4, 2)], lambda a: a[Tensor([[3, 3], [1, 3]])]),
    ("getitem-int", [(3, 4)], lambda a: a[1]),
    ("reshape-ints", [(2, 3)], lambda a: a.reshape(3, 2) * a.reshape(3, 2)),
    ("reshape-tuple", [(2, 3)], lambda a: a.reshape((6,)) * a.reshape(-1)),
    ("transpose-default", [(2, 3)], lambda a: a.transpose() * a.transpose()),
    ("transpose-swap", [(2, 3, 4)], lambda a: a.transpose(0, 2)),
    ("transpose-permutation", [(2, 3, 4)], lambda a: a.transpose((1, 2, 0))),
    ("sum-all", [(2, 3)], lambda a: (a * a).sum()),
    ("sum-axis", [(2, 3)], lambda a: (a * a).sum(axis=0)),
    ("sum-axes-keepdims", [(2, 3, 2)], lambda a: (a * a).sum(axis=(0, 2), keepdims=True)),
    ("mean-axis", [(2, 3)], lambda a: (a * a).mean(axis=1)),
    ("mean-all", [(2, 3)], lambda a: (a * a).mean()),
    ("max-axis", [(2, 3)], lambda a: a.max(axis=1)),
    ("max-all-keepdims", [(2, 3)], lambda a: a.max(keepdims=True)),
]


@pytest.mark.parametrize("shapes, fn", [pytest.param(s, f, id=n) for n, s, f in OPS])
def test_gradient_matches_finite_differences(
    shapes: list[tuple[int, ...]], fn: Callable[..., Tensor]
) -> None:
    rng = np.random.default_rng(11)
    arrays = [rng.uniform(0.5, 1.5, shape) for shape in shapes]  # away from 0 (div) and ties
    inputs = [Tensor(a, requires_grad=True) for a in arrays]
    out = fn(*inputs)
    weights = rng.uniform(-1.0, 1.0, out.shape)
    (out * Tensor(weights)).sum().backward()
    expected = _numeric_grads(fn, arrays, weights)
    for tensor_in, grad in zip(inputs, expected, strict=True):
        assert tensor_in.grad is not None and tensor_in.grad.shape == tensor_in.shape
        np.testing.assert_allclose(tensor_in.grad, grad, rtol=2e-2, atol=2e-2)


def test_broadcast_gradient_is_summed_over_the_batch() -> None:
    x = Tensor(np.zeros((4, 3)), requires_grad=True)
    bias = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x + bias).backward(np.ones((4, 3)))
    assert np.array_equal(bias.grad, [4.0, 4.0, 4.0])
    assert np.array_equal(x.grad, np.ones((4, 3)))


def test_max_ties_share_the_gradient() -> None:
    x = Tensor([2.0, 5.0, 5.0], requires_grad=True)
    x.max().backward()
    assert np.array_equal(x.grad, [0.0, 0.5, 0.5])


# ---------------------------------------------------------------------------------------------
# The backward engine


def test_tensor_used_twice_gets_the_sum() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x + x).sum().backward()
    assert np.array_equal(x.grad, [2.0, 2.0])


def test_diamond_graph_and_intermediate_grads() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    z = y * y + y  # dz/dx = (2y + 1) * 3
    z.sum().backward()
    assert np.allclose(x.grad, (2 * np.array([3.0, 6.0]) + 1) * 3)
    assert np.allclose(y.grad, 2 * np.array([3.0, 6.0]) + 1)


def test_deep_reuse_is_one_pass() -> None:
    h = x = Tensor([1.0], requires_grad=True)
    for _ in range(40):  # a walk that visited each edge separately would take 2**40 steps
        h = h + h
    h.backward()
    assert x.grad is not None and x.grad[0] == pytest.approx(2.0**40)


@pytest.mark.parametrize(
    "seed",
    [
        pytest.param([[1.0, 2.0], [3.0, 4.0]], id="list"),
        pytest.param(np.array([[1.0, 2.0], [3.0, 4.0]]), id="ndarray"),
        pytest.param(Tensor([[1.0, 2.0], [3.0, 4.0]]), id="tensor"),
    ],
)
def test_backward_accepts_list_array_or_tensor(seed: object) -> None:
    x = Tensor(np.ones((2, 2)), requires_grad=True)
    (x * 2).backward(seed)
    assert np.array_equal(x.grad, [[2.0, 4.0], [6.0, 8.0]])


def test_backward_without_gradient_needs_size_one() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ValueError):
        (x * 2).backward()
    (x * 2).sum().backward()
    assert np.array_equal(x.grad, [2.0, 2.0])


def test_backward_rejects_a_gradient_of_the_wrong_shape() -> None:
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ValueError):
        (x * 2).backward(np.ones((3, 2)))


def test_grad_is_an_ndarray_and_accumulates_across_calls() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    assert type(x.grad) is np.ndarray and x.grad.dtype == np.float32
    assert np.array_equal(x.grad, [6.0, 6.0])
    x.zero_grad()
    assert x.grad is None


def test_constants_get_no_grad_and_no_graph() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    c = Tensor([5.0, 7.0])
    (x * c).sum().backward()
    assert c.grad is None and np.array_equal(x.grad, [5.0, 7.0])
    derived = c * 2 + 1
    assert derived._grad_fn is None and derived.requires_grad is False


def test_no_grad_stops_recording() -> None:
    x = Tensor([1.0], requires_grad=True)
    with no_grad():
        y = x * 2
    assert y._grad_fn is None and y.requires_grad is False
    assert (x * 2)._grad_fn is not None


# ---------------------------------------------------------------------------------------------
# Old-style Function (module 05 of the older course): instance method apply(grad) -> tuple


class _TripleBackward(Function):
    """Old-style node for out = 3 * x."""

    def apply(self, grad_output: np.ndarray) -> tuple[np.ndarray]:
        assert type(grad_output) is np.ndarray
        return (3 * grad_output,)


def test_old_style_node_wired_by_hand() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    out = Tensor(x.data * 3, requires_grad=True)
    out._grad_fn = _TripleBackward(x)
    (out * out).sum().backward()  # d/dx (3x)^2 = 18x
    assert np.allclose(x.grad, [18.0, 36.0])


@pytest.mark.parametrize(
    "make_ids",
    [
        pytest.param(lambda ids: Tensor(ids), id="tensor-ids"),
        pytest.param(lambda ids: ids.astype(np.int64), id="ndarray-ids"),
    ],
)
def test_embedding_backward_as_a_student_wires_it(make_ids: Callable[[np.ndarray], object]) -> None:
    weight = Tensor(np.arange(8.0).reshape(4, 2), requires_grad=True)
    ids = np.array([[1.0, 3.0], [1.0, 1.0]])
    out = Tensor(weight.data[ids.astype(int)], requires_grad=True)
    out._grad_fn = EmbeddingBackward(weight, make_ids(ids))
    upstream = np.arange(8.0).reshape(2, 2, 2)
    out.backward(upstream)
    expected = np.zeros((4, 2))
    np.add.at(expected, ids.astype(int), upstream)
    assert np.array_equal(weight.grad, expected)
    assert np.array_equal(weight.grad[1], upstream[0, 0] + upstream[1, 0] + upstream[1, 1])


def test_old_style_node_after_a_new_style_op() -> None:
    weight = Tensor(np.ones((3, 2)), requires_grad=True)
    doubled = weight * 2
    ids = Tensor([2, 2])
    out = Tensor(doubled.data[ids.data.astype(int)], requires_grad=True)
    out._grad_fn = EmbeddingBackward(doubled, ids)
    out.sum().backward()
    assert np.array_equal(weight.grad, [[0, 0], [0, 0], [4, 4]])


def test_embedding_backward_skips_a_frozen_table() -> None:
    weight = Tensor(np.ones((3, 2)))
    assert EmbeddingBackward(weight, Tensor([0])).apply(np.ones((1, 2))) == (None,)


# ---------------------------------------------------------------------------------------------
# New-style Function (newer course): Subclass.apply(*tensors, **params), forward/backward


def _scatter_rows(weight: Tensor, indices: np.ndarray, grad_output: np.ndarray) -> np.ndarray:
    grad: np.ndarray = np.zeros_like(weight.data)
    np.add.at(grad, np.asarray(indices).reshape(-1), grad_output.reshape(-1, weight.shape[-1]))
    return grad


class _EmbeddingFunction(Function):
    """As the newer course's students write it: params arrive as attributes."""

    seen_forward_args: ClassVar[list[object]] = []

    def forward(self, weight: np.ndarray) -> np.ndarray:
        _EmbeddingFunction.seen_forward_args.append(weight)
        return weight[self.indices]

    def backward(self, grad_output: np.ndarray) -> tuple[np.ndarray]:
        (weight,) = self.inputs
        return (_scatter_rows(weight, self.indices, grad_output),)


class _EmbeddingFunctionOwnInit(_EmbeddingFunction):
    """A variant whose constructor takes the params itself."""

    def __init__(self, weight: Tensor, indices: np.ndarray) -> None:
        super().__init__(weight)
        self.ids_copy = np.array(indices)
        self.indices = indices


class _EmbeddingFunctionNoKwargs(_EmbeddingFunction):
    """A variant whose constructor rejects keyword params: they become attributes."""

    def __init__(self, weight: Tensor) -> None:
        super().__init__(weight)


class _EmbeddingFunctionTensorOut(_EmbeddingFunction):
    """A variant whose forward returns a Tensor instead of an array."""

    def forward(self, weight: np.ndarray) -> Tensor:
        return Tensor(weight[self.indices])


@pytest.mark.parametrize(
    "function",
    [
        _EmbeddingFunction,
        _EmbeddingFunctionOwnInit,
        _EmbeddingFunctionNoKwargs,
        _EmbeddingFunctionTensorOut,
    ],
    ids=["attributes", "own-init", "init-without-kwargs", "forward-returns-tensor"],
)
def test_new_style_embedding_function(function: type[_EmbeddingFunction]) -> None:
    _EmbeddingFunction.seen_forward_args.clear()
    weight = Tensor(np.arange(8.0).reshape(4, 2), requires_grad=True)
    out = function.apply(weight, indices=np.array([0, 2, 0]))
    assert isinstance(out, Tensor) and np.array_equal(out.data, [[0, 1], [4, 5], [0, 1]])
    assert out.requires_grad and isinstance(out._grad_fn, function)
    (out * Tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])).sum().backward()
    assert np.array_equal(weight.grad, [[2, 2], [0, 0], [1, 1], [0, 0]])
    if function is not _EmbeddingFunctionTensorOut:
        assert all(type(a) is np.ndarray for a in _EmbeddingFunction.seen_forward_args)


def test_new_style_function_without_grad_inputs_records_nothing() -> None:
    out = _EmbeddingFunction.apply(Tensor(np.ones((3, 2))), indices=np.array([1]))
    assert out._grad_fn is None and out.requires_grad is False and out.shape == (1, 2)


def test_function_is_one_class_in_both_modules() -> None:
    assert tensor.Function is autograd.Function is Function
    assert issubclass(EmbeddingBackward, Function)


# ---------------------------------------------------------------------------------------------
# What module-11 code does with the runtime


def test_positional_slice_gradient_lands_in_the_used_rows() -> None:
    table = Tensor(np.zeros((5, 2)), requires_grad=True)
    x = Tensor(np.ones((3, 4, 2)), requires_grad=True)
    out = x + table[:4]
    out.backward(np.ones((3, 4, 2)))
    assert np.array_equal(table.grad[:4], np.full((4, 2), 3.0))  # summed over the batch of 3
    assert np.array_equal(table.grad[4], [0.0, 0.0])
    assert np.array_equal(x.grad, np.ones((3, 4, 2)))


def test_scaling_by_sqrt_d_scales_the_gradient() -> None:
    emb = Tensor(np.ones((1, 2, 4)), requires_grad=True)
    (emb * math.sqrt(4)).sum().backward()
    assert np.array_equal(emb.grad, np.full((1, 2, 4), 2.0))


def test_adding_a_fixed_sinusoid_leaves_it_without_grad() -> None:
    emb = Tensor(np.ones((2, 3, 4)), requires_grad=True)
    fixed = Tensor(np.ones((3, 4)))
    (emb + fixed[:3]).sum().backward()
    assert fixed.grad is None and np.array_equal(emb.grad, np.ones((2, 3, 4)))


# ---------------------------------------------------------------------------------------------
# Packaging promises


def test_enable_autograd_is_idempotent_and_silent(capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(3):
        enable_autograd()
    enable_autograd(quiet=False)
    assert capsys.readouterr() == ("", "")
    assert Tensor._autograd_enabled is True


def test_a_layer_subclass_gets_call_parameters_and_repr_from_the_base() -> None:
    from tinytorch.core.layers import Layer

    class Shift(Layer):
        def __init__(self) -> None:
            super().__init__()
            self.table = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)

        def forward(self, x: Tensor, start_pos: int = 0) -> Tensor:
            return x + self.table[start_pos : start_pos + 1]

    layer = Shift()
    out = layer(Tensor([[10.0, 20.0]]), start_pos=1)  # extra arguments reach forward
    np.testing.assert_array_equal(out.data, [[13.0, 24.0]])
    assert Layer().parameters() == [] and repr(layer) == "Shift()"
    with pytest.raises(NotImplementedError, match=r"Layer\.forward"):
        Layer()(Tensor([1.0]))


def test_importing_the_runtime_prints_nothing() -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "import tinytorch, tinytorch.core.tensor, tinytorch.core.autograd, tinytorch.core.layers"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", code, str(RUNTIME)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""


def test_runtime_holds_no_module_11_solution() -> None:
    for name in ("tinytorch.core.embeddings", "tinytorch.text", "tinytorch.nn"):
        assert importlib.util.find_spec(name) is None
    sources = "\n".join(p.read_text() for p in RUNTIME.rglob("*.py"))
    for forbidden in (
        "class Embedding:",
        "class Embedding(",
        "class PositionalEncoding",
        "def create_sinusoidal_embeddings",
        "class EmbeddingLayer",
    ):
        assert forbidden not in sources


@pytest.mark.parametrize("path", sorted(RUNTIME.rglob("*.py")), ids=lambda p: p.name)
def test_runtime_parses_as_python_3_9(path: object) -> None:
    ast.parse(path.read_text(), feature_version=(3, 9))  # type: ignore[attr-defined]
