"""The judge: pure verdicts and explanations, including the spec's seed cases."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from grader import modules
from grader.channel import CheckOutput, ErrorInfo
from grader.judge import judge as judge_with
from grader.judge.compare import array_difference, facts_equal
from grader.models import CheckResult
from grader.rubric import CheckSpec, load_rubric

RUBRIC = load_rubric(module="embeddings")  # at collection, before the suite's GRADER_MODULE is set
SPECS = {c.id: c for c in RUBRIC.checks}
RULES = modules.get(RUBRIC.module).judge_rules()


def judge(spec: CheckSpec, called: str, inputs: dict[str, Any], got: CheckOutput, expected: CheckOutput,
          generation: str | None = "newer") -> CheckResult:
    """The judge with module 11's rules, for a submission of the newer generation (which asks for
    every check but emb_bad_ids and the empty ids) unless told otherwise."""
    return judge_with(spec, called, inputs, got, expected, RULES, generation)


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


LOOKUP_WEIGHT = np.arange(1.0, 13.0).reshape(6, 2)  # no zero entry and no two equal rows
LOOKUP_IDS = np.array([[2, 0, 5], [1, 1, 3]])
LOOKUP_INPUTS = {"vocab": 6, "dim": 2, "weight": LOOKUP_WEIGHT, "ids": LOOKUP_IDS.astype(np.float64)}
SEED_ROWS = SEED_WEIGHTS[[2, 0]]  # the spec's seed case: forward(Tensor([2, 0])) on rows (10v, 10v + 1)


@pytest.mark.parametrize(("rows", "cause"), [
    pytest.param(LOOKUP_WEIGHT[(LOOKUP_IDS + 1) % 6], "for id 2 the output is weight row 3: index the table with the "
                 "ids themselves", id="off-by-one"),
    pytest.param(2 * LOOKUP_WEIGHT[LOOKUP_IDS], "rows come out scaled by 2", id="scaled"),
    pytest.param(np.broadcast_to(LOOKUP_WEIGHT[LOOKUP_IDS[0]], (2, 3, 2)), "every sequence of the batch came back as "
                 "sequence 0", id="first-sequence-only"),
])
def test_a_wrong_lookup_fails_with_its_likely_cause(rows: np.ndarray, cause: str) -> None:
    exp = ok(seed_rows=SEED_ROWS, rows=LOOKUP_WEIGHT[LOOKUP_IDS])
    result = judge(SPECS["emb_lookup"], "lookup", LOOKUP_INPUTS, ok(seed_rows=SEED_ROWS, rows=rows), exp)
    assert result.status == "failed" and result.score == 0
    assert f"Likely cause: {cause}" in result.message
    assert judge(SPECS["emb_lookup"], "lookup", LOOKUP_INPUTS, exp, exp).status == "passed"


def test_the_spec_seed_lookup_is_compared_value_by_value() -> None:
    exp = ok(seed_rows=SEED_ROWS, rows=LOOKUP_WEIGHT[LOOKUP_IDS])
    got = ok(seed_rows=SEED_WEIGHTS[[3, 1]], rows=LOOKUP_WEIGHT[LOOKUP_IDS])
    result = judge(SPECS["emb_lookup"], "Embedding(4, 2) forward(Tensor([2, 0]))", LOOKUP_INPUTS, got, exp)
    assert result.status == "failed"
    assert ("seed_rows: shape (2, 2): 4 of 4 values differ; largest difference 10 at index [0, 0]: expected 20, got 30"
            in result.message)


SPARSE_UPSTREAM = np.array([[1.0, 2.0], [3.0, 4.0]])


def sparse_grad() -> np.ndarray:
    """The right gradient of Embedding(6, 2) for tokens (1, 4) and SPARSE_UPSTREAM."""
    grad = np.zeros((6, 2))
    grad[[1, 4]] = SPARSE_UPSTREAM
    return grad


def sparse_case(grad: np.ndarray | str, rows_second: int = 2) -> tuple[dict[str, Any], CheckOutput, CheckOutput]:
    """grad_sparse on Embedding(6, 2) with tokens (1, 4); the seed counts are those of the spec's cases."""
    upstream = SPARSE_UPSTREAM
    inputs = {"vocab": 6, "dim": 2, "weight": LOOKUP_WEIGHT, "ids": np.array([1.0, 4.0]), "upstream": upstream}
    right = sparse_grad()
    seed_second = seed_backward([1, 3], upstream.tolist())
    exp = CheckOutput(outcome="ok", facts={"nonzero_rows_first": 1, "nonzero_rows_second": 2},
                      arrays={"seed_grad_second": seed_second, "grad": right})
    facts: dict[str, Any] = {"nonzero_rows_first": 1, "nonzero_rows_second": rows_second}
    arrays = {"seed_grad_second": seed_second}
    if isinstance(grad, str):
        facts["grad"] = grad
    else:
        arrays["grad"] = grad
    return inputs, CheckOutput(outcome="ok", facts=facts, arrays=arrays), exp


