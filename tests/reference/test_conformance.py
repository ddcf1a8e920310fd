"""Conformance of the course runtime with TinyTorch's own Tensor and autograd, on what module 11 uses.

The runtime in `reference/runtime/tinytorch` stands in for a student's modules 01 and 05/06 when a
module-11 notebook is graded. Every expected value below was first observed by running the same
scenario on TinyTorch's own code (the values are ours; no upstream code is in this repository):

- older generation: MLSysBook/TinyTorch at 02364f80 (`tinytorch/core/tensor.py` and
  `tinytorch/core/autograd.py`, exported from modules 01 and 05; `enable_autograd()` runs on import);
- newer generation: harvard-edge/cs249r_book at 002db7c9 (`tinytorch/src/01_tensor`,
  `tinytorch/src/06_autograd`: `Function.apply` records `_grad_fn`, `Tensor.backward` walks a
  topological order).

`bash scripts/conformance-upstream.sh DIR` runs this file against a TinyTorch package in DIR instead.
Each test names the generations it was observed in. Where they disagree the runtime takes one side,
and the test says which and why (`DEVIATION`):

- slice backward with a gradient that has extra leading 1s (a slice's `_grad_fn` moved onto a
  rewrapped `(1, T, D)` tensor): the older generation assigns and accepts it, the newer one uses
  `np.add.at` and raises. The runtime accepts it: the older official solution relies on it.
- indexing with repeated integer ids: the older generation keeps one gradient row per id
  (assignment), the newer one sums them (`np.add.at`). The runtime sums (the true gradient).
- a second `backward()` through the same graph: the older generation accumulates again, the newer
  one raises (it releases the graph). The runtime keeps the graph (old behaviour, a superset).
- old-style nodes (`apply(grad)` returning a tuple, `EmbeddingBackward`) exist only in the older
  generation, and `Function.apply(*tensors, **params)` with forward/backward only in the newer one;
  the runtime offers both.
- seeds given as lists or Tensors, scalar-on-the-left arithmetic, `no_grad` and `Tensor(list of
  Tensors)` exist only in the newer generation; the runtime accepts them.

Where module-11 code can reach it, the runtime is also more lenient than both snapshots. These are
deliberate (other course versions may differ) and are not pinned here: indexing with a Tensor of
ids (both raise IndexError), `Tensor(a Tensor)` (both raise ValueError), `len(t)` (neither defines
`__len__`), `EmbeddingBackward` given ndarray ids (the older one fails at backward).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest
from tinytorch.core import autograd
from tinytorch.core.autograd import EmbeddingBackward, no_grad
from tinytorch.core.tensor import Function, Tensor


def _table(*shape: int, requires_grad: bool = True) -> Tensor:
    """A tensor holding 0, 1, 2, ... in `shape`."""
    return Tensor(np.arange(math.prod(shape), dtype=np.float64).reshape(shape), requires_grad=requires_grad)


def _assert_grad(tensor: Tensor, expected: object) -> None:
    """The gradient is a float32 ndarray with exactly the expected values."""
    assert type(tensor.grad) is np.ndarray and tensor.grad.dtype == np.float32
    np.testing.assert_array_equal(tensor.grad, np.asarray(expected, dtype=np.float32))


# ---------------------------------------------------------------------------------------------
# Slicing and __getitem__ backward


SLICES: list[tuple[str, tuple[int, ...], Callable[[Tensor], Tensor], np.ndarray, list[list[float]]]] = [
    # id, table shape, slice, gradient fed to the slice, gradient expected on the table
    ("prefix", (5, 2), lambda p: p[:3], np.full((3, 2), 2.0), [[2, 2], [2, 2], [2, 2], [0, 0], [0, 0]]),
    ("window", (5, 2), lambda p: p[1:3], np.array([[1.0, 2.0], [3.0, 4.0]]), [[0, 0], [1, 2], [3, 4], [0, 0], [0, 0]]),
    ("int", (5, 2), lambda p: p[1], np.array([5.0, 6.0]), [[0, 0], [5, 6], [0, 0], [0, 0], [0, 0]]),
    ("tuple-step", (3, 4), lambda p: p[1:, ::2], np.ones((2, 2)), [[0, 0, 0, 0], [1, 0, 1, 0], [1, 0, 1, 0]]),
    ("newaxis", (5, 2), lambda p: p[np.newaxis, :3], np.ones((1, 3, 2)), [[1, 1], [1, 1], [1, 1], [0, 0], [0, 0]]),
]


@pytest.mark.parametrize("shape, take, seed, expected", [pytest.param(*s[1:], id=s[0]) for s in SLICES])
def test_slice_backward_scatters_into_the_sliced_positions(
    shape: tuple[int, ...], take: Callable[[Tensor], Tensor], seed: np.ndarray, expected: list[list[float]]
) -> None:
    """Both generations."""
    table = _table(*shape)
    part = take(table)
    assert part.requires_grad and part.shape == seed.shape
    part.backward(seed)
    _assert_grad(table, expected)


def test_slice_backward_takes_a_gradient_with_a_leading_batch_axis() -> None:
    """Older generation (assignment accepts it). DEVIATION: the newer one raises ValueError."""
    table = _table(5, 2)
    part = table[:3]
    batched = Tensor(part.data[np.newaxis], requires_grad=True)
    batched._grad_fn = part._grad_fn
    batched.backward(np.full((1, 3, 2), 2.0))
    _assert_grad(batched, np.full((1, 3, 2), 2.0))
    _assert_grad(table, [[2, 2], [2, 2], [2, 2], [0, 0], [0, 0]])


def test_slice_backward_rejects_a_gradient_of_another_shape() -> None:
    """Both generations raise ValueError."""
    table = _table(5, 2)
    part = table[:3]
    short = Tensor(np.ones((2, 2)), requires_grad=True)
    short._grad_fn = part._grad_fn
    with pytest.raises(ValueError):
        short.backward(np.ones((2, 2)))


def test_repeated_ids_sum_their_gradients() -> None:
    """Newer generation. DEVIATION: the older one gives [[1, 1], [0, 0], [1, 1], [0, 0]]."""
    table = _table(4, 2)
    table[np.array([0, 0, 2])].backward(np.ones((3, 2)))
    _assert_grad(table, [[2, 2], [0, 0], [1, 1], [0, 0]])


# ---------------------------------------------------------------------------------------------
# `_grad_fn` moved between tensors, and `Tensor(... .data ...)` rewrapping


def test_slice_grad_fn_moved_onto_a_rewrapped_batch_tensor() -> None:
    """Older generation; its official PositionalEncoding.forward does exactly this."""
    table = _table(5, 2)
    x = Tensor(np.zeros((2, 3, 2)), requires_grad=True)
    part = table[:3]
    batched = Tensor(part.data[np.newaxis, :, :], requires_grad=part.requires_grad)
    batched._grad_fn = part._grad_fn
    out = x + batched
    upstream = np.arange(12.0).reshape(2, 3, 2)
    out.backward(upstream)
    np.testing.assert_array_equal(out.data, [[[0, 1], [2, 3], [4, 5]]] * 2)
    _assert_grad(x, upstream)
    _assert_grad(batched, [[[6, 8], [10, 12], [14, 16]]])
    _assert_grad(table, [[6, 8], [10, 12], [14, 16], [0, 0], [0, 0]])


def test_moved_grad_fn_is_ignored_without_requires_grad() -> None:
    """Both generations: a tensor that does not require grad passes nothing back."""
    table = _table(5, 2)
    x = Tensor(np.zeros((2, 3, 2)), requires_grad=True)
    part = table[:3]
    batched = Tensor(part.data[np.newaxis])
    batched._grad_fn = part._grad_fn
    (x + batched).backward(np.ones((2, 3, 2)))
    assert table.grad is None
    _assert_grad(x, np.ones((2, 3, 2)))


def test_rewrapping_data_makes_a_new_leaf() -> None:
    """Both generations: `Tensor(t.data)` has no graph, so nothing reaches `t`."""
    table = _table(5, 2)
    x = Tensor(np.zeros((2, 3, 2)), requires_grad=True)
    leaf = Tensor(table[:3].data[np.newaxis], requires_grad=True)
    assert getattr(leaf, "_grad_fn", None) is None
    (x + leaf).backward(np.full((2, 3, 2), 1.0))
    assert table.grad is None
    _assert_grad(leaf, np.full((1, 3, 2), 2.0))


# ---------------------------------------------------------------------------------------------
# Broadcasting add and mul


def test_add_sums_the_gradient_over_broadcast_axes() -> None:
    """Both generations."""
    x = Tensor(np.zeros((4, 3)), requires_grad=True)
    row = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    upstream = np.arange(12.0).reshape(4, 3)
    (x + row).backward(upstream)
    _assert_grad(x, upstream)
    _assert_grad(row, [18, 22, 26])

    column = Tensor([[1.0], [2.0]], requires_grad=True)
    (Tensor(np.zeros((2, 3))) + column).backward(np.arange(6.0).reshape(2, 3))
    _assert_grad(column, [[3], [12]])


def test_positions_added_to_a_batch_get_the_batch_sum() -> None:
    """Both generations: (B, T, D) + (T, D)."""
    positions = _table(4, 2)
    x = Tensor(np.zeros((3, 4, 2)), requires_grad=True)
    (x + positions).backward(np.arange(24.0).reshape(3, 4, 2))
    _assert_grad(positions, [[24, 27], [30, 33], [36, 39], [42, 45]])


def test_mul_broadcasts_both_ways() -> None:
    """Both generations: (2, 1, 3) * (4, 3)."""
    a = _table(2, 1, 3)
    b = _table(4, 3)
    (a * b).backward(np.ones((2, 4, 3)))
    _assert_grad(a, [[[18, 22, 26]], [[18, 22, 26]]])
    _assert_grad(b, [[3, 5, 7]] * 4)


def test_mul_by_a_python_float() -> None:
    """Both generations: the scale_embeddings path, `emb * math.sqrt(D)`."""
    emb = Tensor(np.ones((1, 2, 4)), requires_grad=True)
    scaled = emb * math.sqrt(4)
    assert scaled.requires_grad
    scaled.backward(np.ones((1, 2, 4)))
    _assert_grad(emb, np.full((1, 2, 4), 2.0))


def test_scalar_on_the_left() -> None:
    """Newer generation (the older one has no __radd__ / __rmul__ and raises TypeError)."""
    x = Tensor([1.0, 2.0], requires_grad=True)
    np.testing.assert_array_equal((3 + x).data, [4, 5])
    (3 + x + 2.0 * x).backward(np.ones(2))
    _assert_grad(x, [3, 3])


# ---------------------------------------------------------------------------------------------
# reshape


def test_reshape_call_forms() -> None:
    """Both generations."""
    t = _table(2, 3)
    shapes = [t.reshape(3, 2).shape, t.reshape((3, 2)).shape, t.reshape(-1).shape, t.reshape(1, -1).shape]
    assert shapes == [(3, 2), (3, 2), (6,), (1, 6)]
    with pytest.raises(ValueError):
        t.reshape(4, 2)


def test_reshape_backward_restores_the_shape() -> None:
    """Both generations."""
    t = _table(2, 3)
    reshaped = t.reshape(1, 3, 2)
    assert reshaped.requires_grad
    reshaped.backward(np.arange(6.0).reshape(1, 3, 2))
    _assert_grad(t, [[0, 1, 2], [3, 4, 5]])


def test_reshaping_token_ids_records_nothing() -> None:
    """Both generations: EmbeddingLayer's 1-D input path."""
    tokens = Tensor([1, 2, 3]).reshape(1, -1)
    assert tokens.shape == (1, 3) and tokens.requires_grad is False
    assert getattr(tokens, "_grad_fn", None) is None


