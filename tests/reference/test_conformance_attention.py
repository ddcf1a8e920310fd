"""Conformance of the course runtime with TinyTorch on what module 12 (Attention) adds to module 11's
needs: `Linear` (module 03), `Softmax` (module 02), `Tensor.masked_fill` and 4-D transposes.

Observed as in test_conformance.py (the values are ours; no upstream code is in this repository):

- older generation: MLSysBook/TinyTorch at 02364f80, `tinytorch/core/layers.py` and
  `tinytorch/core/autograd.py` with `src/02_activations/02_activations.py` as
  `tinytorch/core/activations.py` (the older export lacks that file; its autograd patches Softmax);
- newer generation: the values that harvard-edge/cs249r_book's own module-12 tests assert
  (`tinytorch/tests/12_attention/test_attention_contracts.py`) and the module's docstrings
  (`parameters()` EXAMPLE: q_proj's weight (64, 64) then its bias (64,)).

The older Tensor has no `masked_fill` (its module 12 adds a -1e9 constant instead), so the
masked_fill tests are newer-generation only (run against the older snapshot, exactly those three
fail). Where the runtime is more lenient than a generation
(a `masked_fill` mask given as a Tensor, say), the test says so.
"""

from __future__ import annotations

import numpy as np
import pytest
from tinytorch.core.activations import Softmax
from tinytorch.core.layers import Linear
from tinytorch.core.tensor import Tensor


def _linear_3_2() -> Linear:
    layer = Linear(3, 2)
    layer.weight.data[...] = np.arange(6.0).reshape(3, 2)
    layer.bias.data[...] = [1.0, -1.0]
    return layer


def test_linear_holds_weight_in_by_out_and_a_zero_bias() -> None:
    """Both generations."""
    layer = Linear(3, 2)
    assert layer.weight.shape == (3, 2) and layer.weight.requires_grad
    assert layer.bias is not None and layer.bias.shape == (2,) and layer.bias.requires_grad
    np.testing.assert_array_equal(layer.bias.data, [0.0, 0.0])
    params = layer.parameters()
    assert len(params) == 2 and params[0] is layer.weight and params[1] is layer.bias


def test_linear_without_bias() -> None:
    """Older generation (bias=None, one parameter)."""
    layer = Linear(3, 2, bias=False)
    assert layer.bias is None and layer.parameters() == [layer.weight]


def test_linear_forward_and_backward_on_a_batch() -> None:
    """Older generation observed; the newer one's Linear is the same x @ W + b."""
    layer = _linear_3_2()
    x = Tensor(np.array([[[1.0, 2, 3], [0, 1, 0]]]), requires_grad=True)
    y = layer(x)
    np.testing.assert_array_equal(y.data, [[[17, 21], [3, 2]]])
    y.backward(np.ones((1, 2, 2)))
    np.testing.assert_array_equal(x.grad, [[[1, 5, 9], [1, 5, 9]]])
    np.testing.assert_array_equal(layer.weight.grad, [[1, 1], [3, 3], [3, 3]])
    np.testing.assert_array_equal(layer.bias.grad, [2, 2])


def test_softmax_values_and_gradient() -> None:
    """Older generation observed (float32; a uniform row for equal scores)."""
    z = Tensor(np.array([[1.0, 2, 3], [0, 0, 0]]), requires_grad=True)
    out = Softmax()(z, dim=-1)
    assert out.data.dtype == np.float32
    np.testing.assert_allclose(out.data, [[0.090031, 0.244728, 0.665241], [1 / 3, 1 / 3, 1 / 3]], atol=1e-6)
    out.backward(np.array([[1.0, 0, 0], [0, 2, 0]]))
    np.testing.assert_allclose(z.grad, [[0.081925, -0.022033, -0.059892], [-0.222222, 0.444444, -0.222222]],
                               atol=1e-6)


def test_softmax_along_another_axis() -> None:
    """Older generation observed: dim selects the normalised axis, for values and gradient."""
    z = Tensor(np.array([[1.0, 2], [3, 5]]), requires_grad=True)
    out = Softmax().forward(z, dim=0)
    np.testing.assert_allclose(out.data, [[0.119203, 0.047426], [0.880797, 0.952574]], atol=1e-6)
    out.backward(np.array([[1.0, 0], [0, 1]]))
    np.testing.assert_allclose(z.grad, [[0.104994, -0.045177], [-0.104994, 0.045177]], atol=1e-6)


