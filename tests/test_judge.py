"""The judge: pure verdicts and explanations, including the spec's seed cases."""

from __future__ import annotations

import numpy as np
import pytest

from grader.channel import CheckOutput
from grader.judge import judge
from grader.judge.compare import array_difference, facts_equal
from grader.rubric import load_rubric

RUBRIC = load_rubric()
SPECS = {c.id: c for c in RUBRIC.checks}
SEED_WEIGHTS = np.array([[10.0 * v, 10.0 * v + 1] for v in range(4)])


def ok(**arrays: np.ndarray) -> CheckOutput:
    return CheckOutput(outcome="ok", arrays=arrays)


def seed_backward(ids: list[int], upstream: list[list[float]], accumulate: bool = True) -> np.ndarray:
    grad = np.zeros_like(SEED_WEIGHTS)
    if accumulate:
        np.add.at(grad, ids, np.array(upstream))
    else:
        grad[ids] = np.array(upstream)
    return grad


def test_seed_forward_rows() -> None:
    expected = SEED_WEIGHTS[[2, 0]]
    assert expected.tolist() == [[20, 21], [0, 1]]
    assert array_difference(expected, expected, 0, 0) is None


def test_seed_backward_accumulates_repeated_ids() -> None:
    grad = seed_backward([1, 1], [[1, 2], [3, 4]])
    assert grad[1].tolist() == [4, 6] and grad[0].tolist() == [0, 0]
    assert seed_backward([1, 3], [[1, 2], [3, 4]])[3].tolist() == [3, 4]


def test_seed_nonzero_row_counts() -> None:
    count = lambda g: int(np.any(g != 0, axis=1).sum())  # noqa: E731
    assert count(seed_backward([2, 2], [[1, 2], [3, 4]])) == 1
    assert count(seed_backward([1, 3], [[1, 2], [3, 4]])) == 2


def test_overwriting_backward_fails_grad_accumulate_with_the_cause() -> None:
    upstream = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    inputs = {"vocab": 4, "dim": 2, "weight": SEED_WEIGHTS, "upstream": upstream}
    exp = ok(seed_grad=seed_backward([1, 1], [[1, 2], [3, 4]]), grad=seed_backward([0, 2, 0], upstream.tolist()))
    got = ok(seed_grad=seed_backward([1, 1], [[1, 2], [3, 4]], accumulate=False),
             grad=seed_backward([0, 2, 0], upstream.tolist(), accumulate=False))
    result = judge(SPECS["grad_accumulate"], "Embedding(4, 2) backward", inputs, got, exp)
    assert result.status == "failed" and result.score == 0
    assert "row 0 received 1x the gradient instead of 2x" in result.message
    assert "expected 6, got 4" in result.message  # seed row 1: (4, 6) expected, (3, 4) got
    assert judge(SPECS["grad_accumulate"], "", inputs, exp, exp).score == SPECS["grad_accumulate"].points


def test_sin_pos0_names_swapped_sin_and_cos() -> None:
    exp = ok(row0_d4=np.array([0.0, 1.0, 0.0, 1.0]))
    got = ok(row0_d4=np.array([1.0, 0.0, 1.0, 0.0]))
    result = judge(SPECS["sin_pos0"], "create_sinusoidal_embeddings(10, 4)", {"max_len": 10, "dims": [4]}, got, exp)
    assert result.status == "failed" and "swapped" in result.message


def test_hidden_checks_reveal_neither_inputs_nor_expected_values() -> None:
    spec = SPECS["grad_batch"]
    assert spec.visibility == "hidden"
    inputs = {"vocab": 4, "dim": 2, "weight": SEED_WEIGHTS, "ids": np.array([[0.0, 1.0]]),
              "upstream": np.array([[[1.0, 2.0], [3.0, 4.0]]])}
    exp, got = ok(grad=np.array([[1.0, 2.0], [3.0, 4.0], [0, 0], [0, 0]])), ok(grad=np.zeros((4, 2)))
    result = judge(spec, "Embedding(4, 2) backward of a batch of ids [[0, 1]]", inputs, got, exp)
    assert result.status == "failed"
    for secret in ("[[0, 1]]", "expected", "3"):
        assert secret not in result.message
    assert "expected 3, got 0" in result.detail or "expected" in result.detail


@pytest.mark.parametrize("outcome", ["timeout", "crashed", "oom", "error", "missing"])
def test_every_non_ok_outcome_scores_zero(outcome: str) -> None:
    result = judge(SPECS["emb_shape"], "call", {}, CheckOutput(outcome=outcome), ok())  # type: ignore[arg-type]
    assert result.score == 0 and result.status != "passed"


def test_tolerances_are_explicit_and_type_strict() -> None:
    a = np.array([1.0, 2.0])
    assert array_difference(a + 1e-9, a, 1e-6, 1e-6) is None
    assert "largest difference 0.5 at index [1]" in (array_difference(a + [0, 0.5], a, 1e-6, 1e-6) or "")
    assert not facts_equal(True, 1) and not facts_equal("1", 1) and facts_equal([1, 2], [1, 2])