def test_embedding_layer_one_dimensional_path() -> None:
    """Both generations: reshape ids, look up, add positions, take row 0 of the batch."""
    weight = _table(4, 2)
    tokens = Tensor([2, 0]).reshape(1, -1)
    positions = _table(3, 2)
    out = (weight[tokens.data.astype(int)] + positions[:2])[0]
    np.testing.assert_array_equal(out.data, [[4, 6], [2, 4]])
    out.backward(np.ones((2, 2)))
    _assert_grad(weight, [[1, 1], [0, 0], [1, 1], [0, 0]])
    _assert_grad(positions, [[1, 1], [1, 1], [0, 0]])


# ---------------------------------------------------------------------------------------------
# requires_grad propagation


def _propagation_cases() -> dict[str, Tensor]:
    constant = Tensor([1.0, 2.0])
    x = Tensor([1.0, 2.0], requires_grad=True)
    return {
        "c + c": constant + constant,
        "c * 2": constant * 2,
        "c[:1]": constant[:1],
        "Tensor(x.data)": Tensor(x.data),
        "x + c": x + constant,
        "c + x": constant + x,
        "x * 2": x * 2,
        "x[:1]": x[:1],
        "x.reshape(2, 1)": x.reshape(2, 1),
    }


def test_requires_grad_propagates_exactly_from_inputs() -> None:
    """Both generations: an op result requires grad, with a `_grad_fn`, iff an input does."""
    observed = {name: (t.requires_grad, getattr(t, "_grad_fn", None) is not None) for name, t in _propagation_cases().items()}
    tracked = {"x + c", "c + x", "x * 2", "x[:1]", "x.reshape(2, 1)"}
    assert observed == {name: (name in tracked, name in tracked) for name in observed}