def test_softmax_of_minus_infinity_is_zero() -> None:
    """Older generation observed; the newer one's masking relies on it (exp(-inf) = 0)."""
    out = Softmax()(Tensor(np.array([[0.0, -np.inf, 1.0]])))
    np.testing.assert_allclose(out.data, [[0.268941, 0.0, 0.731059]], atol=1e-6)


def test_four_dimensional_transposes_and_reshape() -> None:
    """Older generation observed: transpose(a, b) swaps those two axes, negatives count from the end."""
    q = Tensor(np.ones((2, 3, 4, 5)))
    assert q.transpose(-2, -1).shape == (2, 3, 5, 4)
    assert q.transpose(1, 2).shape == (2, 4, 3, 5)
    assert q.reshape(2, 4, 3, 5).shape == (2, 4, 3, 5)


def _masked_attention(q: Tensor, k: Tensor, v: Tensor, blocked: np.ndarray) -> tuple[Tensor, Tensor]:
    scores = q.matmul(k.transpose(-2, -1)).masked_fill(np.broadcast_to(blocked, (*q.shape[:-1], k.shape[-2])),
                                                       float("-inf"))
    weights = Softmax()(scores, dim=-1)
    return weights.matmul(v), weights


def test_masked_fill_keeps_a_huge_score_masked() -> None:
    """Newer generation: test_large_logits_cannot_override_causal_mask (scores of 1e10)."""
    q = Tensor([[[1e5], [1e5]]])
    k = Tensor(np.array([0.0, 1e5]).reshape(1, 2, 1))
    v = Tensor([[[1.0], [99.0]]])
    out, weights = _masked_attention(q, k, v, np.array([[0, 1], [0, 0]]) == 1)
    np.testing.assert_array_equal(weights.data[0, 0], [1.0, 0.0])
    assert out.data[0, 0, 0] == 1.0 and np.isfinite(out.data).all()


def test_masked_fill_passes_no_gradient_to_blocked_scores() -> None:
    """Newer generation: test_broadcast_padding_mask_blocks_value_gradients (v.grad [12, 0], q and k 0)."""
    q = Tensor(np.ones((2, 3, 2, 1)), requires_grad=True)
    k = Tensor(np.array([0.0, 1e5]).reshape(1, 1, 2, 1), requires_grad=True)
    v = Tensor(np.array([1.0, 99.0]).reshape(1, 1, 2, 1), requires_grad=True)
    out, weights = _masked_attention(q, k, v, np.array([False, True]))
    out.sum().backward()
    np.testing.assert_array_equal(weights.data[..., 1], 0.0)
    np.testing.assert_array_equal(v.grad.reshape(-1), [12.0, 0.0])
    np.testing.assert_array_equal(q.grad, 0.0)
    np.testing.assert_array_equal(k.grad, 0.0)


def test_masked_fill_returns_a_new_tensor() -> None:
    """Newer generation (the module's prose: the input is not modified). The runtime also takes the
    mask as a Tensor (lenient)."""
    scores = Tensor(np.ones((1, 2, 2)), requires_grad=True)
    filled = scores.masked_fill(Tensor(np.array([[0.0, 1.0], [0.0, 0.0]])), -5.0)
    np.testing.assert_array_equal(filled.data, [[[1, -5], [1, 1]]])
    np.testing.assert_array_equal(scores.data, np.ones((1, 2, 2)))
    filled.backward(np.full((1, 2, 2), 3.0))
    np.testing.assert_array_equal(scores.grad, [[[3, 0], [3, 3]]])


@pytest.mark.parametrize("dim", [-1, 2])
def test_softmax_rows_sum_to_one_for_attention_scores(dim: int) -> None:
    """Both generations' unit tests: every query's weights sum to 1."""
    out = Softmax()(Tensor(np.arange(24.0).reshape(2, 3, 4) / 7), dim=dim)
    np.testing.assert_allclose(out.data.sum(axis=-1), 1.0, atol=1e-6)
