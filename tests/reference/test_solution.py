"""The reference solution of module 11 (grader/modules/embeddings/reference/solution.py) on the spec cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from embeddings import Embedding, EmbeddingLayer, PositionalEncoding, create_sinusoidal_embeddings
from tinytorch.core.tensor import Tensor


@pytest.fixture
def seeded_table() -> Embedding:
    """Vocab 4, d_model 2, row v = (10v, 10v + 1)."""
    layer = Embedding(4, 2)
    layer.weight.data = np.array([[10.0 * v, 10.0 * v + 1.0] for v in range(4)])
    return layer


def _nonzero_rows(grad: np.ndarray) -> int:
    return int(np.count_nonzero(np.any(grad != 0, axis=1)))


# ---------------------------------------------------------------------------------------------
# Embedding: the seed spec cases


def test_forward_reads_the_rows_of_the_ids(seeded_table: Embedding) -> None:
    out = seeded_table(Tensor([2, 0]))
    assert np.array_equal(out.data, [[20.0, 21.0], [0.0, 1.0]])


def test_repeated_id_sums_its_gradients(seeded_table: Embedding) -> None:
    seeded_table(Tensor([1, 1])).backward(np.array([[1.0, 2.0], [3.0, 4.0]]))
    grad = seeded_table.weight.grad
    assert np.array_equal(grad[1], [4.0, 6.0])
    assert np.array_equal(grad[0], [0.0, 0.0])
    assert np.array_equal(grad[[2, 3]], np.zeros((2, 2)))


def test_each_gradient_row_goes_to_its_own_id(seeded_table: Embedding) -> None:
    seeded_table(Tensor([1, 3])).backward(np.array([[1.0, 2.0], [3.0, 4.0]]))
    grad = seeded_table.weight.grad
    assert np.array_equal(grad[3], [3.0, 4.0]) and np.array_equal(grad[1], [1.0, 2.0])
    assert np.array_equal(grad[[0, 2]], np.zeros((2, 2)))


@pytest.mark.parametrize(
    "ids, rows",
    [pytest.param([2, 2], 1, id="token-2-twice"), pytest.param([1, 3], 2, id="tokens-1-and-3")],
)
def test_rows_touched_by_one_backward_on_a_fresh_layer(ids: list[int], rows: int) -> None:
    layer = Embedding(4, 2)  # fresh layer: only this read's gradient is counted
    layer(Tensor(ids)).backward(np.ones((2, 2)))
    assert _nonzero_rows(layer.weight.grad) == rows


def test_gradients_accumulate_across_reads_of_one_layer() -> None:
    layer = Embedding(4, 2)
    layer(Tensor([2, 2])).backward(np.ones((2, 2)))
    layer(Tensor([1, 3])).backward(np.ones((2, 2)))
    assert _nonzero_rows(layer.weight.grad) == 3
    assert np.array_equal(layer.weight.grad[2], [2.0, 2.0])


def test_newer_course_case_tokens_0_2_0() -> None:
    layer = Embedding(4, 2)
    layer(Tensor([0, 2, 0])).sum().backward()
    assert np.array_equal(layer.weight.grad, [[2, 2], [0, 0], [1, 1], [0, 0]])


def test_batched_ids_give_a_3d_output(seeded_table: Embedding) -> None:
    out = seeded_table(Tensor([[0, 1, 2], [3, 2, 1]]))
    assert out.shape == (2, 3, 2) and np.array_equal(out.data[1, 0], [30.0, 31.0])


@pytest.mark.parametrize(
    "ids",
    [
        pytest.param([4], id="id-equal-vocab"),
        pytest.param([0, 9], id="id-above-vocab"),
        pytest.param([-1], id="negative-id"),
        pytest.param([1.5], id="non-integer-id"),
        pytest.param([np.nan], id="nan-id"),
        pytest.param([np.inf], id="inf-id"),
    ],
)
def test_bad_ids_raise_value_error(seeded_table: Embedding, ids: list[float]) -> None:
    with pytest.raises(ValueError):
        seeded_table(Tensor(ids))


def test_xavier_uniform_bounds() -> None:
    np.random.seed(0)
    layer = Embedding(1000, 50)
    limit = math.sqrt(6.0 / 1050)
    values = np.abs(layer.weight.data)
    assert layer.weight.shape == (1000, 50) and layer.weight.requires_grad
    assert values.max() <= limit and values.max() > 0.99 * limit
    assert layer.parameters() == [layer.weight]


# ---------------------------------------------------------------------------------------------
# Learned positional encoding


def test_learned_positions_init_bounds() -> None:
    np.random.seed(1)
    pe = PositionalEncoding(200, 32)
    limit = math.sqrt(2.0 / 32)
    values = np.abs(pe.position_embeddings.data)
    assert pe.position_embeddings.shape == (200, 32) and pe.position_embeddings.requires_grad
    assert values.max() <= limit and values.max() > 0.99 * limit
    assert pe.parameters() == [pe.position_embeddings]


@pytest.mark.parametrize("start_pos", [0, 2])
def test_learned_positions_add_rows_and_get_batch_summed_grads(start_pos: int) -> None:
    pe = PositionalEncoding(6, 2)
    table = np.arange(12.0).reshape(6, 2)
    pe.position_embeddings.data = table
    x = Tensor(np.ones((3, 4, 2)), requires_grad=True)
    out = pe(x, start_pos)
    used_rows = table[start_pos : start_pos + 4]
    assert np.array_equal(out.data, 1.0 + np.broadcast_to(used_rows, (3, 4, 2)))
    out.backward(np.ones((3, 4, 2)))
    expected = np.zeros((6, 2))
    expected[start_pos : start_pos + 4] = 3.0
    assert np.array_equal(pe.position_embeddings.grad, expected)
    assert np.array_equal(x.grad, np.ones((3, 4, 2)))


@pytest.mark.parametrize(
    "shape, start_pos",
    [
        pytest.param((4, 2), 0, id="2d-input"),
        pytest.param((1, 7, 2), 0, id="seq-too-long"),
        pytest.param((1, 3, 2), 4, id="start-runs-past-max"),
        pytest.param((1, 3, 3), 0, id="wrong-embed-dim"),
        pytest.param((1, 3, 2), -1, id="negative-start"),
    ],
)
def test_learned_positions_reject_bad_input(shape: tuple[int, ...], start_pos: int) -> None:
    with pytest.raises(ValueError):
        PositionalEncoding(6, 2)(Tensor(np.zeros(shape)), start_pos)


# ---------------------------------------------------------------------------------------------
# Sinusoidal table


@pytest.mark.parametrize("dim", [6, 7])
def test_sinusoid_row_zero_alternates_zero_one(dim: int) -> None:
    table = create_sinusoidal_embeddings(4, dim)
    assert np.array_equal(table.data[0], [0.0 if j % 2 == 0 else 1.0 for j in range(dim)])


@pytest.mark.parametrize("length, dim", [(50, 8), (30, 7), (5, 1), (12, 2)])
def test_sinusoid_matches_the_formula(length: int, dim: int) -> None:
    table = create_sinusoidal_embeddings(length, dim)
    assert table.shape == (length, dim) and table.data.dtype == np.float32
    assert table.requires_grad is False
    for pos in range(length):
        for col in range(dim):
            angle = pos / 10000.0 ** ((col - col % 2) / dim)
            value = math.sin(angle) if col % 2 == 0 else math.cos(angle)
            assert table.data[pos, col] == pytest.approx(value, abs=1e-6)


# ---------------------------------------------------------------------------------------------
# EmbeddingLayer


def _layer(kind: object, scale: bool = False) -> EmbeddingLayer:
    layer = EmbeddingLayer(4, 2, max_seq_len=5, pos_encoding=kind, scale_embeddings=scale)
    layer.token_embedding.weight.data = np.array([[10.0 * v, 10.0 * v + 1.0] for v in range(4)])
    if kind == "learned":
        layer.pos_encoding.position_embeddings.data = np.arange(10.0).reshape(5, 2) / 10
    return layer


def test_unknown_pos_encoding_raises() -> None:
    with pytest.raises(ValueError):
        EmbeddingLayer(4, 2, pos_encoding="rotary")


@pytest.mark.parametrize("kind, count", [("learned", 2), ("sinusoidal", 1), (None, 1)])
def test_parameter_counts(kind: object, count: int) -> None:
    assert len(EmbeddingLayer(4, 2, pos_encoding=kind).parameters()) == count


@pytest.mark.parametrize("kind", ["learned", "sinusoidal", None])
@pytest.mark.parametrize("scale", [False, True], ids=["unscaled", "scaled"])
def test_layer_output_values(kind: object, scale: bool) -> None:
    layer = _layer(kind, scale)
    ids = np.array([[2, 0, 3], [1, 1, 2]])
    rows = np.array([[10.0 * v, 10.0 * v + 1.0] for v in range(4)])[ids]
    expected = rows * (math.sqrt(2) if scale else 1.0)
    if kind == "learned":
        expected = expected + np.arange(10.0).reshape(5, 2)[:3] / 10
    elif kind == "sinusoidal":
        expected = expected + create_sinusoidal_embeddings(5, 2).data[:3]
    out = layer(Tensor(ids))
    assert out.shape == (2, 3, 2)
    np.testing.assert_allclose(out.data, expected, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("kind", ["learned", "sinusoidal", None])
def test_one_dimensional_tokens_give_a_2d_output(kind: object) -> None:
    layer = _layer(kind)
    single = layer(Tensor([2, 0, 3]))
    batched = layer(Tensor([[2, 0, 3]]))
    assert single.shape == (3, 2) and np.array_equal(single.data, batched.data[0])


def test_layer_gradients_reach_both_tables_with_scaling() -> None:
    layer = _layer("learned", scale=True)
    layer(Tensor([[1, 1, 3], [1, 0, 0]])).backward(np.ones((2, 3, 2)))
    token_grad = layer.token_embedding.weight.grad
    np.testing.assert_allclose(token_grad[:, 0], np.array([2, 3, 0, 1]) * math.sqrt(2), rtol=1e-6)
    assert np.array_equal(layer.pos_encoding.position_embeddings.grad[:, 0], [2, 2, 2, 0, 0])


def test_sinusoidal_layer_rejects_too_long_sequences() -> None:
    with pytest.raises(ValueError):
        _layer("sinusoidal")(Tensor([[0, 1, 2, 3, 0, 1]]))