def test_a_constant_gets_no_gradient() -> None:
    """Both generations: backward() on a tensor that does not require grad does nothing."""
    constant = Tensor([1.0, 2.0])
    (constant * 2).backward(np.ones(2))
    assert constant.grad is None


# ---------------------------------------------------------------------------------------------
# `.data` and `.grad`: types and dtypes


@pytest.mark.parametrize(
    "data, shape",
    [
        pytest.param([1, 2], (2,), id="int-list"),
        pytest.param(np.array([1.5, 2.5]), (2,), id="float64"),
        pytest.param(np.array([3, 4]), (2,), id="int64"),
        pytest.param(3, (), id="python-scalar"),
        pytest.param([[1, 2], [3, 4]], (2, 2), id="nested-list"),
    ],
)
def test_data_is_always_a_float32_ndarray(data: Any, shape: tuple[int, ...]) -> None:
    """Both generations (token ids arrive as float32 too)."""
    t = Tensor(data)
    assert type(t.data) is np.ndarray and t.data.dtype == np.float32 and t.dtype == np.float32
    assert t.shape == shape


def test_data_is_a_copy_of_the_array() -> None:
    """Both generations."""
    source = np.zeros(3, dtype=np.float32)
    t = Tensor(source)
    source[0] = 5.0
    assert t.data[0] == 0.0


