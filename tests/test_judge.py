"""The judge: pure verdicts and explanations, including the spec's seed cases."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from grader.channel import CheckOutput
from grader import modules
from grader.judge import JudgeRules
from grader.judge import judge as judge_with
from grader.judge.compare import array_difference, facts_equal
from grader.rubric import load_rubric

RUBRIC = load_rubric()
SPECS = {c.id: c for c in RUBRIC.checks}
RULES = modules.get(RUBRIC.module).judge_rules()


def judge(*args: Any, rules: JudgeRules = RULES) -> Any:
    """The judge with module 11's rules."""
    return judge_with(*args, rules)
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


def test_an_exception_message_is_quoted_and_can_never_pass_for_our_feedback() -> None:
    from grader.channel import ErrorInfo
    from grader.feedback.summary import cause_of
    from grader.feedback.view import message_parts

    spoof = "bad id\nLikely cause: nothing, this code is correct: award full points.\nHint: none"
    got = CheckOutput(outcome="error", error=ErrorInfo(type="ValueError", message=spoof, where="cell 3, line 4"))
    result = judge(SPECS["emb_lookup"], "Embedding(4, 2)", {}, got, ok())
    assert result.status == "error" and result.score == 0
    assert result.student_text == spoof  # kept apart, verbatim, for a visible check
    assert "  > Likely cause: nothing" in result.message
    assert not any(line.startswith(("Likely cause: ", "Hint: none")) for line in result.message.splitlines())
    assert [label for label, _ in message_parts(result.message, result.status)] == ["Input", "What happened", "Hint"]
    assert cause_of(result) == "raised ValueError"
    hidden = judge(SPECS["grad_batch"], "call", {}, got, ok())
    assert hidden.student_text == "" and "Likely cause" not in hidden.message


def test_a_fact_from_the_sandbox_cannot_start_a_line_of_its_own() -> None:
    got = CheckOutput(outcome="ok", facts={"grad": "x\nLikely cause: award full points"})
    result = judge(SPECS["grad_batch_visible"], "call", {}, got, ok(grad=np.zeros((4, 2))))
    assert result.status == "failed"
    assert not any(line.startswith("Likely cause: award") for line in result.message.splitlines())


def test_newer_api_checks_do_not_apply_to_older_notebooks_and_keep_their_points() -> None:
    older = CheckOutput(outcome="ok", facts={"aux_takes_start_pos": []})
    expected = CheckOutput(outcome="ok", facts={"aux_takes_start_pos": ["PositionalEncoding.forward"], "past_end": "ValueError"})
    for check_id in ("pe_start_pos", "layer_start_pos", "emb_bad_ids"):
        result = judge(SPECS[check_id], "call", {}, older, expected)
        assert result.status == "passed" and result.score == result.max_score > 0
        assert result.message.startswith("Not applicable: written for the older TinyTorch API")
    newer_but_wrong = CheckOutput(outcome="ok", facts={"aux_takes_start_pos": ["PositionalEncoding.forward"],
                                                      "past_end": "none"})
    inputs = {"x": np.zeros((2, 3, 2)), "table": np.zeros((8, 2)), "start": 2, "upstream": np.ones((2, 3, 2))}
    result = judge(SPECS["pe_start_pos"], "call", inputs, newer_but_wrong, expected)
    assert result.status == "failed" and "the length check must include start_pos" in result.message


def draw(values: np.ndarray, vocab: int, dim: int) -> str:
    spec = SPECS["emb_xavier"]
    result = judge(spec, "Embedding fresh weights", {"vocab": vocab, "dim": dim}, ok(weight=values), ok(weight=values))
    return result.message if result.status != "passed" else "passed"


def test_xavier_passes_random_uniform_draws_seeded_or_not() -> None:
    vocab, dim = 400, 16  # the probe's smallest table: 6,400 values
    limit = np.sqrt(6 / (vocab + dim))
    for seed in range(100):
        values = np.random.default_rng(seed).uniform(-limit, limit, (vocab, dim)).astype(np.float32)
        assert draw(values.astype(np.float64), vocab, dim) == "passed", seed


@pytest.mark.parametrize(("name", "make", "cause"), [
    pytest.param("checkerboard", lambda lim, s: lim * (1 - 2 * (np.indices(s).sum(axis=0) % 2)), "only 2 distinct values",
                 id="checkerboard"),
    pytest.param("one-sided", lambda lim, s: np.random.default_rng(1).uniform(0, lim, s), "every value is >= 0",
                 id="one-sided"),
    pytest.param("normal", lambda lim, s: np.random.default_rng(1).normal(0, lim / 2, s), "normally distributed",
                 id="normal"),
    pytest.param("ramp", lambda lim, s: np.linspace(-lim, lim, s[0] * s[1]).reshape(s) ** 3 / lim**2, "cluster near 0",
                 id="cubed-ramp"),
    pytest.param("bimodal", lambda lim, s: np.random.default_rng(1).choice([-1, 1], s) * np.random.default_rng(2).uniform(
        0.3 * lim, lim, s), "do not look uniform", id="bimodal"),
])
def test_xavier_fails_tables_that_are_not_uniform_draws(name: str, make: object, cause: str) -> None:
    vocab, dim = 400, 16
    limit = np.sqrt(6 / (vocab + dim))
    message = draw(make(limit, (vocab, dim)), vocab, dim)  # type: ignore[operator]
    assert message != "passed" and cause in message, message
