"""Likely causes of module-12 failures, worked out on the host from the inputs and outputs.

Each diagnosis recomputes what one named bug would have produced on the probe's inputs
(judge/model.py) and speaks only when the student's numbers match it. They never decide pass or fail.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from grader.unit import Cause, CheckOutput, Diagnosis

from ..probes import EVIDENCE, GRAD_OUTPUTS, NO_GRADIENT, PARAMETERS, alternating, causal, padding
from . import model

Inputs = dict[str, Any]
CUT = ("the output is not built from Tensor operations all the way back to {what}: a step that computes on "
       ".data (numpy) and wraps the result in a new Tensor cuts the graph there")


def _like(got: np.ndarray | None, want: np.ndarray, rtol: float = 1e-4, atol: float = 1e-5) -> bool:
    """``got`` matches ``want`` wherever ``want`` is defined (a bug's recomputation is NaN on a query
    whose keys it blocks all, where the student's numbers depend on their fill value)."""
    if got is None or got.shape != want.shape:
        return False
    known = np.isfinite(want)
    if got.ndim >= 1 and want.ndim >= 1:
        known = np.broadcast_to(np.all(known, axis=-1, keepdims=True), want.shape)
    if not known.any():
        return False
    return bool(np.all(np.abs(got[known] - want[known]) <= atol + rtol * np.abs(want[known])))


def _first(found: list[tuple[bool, str]]) -> str | None:
    return next((text for hit, text in found if hit), None)


# ---- scaled_dot_product_attention ------------------------------------------------------------


def _score_bugs(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None,
                masking: str = "fill") -> list[tuple[str, tuple[np.ndarray, np.ndarray]]]:
    d, seq = q.shape[-1], q.shape[-2]
    found = [
        ("the scores were not scaled: multiply Q @ K^T by 1/sqrt(d_k), d_k = Q.shape[-1]",
         model.attend(q, k, v, mask, scale=1.0, masking=masking)),
        (f"the scores were divided by d_k ({d}), not by sqrt(d_k) ({math.sqrt(d):.3g})",
         model.attend(q, k, v, mask, scale=1.0 / d, masking=masking)),
        ("the softmax ran over the queries (axis -2), not over the keys: each row of weights (one query) must sum "
         "to 1, so use the last axis, dim=-1",
         model.attend(q, k, v, mask, axis=-2, masking=masking)),
        (f"the scores were multiplied by sqrt(d_k) ({math.sqrt(d):.3g}) instead of divided by it: Q @ K^T / sqrt(d_k)",
         model.attend(q, k, v, mask, scale=math.sqrt(d), masking=masking)),
    ]
    if seq != d:
        found.append((f"the scores were scaled by 1/sqrt({seq}), the sequence length (Q.shape[{q.ndim - 2}]), not by "
                      f"1/sqrt(d_k) with d_k = Q.shape[-1] = {d}",
                      model.attend(q, k, v, mask, scale=1.0 / math.sqrt(seq), masking=masking)))
    return found


def _always_causal(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    return model.attend(q, k, v, causal(q.shape[:-2], q.shape[-2])) if q.shape[-2] == k.shape[-2] else None


def _kqt(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    return model.attend(q, k, v, kqt=True)


UNMASKED_BUGS: list[tuple[str, Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray] | None]]] = [
    ("a causal mask was applied though none was given: mask only when a mask is passed (if mask is not None)",
     _always_causal),
    ("the scores are K @ Q^T, the transpose of Q @ K^T: weights[i, j] must be query i against key j, "
     "Q.matmul(K.transpose(-2, -1))", _kqt),
]


SCALED_OUTPUT = ("the 1/sqrt(d_k) scale was applied to the output instead of the scores: scale Q @ K^T before the "
                 "softmax, which then sees the scaled scores")


def _scaled_output(w: np.ndarray | None, out: np.ndarray | None, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                   mask: np.ndarray | None = None) -> bool:
    raw_out, raw_w = model.attend(q, k, v, mask, scale=1.0)
    return _like(w, raw_w) and _like(out, raw_out / math.sqrt(q.shape[-1]))


def _values_cause(got: CheckOutput, q: np.ndarray, k: np.ndarray, v: np.ndarray, tag: str = "") -> str | None:
    w, out = got.arrays.get(f"weights{tag}"), got.arrays.get(f"output{tag}")
    right_out, right_w = model.attend(q, k, v)
    bugs = [(text, pair) for text, make in UNMASKED_BUGS if (pair := make(q, k, v)) is not None]
    if _scaled_output(w, out, q, k, v):
        return SCALED_OUTPUT
    for text, (bug_out, bug_w) in [*_score_bugs(q, k, v), *bugs]:
        if _like(w, bug_w) or (w is None and _like(out, bug_out)):
            return text
    if _like(w, right_w) and out is not None and out.shape == right_out.shape:
        return "the attention weights are right but the output is not weights @ V"
    if _like(out, right_out) and w is not None and w.shape == right_w.shape:
        return _weights_returned(w, q, k)
    if w is not None and w.shape == right_out.shape and out is not None and out.shape == right_w.shape:
        return "the pair is returned the wrong way round: return (output, attention_weights)"
    return None


def _weights_returned(w: np.ndarray, q: np.ndarray, k: np.ndarray) -> str:
    """The output is right but the weights returned beside it are not: which ones they are."""
    scores = q @ np.swapaxes(k, -1, -2)
    if _like(w, scores / math.sqrt(q.shape[-1])) or _like(w, scores):
        return ("the output is right, but the attention_weights returned are the scores before the softmax: return "
                "the softmax's output, the weights the output was computed with")
    return "the output is right, but the attention_weights returned are not the ones it was computed with"


OVERFLOW = ("the softmax overflows on large scores: exp of a score above about 88 is inf in float32, and inf / inf "
            "is NaN; subtract each row's maximum before exponentiating (softmax(x) = softmax(x - max(x)), as the "
            "course's Softmax does)")


def sdpa_values(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    right_out, right_w = model.attend(i["q"], i["k"], i["v"])
    plain_right = _like(got.arrays.get("output"), right_out) and _like(got.arrays.get("weights"), right_w)
    if _swapped(got) or not plain_right or "large_q" not in i:
        return _swapped(got) or _values_cause(got, i["q"], i["k"], i["v"])
    if _nan(got, "weights_large") or _nan(got, "output_large"):
        return OVERFLOW
    return _values_cause(got, i["large_q"], i["large_k"], i["large_v"], "_large")


def sdpa_mask_refusal(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    given = " (the given _apply_mask uses masked_fill with MASK_VALUE = -inf)" if _newer(got.facts.get("aux_newer")) else ""
    if _nan(got, "aux_large_unmasked"):
        return Cause("with scores of 1e10 the weights are NaN even without a mask: the softmax overflows on large "
                     "scores", upstream="sdpa_values", hint=False)
    first = got.arrays.get("aux_large_first")
    if _nan(got, "large_scores") or _nan(got, "large_output"):
        if first is not None and np.allclose(first, [0.0, 1.0]):
            return ("the mask was read the wrong way round: with the mask [[1, 0], [1, 1]] the first query attended "
                    "only to the key its 0 blocks, and the second, whose keys are both allowed, had every key blocked "
                    "(NaN): block where mask == 0, not where it is 1")
        return ("with the mask [[1, 0], [1, 1]], which allows a key of every query, the weights are NaN: a blocked "
                "score must become -inf (or -1e9) without turning an allowed one into NaN (0 * -inf is NaN)")
    big = got.arrays.get("large_scores")
    if big is not None and big.shape == (1, 2, 2) and np.allclose(big[0, 0], [0.0, 1.0]):
        return ("a score of 1e10 outweighed the mask: adding -1e9 is not enough for scores this large; fill blocked "
                "scores with -inf" + given)
    if "none" in (got.facts.get("fractional_mask"), got.facts.get("row_all_blocked")):
        return ("a mask that is not 0/1, or that blocks every key of a query, was accepted: " +
                ("call the given _apply_mask, which refuses both with ValueError" if given else
                 "raise ValueError for both, as the newer course's _apply_mask does"))
    return _swapped(got)


def sdpa_heads(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    q, k = i["q"], i["k"]
    if _swapped(got):
        return SWAPPED
    raised = got.facts.get("output")
    if isinstance(raised, str) and raised.startswith("raised"):
        return (f"on (batch, heads, seq, head_dim) inputs the attention {raised}: work on the last two axes only "
                "(K.transpose(-2, -1), Q.shape[-1], softmax on axis -1)")
    if _like(got.arrays.get("weights"), model.attend(q, k, i["v"], scale=1.0 / math.sqrt(q.shape[1]))[1]):
        return (f"on (batch, heads, seq, head_dim) inputs the scores were scaled by 1/sqrt({q.shape[1]}), the number "
                "of heads (Q.shape[1]): take d_k from the last axis, Q.shape[-1]")
    return _values_cause(got, q, k, i["v"])


def sdpa_shapes(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    returns = got.facts.get("returns")
    if returns != "pair":
        return (f"scaled_dot_product_attention returned a {returns}, not the pair (output, attention_weights): "
                "the course's callers unpack two values")
    b, s, d = i["q"].shape
    if got.facts.get("output_3d") == [b, s, s] and got.facts.get("weights_3d") == [b, s, d]:
        return "the pair is returned the wrong way round: return (output, attention_weights)"
    if got.facts.get("weights_cross") == [1, 3, 2] or (
            isinstance(got.facts.get("output_cross"), str)
            and _like(got.arrays.get("aux_output"), model.attend(i["q"], i["k"], i["v"], kqt=True)[0])):
        return ("the weights are (batch, keys, queries): compute Q @ K^T (K.transpose(-2, -1)), not K @ Q^T (with "
                "2 queries and 3 keys, weights @ V then fails)")
    if got.facts.get("output_3d") == [b, s, d] and isinstance(got.facts.get("output_4d"), str):
        return (f"3-D inputs work, but (batch, heads, seq, head_dim) inputs {got.facts['output_4d']}: work on the last "
                "two axes only (K.transpose(-2, -1), not K.transpose(1, 2) or a fixed permutation)")
    sums = got.arrays.get("row_sums")
    if sums is not None and not np.allclose(sums, 1.0, atol=1e-5):
        if _like(got.arrays.get("aux_output"), model.attend(i["q"], i["k"], i["v"])[0]):
            scores = i["q"] @ np.swapaxes(i["k"], -1, -2)
            return _weights_returned(scores, i["q"], i["k"]) if _like(
                sums, (scores / math.sqrt(i["q"].shape[-1])).sum(-1)) or _like(sums, scores.sum(-1)) else (
                "the output is right, but the attention_weights returned are not the ones it was computed with: "
                "their rows do not sum to 1")
        return "the rows of the attention weights do not sum to 1: normalise each row with a softmax over the last axis"
    return None


MASK_BUGS = [
    ("ignored", "the mask had no effect: the weights are those of no mask at all; pass it on and block the scores "
                "where it is 0 with a huge negative value (-1e9 or -inf: a penalty as small as -1e-9 changes "
                "nothing)"),
    ("inverted", "the mask was read the wrong way round: 1 allows a key and 0 blocks it (block where mask == 0)"),
    ("multiply", "the scores were multiplied by the mask, which makes a blocked score 0 instead of a huge negative "
                 "value: blocked keys still get weight; set them to -1e9 (or -inf) instead"),
    ("after", "the mask was applied after the softmax (weights * mask): blocked keys get 0 but the rows no longer "
              "sum to 1; mask the scores before the softmax"),
    ("first", "every batch entry was masked with the first one's mask (mask.data[0] or mask[0]): entry b must use "
              "its own mask[b]"),
    ("boost", "the penalty has the wrong sign: +1e9 where the mask is 0 gives the blocked keys all the weight; add "
              "-1e9 (or fill with -inf) where mask == 0"),
]
NAN_MASK = ("the masked weights are NaN: (1 - mask) * -inf is 0 * -inf = NaN on every allowed key; fill with "
            "np.where(mask == 0, -inf, scores), or add (1 - mask) * -1e9")


def _differing(got: CheckOutput, exp: CheckOutput, names: list[str]) -> list[str]:
    """The outputs where the student's numbers differ from the reference's (an output that is not
    asked of this submission's generation already holds the reference's)."""
    return [n for n in names if (g := got.arrays.get(n)) is not None and (e := exp.arrays.get(n)) is not None
            and not _like(g, e, 1e-5, 1e-6)]


def _mask_cause(got: CheckOutput, exp: CheckOutput,
                cases: Sequence[tuple[str, Callable[..., np.ndarray]]]) -> str | None:
    """The one masking bug that explains every case where the student's numbers are wrong."""
    names = [name for name, _ in cases]
    wrong = _differing(got, exp, names)
    if any(_nan(got, name) for name in names) and not wrong:
        return NAN_MASK
    for kind, text in MASK_BUGS:
        if wrong and all(_like(got.arrays.get(name), want(kind)) for name, want in cases if name in wrong):
            return text
    return None


def _nan(got: CheckOutput, name: str) -> bool:
    """The student's output ``name`` held NaN or infinite values (the host refuses such arrays)."""
    return "NaN or infinite" in got.rejected.get(name, "")


SWAPPED = "the pair is returned the wrong way round: return (output, attention_weights)"


def _swapped(got: CheckOutput) -> str | None:
    return SWAPPED if any(v == "swapped" for k, v in got.facts.items() if k.startswith("aux_order")) else None


def sdpa_mask(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    q, k, v = i["q"], i["k"], i["v"]
    masks = {"causal": (q, k, v, causal((2,), 5)), "padding": (q, k, v, padding(i["lengths"], 5)),
             "heads": (i["hq"], i["hk"], i["hv"], causal((2, 1), 5))}
    cases = [(f"weights_{tag}", lambda kind, a=a: model.attend(*a, masking=kind)[1]) for tag, a in masks.items()]
    if not _differing(got, exp, [name for name, _ in cases]) and any(_nan(got, name) for name, _ in cases):
        # every comparable output is NaN: the alternating mask (allowed and blocked keys in every
        # row, either way round) tells an inverted mask from a 0 * -inf penalty
        inverted = model.attend(q, k, v, alternating((2,), 5), masking="inverted")[1]
        if _like(got.arrays.get("aux_weights_alternating"), inverted):
            return (MASK_BUGS[1][1] + "; with -inf, a query whose keys are all allowed then has every key blocked, "
                    "and its weights are NaN")
    found = _swapped(got) or _mask_cause(got, exp, cases)
    if found:
        return found
    if all(_like(got.arrays.get(f"output_{tag}"), model.attend(*a)[0]) for tag, a in masks.items()):
        return ("the outputs are right, but the attention_weights returned are not the ones they were computed "
                "with (the scores before the softmax?): return the softmax's output")
    for tag, (qq, kk, vv, m) in masks.items():
        if _scaled_output(got.arrays.get(f"weights_{tag}"), got.arrays.get(f"output_{tag}"), qq, kk, vv, m):
            return SCALED_OUTPUT
        for text, (_, bug_w) in _score_bugs(qq, kk, vv, m):
            if _like(got.arrays.get(f"weights_{tag}"), bug_w):
                return text
    always = [model.attend(qq, kk, vv, m * causal(m.shape[:-2], m.shape[-1]))[1] for qq, kk, vv, m in masks.values()]
    kqt = [model.attend(qq, kk, vv, m, kqt=True)[1] for qq, kk, vv, m in masks.values()]
    wrong = _differing(got, exp, [f"weights_{tag}" for tag in masks])  # an unasked case holds the reference's
    for text, wants in ((ALWAYS_CAUSAL, always), (UNMASKED_BUGS[1][0], kqt)):
        if wrong and all(_like(got.arrays.get(f"weights_{tag}"), w) for tag, w in zip(masks, wants, strict=True)
                         if f"weights_{tag}" in wrong):
            return text
    return None


ALWAYS_CAUSAL = ("a causal mask is applied on top of the mask passed (and without one too): apply only the mask given, "
                 "and none when mask is None")


def sdpa_grad(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    q, k, v = i["q"], i["k"], i["v"]
    if _swapped(got):
        return SWAPPED
    for tag, mask, check in (("", None, "sdpa_values"), ("_causal", causal((2,), 4), "sdpa_mask")):
        out = got.arrays.get(f"aux_output{tag}")
        if _nan(got, f"aux_output{tag}"):
            return Cause("the forward values are already NaN here" + ("" if not tag else " with a causal mask"),
                         upstream=check)
        if out is not None and not _like(out, model.attend(q, k, v, mask)[0]):
            return Cause("the forward values are already wrong here" + ("" if not tag else " with a causal mask") +
                         ", so their gradients are too", upstream=check)
    missing = [n.upper() for n in "qkv" if got.facts.get(f"{n}_grad") == NO_GRADIENT]
    if missing == ["Q", "K"]:
        return ("Q and K got no gradient but V did: the attention weights were computed outside the graph (scores or "
                "softmax on .data, then wrapped in a new Tensor; explicit loops over .data do that too); the module "
                "asks for gradient flow through the attention: compute the scores with Q.matmul(K.transpose(-2, -1)) "
                "and the weights with Softmax()")
    if missing:
        return CUT.format(what=", ".join(missing))
    masked_missing = [n.upper() for n in "qkv" if got.facts.get(f"{n}_grad_causal") == NO_GRADIENT]
    if masked_missing:
        return ("with a mask, " + ", ".join(masked_missing) + " got no gradient: the masked scores were rebuilt from "
                ".data; add a constant Tensor or use masked_fill, which keep the graph")
    if _differing(got, exp, [f"{n}_grad{tag}" for n in "qkv" for tag in ("", "_causal")]):
        return BACKWARD_RULE
    return None


BACKWARD_RULE = ("the forward values are right, so a backward rule is wrong: a backward() or apply() of your own "
                 "(the softmax's is s * (g - sum(g * s, axis=-1, keepdims=True)), not g * s * (1 - s)), or a custom "
                 "gradient wired by hand")


# ---- MultiHeadAttention ----------------------------------------------------------------------


def _mha_bugs(i: Inputs, mask: np.ndarray | None = None) -> list[tuple[str, np.ndarray]]:
    h, d = i["heads"], i["dim"]
    found = [
        ("the output projection was skipped: the merged heads go through out_proj", model.mha(i, mask, out_proj=False)),
        ("the heads were split with a reshape alone: (batch, seq, embed_dim) -> (batch, seq, heads, head_dim), then "
         "transpose(1, 2) to (batch, heads, seq, head_dim)", model.mha(i, mask, split="reshape_only",
                                                                       merge="reshape_only")),
        ("the heads were merged with a reshape alone: transpose(1, 2) back to (batch, seq, heads, head_dim) before "
         "reshaping to (batch, seq, embed_dim)", model.mha(i, mask, merge="reshape_only")),
        ("the heads were split from (batch, seq, head_dim, heads), so each head took every num_heads-th column: "
         "reshape to (batch, seq, num_heads, head_dim), head axis first", model.mha(i, mask, split="interleaved",
                                                                                     merge="interleaved")),
        (f"the scores were scaled by 1/sqrt(embed_dim) ({d}), not by 1/sqrt(head_dim) ({d // h}): each head's d_k is "
         "head_dim", model.mha(i, mask, scale=1.0 / math.sqrt(d))),
        ("the input was attended as a single head: split it into num_heads heads of head_dim each",
         model.mha(i, mask, heads=1)),
        (f"the scores were scaled twice, by 1/head_dim ({d // h}) in all: scale them once, by 1/sqrt(head_dim), in "
         "the attention function", model.mha(i, mask, scale=1.0 / (d // h))),
        ("the Q, K and V projections ignore their biases (x @ weight alone): call each Linear, q_proj(x), which "
         "adds its bias",
         model.mha(i, mask, bias=False)),
        ("K and V were projected with q_proj: each comes from its own Linear, k_proj(x) and v_proj(x)",
         model.mha(i, mask, sources=("q_proj",) * 3)),
        ("Q, K and V come from one shared Linear (the grader's weights for the last of them are the only ones "
         "there): q_proj, k_proj and v_proj are three separate Linear layers", model.mha(i, mask, sources=("v_proj",) * 3)),
        ("V was projected with k_proj: V comes from v_proj(x)", model.mha(i, mask, sources=("q_proj", "k_proj", "k_proj"))),
        ("K and V were swapped: K comes from k_proj(x) and V from v_proj(x)",
         model.mha(i, mask, sources=("q_proj", "v_proj", "k_proj"))),
        ("the heads were split with a reshape alone, straight to (batch, heads, seq, head_dim) (the merge is "
         "right): reshape to (batch, seq, heads, head_dim), then transpose(1, 2)",
         model.mha(i, mask, split="reshape_only")),
        ("the output projection leaves out its bias: call out_proj(merged), which adds it",
         model.mha(i, mask, out_bias=False)),
    ]
    if mask is None:  # a mask can no longer broadcast over scores (heads, seq, batch, batch)
        found.append(("the heads were split with transpose(0, 2), which swaps the batch and head axes, so each head "
                      "attends across the batch entries instead of along the sequence: use transpose(1, 2), on "
                      "(batch, seq, heads, head_dim), and transpose(1, 2) back to merge",
                      model.mha(i, None, split="batch_axis", merge="batch_axis")))
    return found


OLDER_4D = (" (the older course lets each head be attended separately, but then every call must get 3-D "
            "(batch, seq, head_dim) tensors)")


def _raised(fact: str) -> str:
    """"raised X", without the note that numpy raised it."""
    return fact.split(" from numpy")[0]


def _own_attention(got: CheckOutput, name: str, own_name: str, right: np.ndarray, upstream: str) -> Cause | None:
    """The class is wired right around a wrong attention function (it gives what the student's own
    function gives on the projected heads, which is not the right answer), or around one that
    raises on (batch, heads, seq, head_dim) inputs. The attention check is named as failing too
    only for the newer generation: the older one does not ask for 4-D inputs, where it passes."""
    out, own, own_fact = got.arrays.get(name), got.arrays.get(own_name), got.facts.get(own_name)
    newer = _newer(got.facts.get("aux_newer"))
    tail, see = ("", upstream) if newer else (OLDER_4D, "")
    if out is None and isinstance(own_fact, str) and own_fact.startswith("raised"):
        return Cause(f"your scaled_dot_product_attention {_raised(own_fact)} on (batch, heads, seq, head_dim) "
                     f"inputs{tail}", upstream=see, hint=newer)
    if out is not None and own is not None and _like(out, own) and not _like(own, right):
        return Cause("your MultiHeadAttention is wired right, but your scaled_dot_product_attention gives wrong "
                     "values on its (batch, heads, seq, head_dim) inputs", upstream=see, hint=newer)
    return None


def mha_values(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    if _returns_pair(got):
        return Cause(RETURNS_PAIR, upstream="mha_shapes", hint=False)
    out = got.arrays.get("output")
    upstream = _own_attention(got, "output", "aux_own_attention", model.mha(i), "sdpa_heads")
    if upstream:
        return upstream
    found = _first([(_like(out, bug), text) for text, bug in _mha_bugs(i)])
    if found:
        return found
    if _like(got.arrays.get("output"), model.mha(i)) and not _like(got.arrays.get("call"), model.mha(i)):
        return "forward is right but __call__ gives something else: __call__ returns self.forward(x, mask)"
    return None


def mha_mask(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    if _returns_pair(got):
        return Cause(RETURNS_PAIR, upstream="mha_shapes", hint=False)
    batch, seq = i["x"].shape[:2]
    masks = {"causal": causal((batch,), seq), "padding": padding(i["lengths"], seq)}
    unmasked = got.arrays.get("aux_unmasked")
    if unmasked is not None and not _like(unmasked, model.mha(i)):
        return Cause("MultiHeadAttention is already wrong without a mask", upstream="mha_values_visible", hint=False)
    forward = [got.arrays.get(f"aux_forward_{tag}") for tag in masks]
    if all(_like(f, model.mha(i, m)) for f, m in zip(forward, masks.values(), strict=True)) and not all(
            _like(got.arrays.get(tag), model.mha(i, m)) for tag, m in masks.items()):
        return ("forward(x, mask) masks right, but the call mha(x, mask) does not: __call__ must pass the mask on, "
                "return self.forward(x, mask)")
    if _nan(got, "causal") and _nan(got, "aux_own_causal"):
        return Cause("your scaled_dot_product_attention gives NaN with a mask, here on every head",
                     upstream="sdpa_mask", hint=False)
    raised = got.facts.get("causal")
    own = got.arrays.get("aux_own_causal")
    if (isinstance(raised, str) and raised.startswith("raised") and own is not None
            and _like(own, model.mha(i, masks["causal"]))):
        return ("MultiHeadAttention's call with a mask " + _raised(raised) + ", while your "
                "scaled_dot_product_attention masks every head right when given the mask as (batch, 1, seq, seq): "
                "reshape the (batch, seq, seq) mask to that, mask.reshape(batch, 1, seq, seq), before passing it on")
    upstream = _own_attention(got, "causal", "aux_own_causal", model.mha(i, masks["causal"]), "sdpa_mask")
    if upstream:
        return Cause(upstream.text.replace("values on its", "values with a mask on its"), upstream=upstream.upstream,
                     hint=upstream.hint)
    cases = [(tag, lambda kind, m=m: model.mha(i, m, masking=kind)) for tag, m in masks.items()]
    found = _mask_cause(got, exp, cases)
    if found:
        return found.replace("pass it on", "pass it on to the attention function (as (batch, 1, seq, seq))")
    bugs = {tag: dict(_mha_bugs(i, m)) for tag, m in masks.items()}
    for text in bugs["causal"]:  # the hypotheses that still apply with a mask
        if all(_like(got.arrays.get(tag), bugs[tag][text]) for tag in masks):
            return Cause(f"the mask is applied, but {text}", upstream="mha_values_visible", hint=False)
    return None


RETURNS_PAIR = ("MultiHeadAttention returns a pair (the output and the attention weights?): forward(x, mask) returns "
                "the output Tensor alone, (batch, seq, embed_dim)")


def _returns_pair(got: CheckOutput) -> bool:
    return any(isinstance(v, str) and (" is a tuple " in v or " is a list " in v) for v in got.facts.values())


def mha_shapes(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    if _returns_pair(got):
        return RETURNS_PAIR
    own = got.facts.get("aux_attention_4d")
    if isinstance(got.facts.get("forward"), str) and isinstance(own, str) and own.startswith("raised"):
        newer = _newer(got.facts.get("aux_newer"))
        return Cause(f"your scaled_dot_product_attention {_raised(own)} on (batch, heads, seq, head_dim) inputs"
                     + ("" if newer else OLDER_4D), upstream="sdpa_heads" if newer else "", hint=False)
    return None


def mha_grad(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    if got.facts.get("aux_returned") in ("tuple", "list"):
        return Cause(RETURNS_PAIR, upstream="mha_shapes", hint=False)
    out = got.arrays.get("aux_output")
    if out is not None and not _like(out, model.mha(i)):
        return Cause("the forward values are already wrong here, so their gradients are too",
                     upstream="mha_values_visible")
    shown = dict(zip(GRAD_OUTPUTS, PARAMETERS, strict=True))
    missing = [shown.get(name, name) for name, value in got.facts.items() if value == NO_GRADIENT]
    if not missing:
        if out is not None and _differing(got, exp, ["x", *GRAD_OUTPUTS]):
            return BACKWARD_RULE
        return None
    if sorted(missing) == ["k_proj.bias", "k_proj.weight", "q_proj.bias", "q_proj.weight"]:
        return ("q_proj and k_proj got no gradient while v_proj and out_proj did: the attention weights were "
                "computed outside the graph (scores or softmax on .data, then wrapped in a new Tensor)")
    if missing == ["x"]:
        return "the projections got gradients but x did not: " + CUT.format(what="x")
    if "x" not in missing and all(name in PARAMETERS for name in missing):
        return (f"{', '.join(missing)} got no gradient though x did: the output was computed from a copy of "
                f"{'that tensor' if len(missing) == 1 else 'those tensors'} (a new Tensor of its .data, or "
                "np.concatenate of .data), not from the parameter itself; use the layer's own Tensors (q_proj(x), "
                "self.out_proj.weight), so that the gradient reaches them")
    if set(missing) >= {"x", "q_proj.weight", "k_proj.weight", "v_proj.weight"} and "out_proj.weight" not in missing:
        return ("only out_proj got gradients: " + CUT.format(what="the merged heads") +
                " (a reshape, transpose or attention step on .data?)")
    return CUT.format(what=", ".join(missing))


def mha_config(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    d, h = i["dim"], i["heads"]
    head_dim = got.facts.get("head_dim")
    if head_dim == "a float" or (head_dim == d / h and head_dim != d // h):
        return "head_dim is a float (embed_dim / num_heads): it must be the integer embed_dim // num_heads"
    count, distinct = got.facts.get("count"), got.facts.get("distinct")
    if isinstance(count, int) and isinstance(distinct, int) and distinct < count:
        return "parameters() lists the same tensor twice: are two projections one shared Linear?"
    if count == 4:
        return "parameters() has 4 tensors: each Linear has a weight and a bias, so extend with layer.parameters()"
    left_out = got.facts.get("aux_left_out")
    if isinstance(left_out, list) and left_out:
        return (f"parameters() leaves out {', '.join(map(str, left_out))}: it must list the weight and the bias of "
                "all four Linear layers, q_proj, k_proj, v_proj and out_proj")
    if isinstance(count, int) and count != 8:
        return (f"parameters() has {count} tensors, not the 8 weights and biases of q_proj, k_proj, v_proj and "
                "out_proj")
    if (got.facts.get("shapes_any_order") == exp.facts.get("shapes_any_order")
            and got.facts.get("shapes") != exp.facts.get("shapes")):
        return ("parameters() lists the right 8 tensors in another order: the newer course's parameters() EXAMPLE "
                "puts each layer's weight, then its bias, layer by layer: q_proj, k_proj, v_proj, out_proj")
    if got.facts.get("trainable") is False:
        return "parameters() holds something other than trainable Tensors: return the Linear layers' parameters()"
    return None


def generation(outputs: Mapping[str, CheckOutput]) -> str | None:
    """'newer' when the submission defines the newer course's given helpers (at least two of
    _compute_attention_scores, _scale_scores and _apply_mask) and behaves as that given code does
    (probes.newer_marks), 'older' when it defines none of them, None when unknown or when the
    evidence is mixed (the names without the behaviour): then only what both generations ask is
    scored."""
    seen = [got.facts["aux_newer"] for got in outputs.values() if isinstance(got.facts.get("aux_newer"), list)]
    if not seen:
        return None
    if any(_newer(marks) for marks in seen):
        return "newer"
    return None if any(seen) else "older"


def _newer(marks: object) -> bool:
    return isinstance(marks, list) and any(isinstance(m, str) and m.startswith(EVIDENCE) for m in marks)


def error_cause(got: CheckOutput, i: Inputs) -> str | None:
    message = got.error.message if got.error is not None else ""
    if "not the pair (output, attention_weights)" in message:
        return "scaled_dot_product_attention must return the pair (output, attention_weights)"
    if "has no q_proj, k_proj, v_proj and out_proj" in message:
        return ("the grader sets known weights through the four Linear layers the course names (q_proj, k_proj, "
                "v_proj, out_proj) or through parameters() in that order")
    return None


DIAGNOSES: dict[str, Diagnosis] = {
    f.__name__: f
    for f in (sdpa_shapes, sdpa_values, sdpa_heads, sdpa_mask, sdpa_mask_refusal, sdpa_grad, mha_config,
              mha_shapes, mha_values, mha_mask, mha_grad)
}
COMPARATORS: dict[str, Any] = {}
NOT_APPLICABLE: dict[str, Any] = {}
GENERATION = generation
ERROR_CAUSE = error_cause


def source_generation(cells: Sequence[str]) -> str | None:
    """A correct source's generation, from its code (grader selftest --mutants): 'newer' when it
    masks with ``masked_fill`` or splits heads in a ``_split_heads`` method (the newer course's
    helpers), else 'older'."""
    code = "\n".join(cells)
    return "newer" if "masked_fill" in code or "def _split_heads" in code else "older"


SOURCE_GENERATION = source_generation