def test_fresh_tensor_has_no_grad_and_no_grad_fn() -> None:
    """Newer generation (the older one only creates `_grad_fn` when an op sets it)."""
    t = Tensor([1.0])
    assert t.grad is None and t.requires_grad is False and t._grad_fn is None


def test_grad_is_float32_even_from_a_float64_seed() -> None:
    """Both generations."""
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * 3).backward(np.array([1.0, 1.0], dtype=np.float64))
    _assert_grad(x, [3, 3])


def test_grad_accumulates_over_backward_calls() -> None:
    """Both generations."""
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * 3).backward(np.ones(2))
    (x * 3).backward(np.ones(2))
    _assert_grad(x, [6, 6])


def test_second_backward_through_the_same_graph() -> None:
    """Older generation. DEVIATION: the newer one releases the graph and raises RuntimeError."""
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.backward(np.ones(2))
    assert y._grad_fn is not None
    y.backward(np.ones(2))
    _assert_grad(x, [6, 6])


# ---------------------------------------------------------------------------------------------
# backward() on non-scalars


def test_non_scalar_backward_needs_a_gradient() -> None:
    """Both generations raise ValueError; a size-1 tensor of any rank needs none."""
    x = Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ValueError):
        (x * 2).backward()
    single = Tensor([[3.0]], requires_grad=True)
    (single * 2).backward()
    _assert_grad(single, [[2]])


def test_non_scalar_backward_rejects_a_transposed_gradient() -> None:
    """Both generations raise ValueError."""
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ValueError):
        (x * 2).backward(np.ones((3, 2)))


@pytest.mark.parametrize(
    "seed",
    [
        pytest.param(np.ones(2), id="ndarray"),  # both generations
        pytest.param([1.0, 1.0], id="list"),  # newer generation
        pytest.param(Tensor([1.0, 1.0]), id="tensor"),  # newer generation
    ],
)
def test_non_scalar_backward_seed_kinds(seed: Any) -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * 2).backward(seed)
    _assert_grad(x, [2, 2])


def test_scalar_loss_and_a_reused_leaf() -> None:
    """Both generations: sum() seeds with 1; a leaf used twice gets both contributions."""
    x = _table(2, 3)
    (x * x).sum().backward()
    _assert_grad(x, [[0, 2, 4], [6, 8, 10]])
    y = Tensor([1.0, 2.0], requires_grad=True)
    (y * y + y).backward(np.ones(2))
    _assert_grad(y, [3, 5])


# ---------------------------------------------------------------------------------------------
# Old-style nodes: `apply(grad_output)` returning a tuple, wired with `out._grad_fn = Node(...)`


class _Triple(Function):
    """Old-style node for out = 3 * x."""

    def apply(self, grad_output: np.ndarray) -> tuple[np.ndarray]:
        assert type(grad_output) is np.ndarray
        return (3 * grad_output,)


def test_old_style_node() -> None:
    """Older generation (the newer one calls `backward` and raises NotImplementedError)."""
    x = Tensor([1.0, 2.0], requires_grad=True)
    out = Tensor(x.data * 3, requires_grad=True)
    out._grad_fn = _Triple(x)
    assert out._grad_fn.saved_tensors == (x,)
    out.backward(np.array([1.0, 2.0]))
    _assert_grad(x, [3, 6])