def test_a_gradient_in_a_row_never_looked_up_names_that_row() -> None:
    leaky = sparse_grad()
    leaky[5] = 0.5
    inputs, got, exp = sparse_case(leaky)
    result = judge(SPECS["grad_sparse"], "backward", inputs, got, exp)
    assert result.status == "failed"
    assert "Likely cause: row 5 was never looked up but got a non-zero gradient" in result.message
    assert judge(SPECS["grad_sparse"], "backward", inputs, exp, exp).status == "passed"


@pytest.mark.parametrize(("shared", "cause"), [
    pytest.param(True, "two Embedding(4, 2) share one weight Tensor", id="one-table"),
    pytest.param(False, "the second Embedding(4, 2)'s gradient already held the first one's", id="one-buffer"),
])
def test_a_gradient_carried_from_one_embedding_to_the_next_is_named(shared: bool, cause: str) -> None:
    inputs, got, exp = sparse_case(sparse_grad(), rows_second=3)
    carried = exp.arrays["seed_grad_second"].copy()
    carried[2] += [4.0, 6.0]  # the first seed backward: tokens (2, 2) with rows (1, 2) and (3, 4)
    got = got.model_copy(update={"arrays": {**got.arrays, "seed_grad_second": carried},
                                 "facts": {**got.facts, "aux_shared_table": shared}})
    result = judge(SPECS["grad_sparse"], "backward", inputs, got, exp)
    assert result.status == "failed" and f"Likely cause: {cause}" in result.message


def test_the_spec_seed_row_counts_are_compared() -> None:
    inputs, got, exp = sparse_case(sparse_grad(), rows_second=1)
    result = judge(SPECS["grad_sparse"], "backward", inputs, got, exp)
    assert result.status == "failed" and "nonzero_rows_second: expected 2, got 1" in result.message


@pytest.mark.parametrize(("in_graph", "cause"), [
    pytest.param(False, "the gradient never reached the weights", id="no-graph"),
    pytest.param(True, "the output is in the graph (it has a _grad_fn), but its backward gave the weight no gradient",
                 id="node-gave-none"),
])
def test_a_backward_that_never_reaches_the_weights_says_why(in_graph: bool, cause: str) -> None:
    missing = "no gradient: .grad is still None after backward()" + (", although the output has a _grad_fn"
                                                                      if in_graph else "")
    inputs, got, exp = sparse_case(missing)
    result = judge(SPECS["grad_sparse"], "backward", inputs, got, exp)
    assert result.status == "failed"
    assert f"Likely cause: {cause}" in result.message


def test_averaging_repeated_tokens_is_diagnosed_as_a_mean() -> None:
    upstream = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    inputs = {"vocab": 4, "dim": 2, "weight": SEED_WEIGHTS, "upstream": upstream}
    seed = seed_backward([1, 1], [[1, 2], [3, 4]])
    exp = ok(seed_grad=seed, grad=seed_backward([0, 2, 0], upstream.tolist()))
    averaged = exp.arrays["grad"].copy()
    averaged[0] /= 2
    result = judge(SPECS["grad_accumulate"], "backward", inputs, ok(seed_grad=seed, grad=averaged), exp)
    assert result.status == "failed"
    assert "Likely cause: row 0 received the mean of its two gradient rows" in result.message