def test_embedding_backward_wired_as_the_older_solution_does() -> None:
    """Older generation: `from tinytorch.core.autograd import EmbeddingBackward`."""
    assert autograd.EmbeddingBackward is EmbeddingBackward
    weight = _table(4, 2)
    ids = Tensor([[1, 3], [1, 1]])
    out = Tensor(weight.data[ids.data.astype(int)], requires_grad=True)
    out._grad_fn = EmbeddingBackward(weight, ids)
    upstream = np.arange(8.0).reshape(2, 2, 2)
    out.backward(upstream)
    _assert_grad(out, upstream)
    _assert_grad(weight, [[0, 0], [10, 13], [0, 0], [2, 3]])


def test_embedding_backward_of_a_frozen_table() -> None:
    """Older generation: a table that does not require grad gets `(None,)`."""
    assert EmbeddingBackward(Tensor(np.ones((3, 2))), Tensor([0])).apply(np.ones((1, 2))) == (None,)


# ---------------------------------------------------------------------------------------------
# New-style nodes: `Node.apply(*tensors, **params)` with forward/backward


class _Gather(Function):
    """New-style node as the newer course's students write EmbeddingFunction."""

    seen: ClassVar[list[tuple[str, str]]] = []

    def forward(self, weight: np.ndarray) -> np.ndarray:
        _Gather.seen.append(("forward", type(weight).__name__))
        return weight[self.indices]

    def backward(self, grad_output: np.ndarray) -> tuple[np.ndarray]:
        _Gather.seen.append(("backward", f"{type(grad_output).__name__} {grad_output.dtype}"))
        (weight,) = self.inputs
        grad = np.zeros_like(weight.data)
        np.add.at(grad, np.asarray(self.indices).flatten(), grad_output.reshape(-1, grad_output.shape[-1]))
        return (grad,)


def test_new_style_node() -> None:
    """Newer generation (the older `Function.apply` is an instance method and raises TypeError)."""
    _Gather.seen.clear()
    weight = _table(4, 2)
    out = _Gather.apply(weight, indices=np.array([0, 2, 0]))
    np.testing.assert_array_equal(out.data, [[0, 1], [4, 5], [0, 1]])
    node = out._grad_fn
    assert out.requires_grad and isinstance(node, _Gather) and node.output is out
    assert node.inputs == (weight,)
    out.backward(np.ones((3, 2), dtype=np.float32))
    _assert_grad(weight, [[2, 2], [0, 0], [1, 1], [0, 0]])
    assert _Gather.seen == [("forward", "ndarray"), ("backward", "ndarray float32")]


def test_node_repr_names_the_operation() -> None:
    """Newer generation: a `...Function` node shows as `<...Backward>`."""

    class EmbeddingFunction(Function):
        def forward(self, weight: np.ndarray) -> np.ndarray:
            return weight

    assert repr(EmbeddingFunction.apply(Tensor([1.0], requires_grad=True))._grad_fn) == "<EmbeddingBackward>"


def test_new_style_node_without_grad_inputs_records_nothing() -> None:
    """Newer generation."""
    out = _Gather.apply(Tensor(np.ones((3, 2))), indices=np.array([1]))
    assert out.shape == (1, 2) and out.requires_grad is False and out._grad_fn is None


def test_function_keeps_params_as_attributes() -> None:
    """Newer generation: `Function(*inputs, **params)` sets each param on the node."""
    node = Function(Tensor([1.0]), key=3)
    assert node.key == 3 and len(node.inputs) == 1


def test_no_grad_records_nothing() -> None:
    """Newer generation."""
    x = Tensor([1.0], requires_grad=True)
    with no_grad():
        y = x * 2
    assert y.requires_grad is False and y._grad_fn is None


class _BareGather(_Gather):
    """The same node, its backward returning the gradient array itself, not a one-element tuple."""

    def backward(self, grad_output: np.ndarray) -> np.ndarray:  # type: ignore[override]
        (weight,) = self.inputs
        grad: np.ndarray = np.zeros_like(weight.data)
        np.add.at(grad, self.indices, grad_output)
        return grad


def test_a_backward_that_returns_a_bare_array_hands_the_input_its_first_row() -> None:
    """Both generations zip the inputs with what backward returned, so the weight gets the first row
    of its gradient. Newer generation: that row's shape is refused (ValueError). DEVIATION: the older
    one broadcasts the row over the whole table, a wrong gradient with no error; the runtime refuses
    it as the newer one does (a correct backward never returns a bare array in either)."""
    table = Tensor(np.ones((4, 2)), requires_grad=True)
    out = _BareGather.apply(table, indices=np.array([1, 3]))
    with pytest.raises(ValueError, match=r"gradient of shape \(2,\) for a tensor of shape \(4, 2\)"):
        out.backward(np.ones((2, 2)))