@pytest.mark.parametrize(("scales", "cause"), [
    pytest.param((1 / 2, 1 / 3), "the gradient is scaled by 1/N, N = the number of ids in the backward (1/3 for 3 ids)",
                 id="mean-over-ids"),
    pytest.param((0.5, 0.5), "the gradient is 0.5 times the right one", id="constant"),
    pytest.param((1.0, 0.25), None, id="one-backward-only"),
])
def test_a_gradient_scaled_by_a_constant_names_the_factor(scales: tuple[float, float], cause: str | None) -> None:
    upstream = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    inputs = {"vocab": 4, "dim": 2, "weight": SEED_WEIGHTS, "upstream": upstream}
    seed, grad = seed_backward([1, 1], [[1, 2], [3, 4]]), seed_backward([0, 2, 0], upstream.tolist())
    got = ok(seed_grad=seed * scales[0], grad=grad * scales[1])
    result = judge(SPECS["grad_accumulate"], "backward", inputs, got, ok(seed_grad=seed, grad=grad))
    assert result.status == "failed"
    assert (f"Likely cause: {cause}" in result.message) if cause else "Likely cause" not in result.message


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


def sinusoid(max_len: int, dim: int, width: int) -> np.ndarray:
    """Sines in even columns, cosines in odd ones, of pos / 10000^(2i / width)."""
    angle = np.arange(max_len)[:, None] / 10000.0 ** (2 * (np.arange(dim)[None, :] // 2) / width)
    return np.where(np.arange(dim) % 2 == 0, np.sin(angle), np.cos(angle))


@pytest.mark.parametrize(("odd_table", "cause"), [
    pytest.param(sinusoid(12, 5, 6), "for odd embed_dim the exponent divides by D + 1", id="width-rounded-up"),
    pytest.param(np.zeros((12, 5)), None, id="unrecognised"),  # the right even table matches no mistake
])
def test_an_odd_width_exponent_is_named_only_from_the_odd_table(odd_table: np.ndarray, cause: str | None) -> None:
    inputs = {"max_len": 12, "dims": [4, 5]}
    exp = ok(table_d4=sinusoid(12, 4, 4), table_d5=sinusoid(12, 5, 5))
    result = judge(SPECS["sin_values"], "sinusoids", inputs, ok(table_d4=sinusoid(12, 4, 4), table_d5=odd_table), exp)
    assert result.status == "failed"
    assert (f"Likely cause: {cause}" in result.message) if cause else "Likely cause" not in result.message


@pytest.mark.parametrize(("shifted", "cause"), [
    pytest.param(4, "with start_pos=3 the window starts at row 4 instead of row 3", id="window-one-late"),
    pytest.param("raised ValueError from numpy or the Tensor library, not from your own check",
                 "the window for start_pos is not seq_len (2) rows long", id="window-too-short"),
])
def test_a_start_pos_window_in_the_wrong_place_is_named(shifted: int | str, cause: str) -> None:
    table, x = np.arange(20.0).reshape(10, 2), np.ones((2, 2, 2))
    inputs = {"max_len": 10, "dim": 2, "start": 3, "table": table, "x": x, "upstream": x}
    newer: dict[str, Any] = {"aux_takes_start_pos": ["PositionalEncoding.forward"]}
    right = {"forward_default": x + table[:2], "forward_shifted": x + table[3:5], "call_shifted": x + table[3:5]}
    exp = CheckOutput(outcome="ok", facts=newer, arrays=right)
    wrong = x + table[shifted:shifted + 2] if isinstance(shifted, int) else None
    arrays = {**right, "forward_shifted": wrong, "call_shifted": wrong} if wrong is not None else {
        "forward_default": right["forward_default"]}
    facts: dict[str, Any] = newer if wrong is not None else {**newer, "forward_shifted": shifted,
                                                              "call_shifted": shifted}
    result = judge(SPECS["pe_start_pos"], "start_pos", inputs, CheckOutput(outcome="ok", facts=facts, arrays=arrays), exp)
    assert result.status == "failed" and "Likely cause: with start_pos=3 " in result.message and cause in result.message


@pytest.mark.parametrize(("rows", "cause"), [
    pytest.param((9, 0), "out-of-range ids are clamped into range (id 10 read row 9 and id -1 read row 0", id="clip"),
    pytest.param((None, 9), "id -1 was accepted (numpy silently wraps negative indices to the last row)", id="wrap"),
    pytest.param((None, None), "id -1 was accepted: reject ids < 0", id="row-unknown"),
])
def test_an_accepted_bad_id_is_explained_by_the_row_it_read(rows: tuple[int | None, int | None], cause: str) -> None:
    refused: dict[str, Any] = {"id_equal_vocab": "ValueError", "id_minus_one": "ValueError", "id_last_valid": "none",
               "mixed_negative": "ValueError", "mixed_too_big": "ValueError", "batch_too_big": "ValueError"}
    accepted: dict[str, Any] = {**refused, "id_minus_one": "none", "mixed_negative": "none",
                "aux_row_of_vocab": rows[0], "aux_row_of_minus_one": rows[1]}
    if rows[0] is not None:
        accepted |= {"id_equal_vocab": "none", "mixed_too_big": "none", "batch_too_big": "none"}
    got, exp = CheckOutput(outcome="ok", facts=accepted), CheckOutput(outcome="ok", facts=refused)
    result = judge(SPECS["emb_index_error"], "ids", {"vocab": 10, "dim": 2}, got, exp)
    assert result.status == "failed" and f"Likely cause: {cause}" in result.message
    assert ("clamped" in result.message) == (rows[0] is not None)


def test_an_embedding_that_rejects_every_id_is_not_blamed_on_an_off_by_one() -> None:
    """ids required to have an integer dtype: every float32 Tensor of ids is refused, the last valid id too."""
    refused: dict[str, Any] = {"id_equal_vocab": "ValueError", "id_minus_one": "ValueError", "id_last_valid": "none",
                               "mixed_negative": "ValueError", "mixed_too_big": "ValueError",
                               "batch_too_big": "ValueError", "aux_id_zero": "none"}
    every = {**refused, "id_last_valid": "ValueError", "aux_id_zero": "ValueError"}
    got, exp = CheckOutput(outcome="ok", facts=every), CheckOutput(outcome="ok", facts=refused)
    result = judge(SPECS["emb_index_error"], "ids", {"vocab": 10, "dim": 2}, got, exp)
    assert result.status == "failed"
    assert "Likely cause: even id 0 raised ValueError" in result.message and "(see emb_lookup" in result.message
    assert "valid ids are 0..vocab_size-1" not in result.message


@pytest.mark.parametrize(("one_token", "cause"), [
    pytest.param("none", "exactly max_seq_len tokens were rejected: compare with >, not >=", id="off-by-one"),
    pytest.param("ValueError", "the layer raised ValueError even for a single token", id="layer-broken"),
])
def test_a_sinusoidal_layer_rejecting_max_seq_len_tokens_is_told_apart_from_a_broken_layer(
        one_token: str, cause: str) -> None:
    right: dict[str, Any] = {"too_long": "ValueError", "at_max": "none", "aux_takes_start_pos": ["EmbeddingLayer.forward"],
             "aux_one_token": "none"}
    got = CheckOutput(outcome="ok", facts={**right, "at_max": "ValueError", "aux_one_token": one_token})
    result = judge(SPECS["layer_sin_too_long"], "layer", {"vocab": 20, "dim": 2, "max_len": 6}, got,
                   CheckOutput(outcome="ok", facts=right))
    assert result.status == "failed" and f"Likely cause: {cause}" in result.message


@pytest.mark.parametrize(("message", "cause"), [
    pytest.param("Embedding(4, 2).parameters() has no tensor of shape (4, 2) (found [(2, 4)])",
                 "the embedding table is stored transposed, as (embed_dim, vocab_size) = (2, 4)", id="embedding"),
    pytest.param("EmbeddingLayer.parameters() has no tensor of shape (9, 2) (found [(6, 2), (2, 9)])",
                 "the position table is stored transposed, as (embed_dim, max_seq_len) = (2, 9)", id="layer-positions"),
    pytest.param("Embedding(4, 2).parameters() has no tensor of shape (4, 2) (found [(4, 3)])", None, id="other-shape"),
])
def test_a_probe_that_finds_only_a_transposed_table_names_it(message: str, cause: str | None) -> None:
    got = CheckOutput(outcome="error", error=ErrorInfo(type="ProbeError", message=message))
    inputs = {"vocab": 6, "dim": 2, "max_len": 9}
    result = judge(SPECS["layer_scale"], "layer", inputs, got, ok())
    assert result.status == "error"
    assert (f"Likely cause: {cause}" in result.message) if cause else "Likely cause" not in result.message


def test_the_checks_own_complaint_is_not_presented_as_the_students_message() -> None:
    spec, inputs = SPECS["layer_scale"], {"vocab": 6, "dim": 2, "max_len": 9}
    ours = CheckOutput(outcome="error", error=ErrorInfo(type="ProbeError", message="EmbeddingLayer has no forward"))
    theirs = CheckOutput(outcome="error", error=ErrorInfo(type="ValueError", message="bad ids",
                                                          where="cell 3, line 4, in forward"))
    assert "the check could not use what your code offered:\n  > EmbeddingLayer has no forward" in \
        judge(spec, "layer", inputs, ours, ok()).message
    student = judge(spec, "layer", inputs, theirs, ok()).message
    assert "with this message from the code under test:\n  > bad ids" in student
    assert "could not use" not in student


def test_an_output_refused_for_a_transposed_shape_names_the_table() -> None:
    got = CheckOutput(outcome="ok", rejected={"weight": "shape (57, 1160) differs from the expected (1160, 57)"})
    result = judge(SPECS["emb_xavier"], "fresh", {"vocab": 1160, "dim": 57}, got, ok(weight=np.zeros((1160, 57))))
    assert result.status == "failed"
    assert "Likely cause: the embedding table is stored transposed, as (embed_dim, vocab_size) = (57, 1160)" in (
        result.message)


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
    assert result.detail.startswith("Called: Embedding(4, 2) backward of a batch of ids [[0, 1]]\n")  # for staff
    assert "largest difference 4 at index [1, 1]: expected 4, got 0" in result.detail


@pytest.mark.parametrize("outcome", ["timeout", "crashed", "oom", "error", "missing"])
def test_every_non_ok_outcome_scores_zero(outcome: str) -> None:
    result = judge(SPECS["emb_shape"], "call", {}, CheckOutput(outcome=outcome), ok())  # type: ignore[arg-type]
    assert result.score == 0 and result.status != "passed"


def test_tolerances_are_explicit_and_type_strict() -> None:
    a = np.array([1.0, 2.0])
    assert array_difference(a + 1e-9, a, 1e-6, 1e-6) is None
    assert "largest difference 0.5 at index [1]" in (array_difference(a + np.array([0, 0.5]), a, 1e-6, 1e-6) or "")
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
        assert result.status == "passed" and result.score == result.max_score
        assert result.max_score > 0 or check_id == "emb_bad_ids"  # a 0-point note: never asked
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


def test_a_refusal_counts_by_its_class_wherever_it_was_raised() -> None:
    """pe_too_long asks for ValueError: numpy's own (a failed broadcast) counts, a TypeError does not."""
    exp = CheckOutput(outcome="ok", facts={"too_long": "ValueError", "at_max": "none", "aux_below_max": "none"})
    numpy_refused = {**exp.facts, "too_long": "ValueError from numpy or the Tensor library, not from your own check"}
    inputs = {"max_len": 6, "dim": 2}
    assert judge(SPECS["pe_too_long"], "pe", inputs, CheckOutput(outcome="ok", facts=numpy_refused), exp).status == "passed"
    wrong_class = {**exp.facts, "too_long": "TypeError"}
    assert judge(SPECS["pe_too_long"], "pe", inputs, CheckOutput(outcome="ok", facts=wrong_class), exp).status == "failed"


def test_where_no_exception_is_named_any_refusal_counts_but_silence_does_not() -> None:
    newer: dict[str, Any] = {"aux_takes_start_pos": ["PositionalEncoding.forward"]}
    exp = CheckOutput(outcome="ok", facts={**newer, "fractional": "ValueError", "negative": "ValueError"})
    typed = CheckOutput(outcome="ok", facts={**exp.facts, "fractional": "TypeError", "negative": "IndexError"})
    assert judge(SPECS["pe_start_pos"], "pe", {}, typed, exp).status == "passed"
    silent = CheckOutput(outcome="ok", facts={**exp.facts, "fractional": "none"})
    inputs = {"x": np.zeros((2, 3, 2)), "table": np.zeros((8, 2)), "start": 2, "upstream": np.ones((2, 3, 2))}
    assert judge(SPECS["pe_start_pos"], "pe", inputs, silent, exp).status == "failed"


def test_what_only_the_official_solution_does_is_a_note_and_never_reaches_the_cause() -> None:
    """The older course never asks for a range check: clipped ids pass with a 0-point note; the newer
    course asks, so the same outputs fail there with the clamping cause."""
    refused: dict[str, Any] = {"id_equal_vocab": "ValueError", "id_minus_one": "ValueError", "id_last_valid": "none",
                               "mixed_negative": "ValueError", "mixed_too_big": "ValueError",
                               "batch_too_big": "ValueError"}
    clipped = {**refused, "id_equal_vocab": "none", "id_minus_one": "none", "mixed_negative": "none",
               "mixed_too_big": "none", "batch_too_big": "none", "aux_row_of_vocab": 9, "aux_row_of_minus_one": 0}
    got, exp = CheckOutput(outcome="ok", facts=clipped), CheckOutput(outcome="ok", facts=refused)
    older = judge(SPECS["emb_index_error"], "ids", {"vocab": 10, "dim": 2}, got, exp, generation="older")
    assert older.status == "passed" and older.score == older.max_score > 0
    assert older.message.startswith("Beyond what this assignment asks (not scored): the reference also raises")
    assert "Likely cause" not in older.message
    newer = judge(SPECS["emb_index_error"], "ids", {"vocab": 10, "dim": 2}, got, exp, generation="newer")
    assert newer.status == "failed" and "Likely cause: out-of-range ids are clamped" in newer.message
    unknown = judge(SPECS["emb_index_error"], "ids", {"vocab": 10, "dim": 2}, got, exp, generation=None)
    assert unknown.status == "passed"  # no check ran that tells: the benefit of the doubt


def test_a_crash_names_the_students_statement_in_the_cell_as_jupyter_shows_it() -> None:
    from grader.judge.crash import Code

    message = "operands could not be broadcast together with shapes (2,9,6) (12,6) "
    facts: dict[str, Any] = {"aux_raised": [f"value|ValueError|7|48|forward|{message}"],
                             "out": "raised ValueError from numpy or the Tensor library"}
    got = CheckOutput(outcome="ok", facts=facts)
    exp = CheckOutput(outcome="ok", arrays={"out": np.zeros((2, 9, 6))})
    code = Code({(7, 48): "        return x + positions"}, {7: "In [12]"})
    result = judge_with(SPECS["pe_broadcast"], "pe", {"max_len": 12, "dim": 6, "x": np.zeros((2, 9, 6)),
                                                     "table": np.zeros((12, 6))}, got, exp, RULES, "older", code)
    assert result.status == "failed"
    assert ("Likely cause: `return x + positions` (In [12], line 48, in forward) raised ValueError on valid input: "
            "the whole position table (12 rows, max_seq_len) was added to a sequence of 9") in result.message
