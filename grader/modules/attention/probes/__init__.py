"""Probes for TinyTorch module 12: scaled_dot_product_attention and MultiHeadAttention.

Inputs are small dyadic rationals (k/16), so every score is exact in float32 and only the softmax
rounds; projections are injected into the student's four Linear layers so that the outputs are
known. Masks follow the course: 1 allows a key, 0 blocks it, and every query keeps at least one
key (where the older generation's additive -1e9 and the newer one's -inf agree to the last bit).

Facts whose names start with ``aux_`` are context for the judge (the student's own attention
function inside their MultiHeadAttention, the marks of the newer generation); never compared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from grader.harness.probes import (
    Inputs,
    Outputs,
    Probe,
    ProbeError,
    as_array,
    attempt,
    caught,
    dyadic,
    exception_name,
    grad_of,
    parameters_of,
    raised,
    shape_of,
    tensor_class,
)

Namespace = dict[str, Any]
NO_GRADIENT = "no gradient: .grad is still None after backward()"
LAYERS = ("q_proj", "k_proj", "v_proj", "out_proj")
PARAMETERS = tuple(f"{layer}.{part}" for layer in LAYERS for part in ("weight", "bias"))
# mha_grad's output names for the parameters' gradients: output names are [A-Za-z0-9_] only
# (grader/channel.py), so q_proj.weight's gradient is the output q_proj_weight
GRAD_OUTPUTS = tuple(name.replace(".", "_") for name in PARAMETERS)
NEWER_MARKS = ("_compute_attention_scores", "_scale_scores", "_apply_mask")


EVIDENCE = "evidence: "


def newer_marks(ns: Namespace) -> list[str]:
    """What marks the submission as written for the newer generation (context for the judge's
    ``generation``): at least two of its three module-level helpers by name, and then, as
    evidence, what only the newer course's given code does: an ``_apply_mask`` that refuses a mask
    holding 0.5 with ValueError, or ``_split_heads`` / ``_merge_heads`` methods taking
    ``(x, batch_size, seq_len)``. Entries of evidence start with ``EVIDENCE``. A student of the
    older course may well write helpers called ``_scale_scores`` and ``_apply_mask`` (the same
    names, even the same parameters): names without evidence are mixed evidence, and the judge
    then scores only what both generations ask."""
    found = [name for name in NEWER_MARKS if callable(ns.get(name))]
    if len(found) < 2:
        return []
    mha = ns.get("MultiHeadAttention")
    methods = [getattr(mha, m, None) for m in ("_split_heads", "_merge_heads")]
    found += [f"MultiHeadAttention.{m.__name__}" for m in methods if callable(m)]
    if callable(ns.get("_apply_mask")) and _refuses_half_mask(ns["_apply_mask"]):
        found.append(EVIDENCE + "_apply_mask refuses a mask holding 0.5 with ValueError")
    if all(callable(m) and _positional(m) == 4 for m in methods):
        found.append(EVIDENCE + "_split_heads and _merge_heads take (x, batch_size, seq_len)")
    return found


def _refuses_half_mask(apply_mask: Callable[..., Any]) -> bool:
    """The newer course's given _apply_mask raises ValueError for mask entries other than 0 and 1
    (no exception is recorded: this is context, not a check)."""
    try:
        apply_mask(_t(np.zeros((1, 2, 2))), _t(np.array([[[1.0, 0.5], [1.0, 1.0]]])))
    except ValueError:
        return True
    except Exception:  # student code: any other failure is no evidence
        return False
    return False


def _positional(method: Callable[..., Any]) -> int:
    """How many positional parameters a function takes (self included), -1 when unknown."""
    import inspect

    try:
        params = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return -1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in params if p.kind in kinds)


def _t(a: np.ndarray, grad: bool = False) -> Any:
    return tensor_class()(np.array(a, dtype=np.float32), requires_grad=grad)


def _pair(result: Any, what: str) -> tuple[Any, Any]:
    """(output, attention_weights) from what the student returned; ProbeError when it is not a pair."""
    if isinstance(result, (tuple, list)) and len(result) == 2:
        return result[0], result[1]
    raise ProbeError(f"{what} returned a {type(result).__name__}, not the pair (output, attention_weights)")


def _sdpa(ns: Namespace, q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None) -> tuple[Any, Any]:
    args = [_t(q), _t(k), _t(v)] + ([] if mask is None else [_t(mask)])
    return _pair(ns["scaled_dot_product_attention"](*args), "scaled_dot_product_attention")


def _both(ns: Namespace, q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None, tag: str) -> Outputs:
    """``output<tag>`` and ``weights<tag>`` as arrays, or one sentence for both when the call failed."""
    try:
        out, w = _sdpa(ns, q, k, v, mask)
    except ProbeError as e:
        return {f"output{tag}": str(e)[:500], f"weights{tag}": str(e)[:500]}
    except Exception as e:
        caught(e, "value")
        text = "raised " + exception_name(e)
        return {f"output{tag}": text, f"weights{tag}": text}
    found = {f"output{tag}": attempt(lambda: out, "output"), f"weights{tag}": attempt(lambda: w, "attention_weights")}
    found[f"aux_order{tag}"] = order(found[f"output{tag}"], found[f"weights{tag}"], q, v)
    return found


def order(out: Any, w: Any, q: np.ndarray, v: np.ndarray) -> str:
    """"swapped" when the pair came back as (weights, output): their shapes say so (context only)."""
    if not (isinstance(out, np.ndarray) and isinstance(w, np.ndarray)):
        return "unknown"
    want_out, want_w = (*q.shape[:-1], v.shape[-1]), (*q.shape[:-1], v.shape[-2])
    if want_out != want_w and out.shape == want_w and w.shape == want_out:
        return "swapped"
    return "as asked"


def causal(batch_shape: tuple[int, ...], seq: int) -> np.ndarray:
    return np.broadcast_to(np.tril(np.ones((seq, seq))), (*batch_shape, seq, seq)).copy()


def padding(lengths: list[int], seq: int) -> np.ndarray:
    """(batch, seq, seq): query rows see only the first ``lengths[b]`` keys of their batch entry."""
    return np.stack([np.broadcast_to((np.arange(seq) < n).astype(float), (seq, seq)) for n in lengths])


# ---- scaled_dot_product_attention ------------------------------------------------------------


def _qkv(rng: np.random.Generator, shape: tuple[int, ...], seq_k: int | None = None) -> Inputs:
    k_shape = (*shape[:-2], seq_k or shape[-2], shape[-1])
    return {"q": dyadic(rng, shape, 32), "k": dyadic(rng, k_shape, 32), "v": dyadic(rng, k_shape, 32)}


def _shapes_inputs(rng: np.random.Generator) -> Inputs:
    return {**_qkv(rng, (2, 5, 6)), "heads": _qkv(rng, (2, 3, 4, 5))["q"], "cross_q": dyadic(rng, (1, 2, 4), 32),
            "cross_k": dyadic(rng, (1, 3, 4), 32)}


def _shapes_describe(i: Inputs) -> str:
    return ("scaled_dot_product_attention(Q, K, V) on (2, 5, 6) tensors, on (2, 3, 4, 5) tensors (batch, heads), "
            "and with 2 queries against 3 keys")


def _shape_pair(call: Callable[[], tuple[Any, Any]], what: str) -> tuple[list[int] | str, list[int] | str]:
    try:
        out, w = call()
        return shape_of(out, f"{what} output"), shape_of(w, f"{what} attention_weights")
    except ProbeError as e:
        return str(e)[:300], str(e)[:300]
    except Exception as e:
        caught(e, "value")
        return "raised " + exception_name(e), "raised " + exception_name(e)


def _shapes_run(ns: Namespace, i: Inputs) -> Outputs:
    result = ns["scaled_dot_product_attention"](_t(i["q"]), _t(i["k"]), _t(i["v"]))
    returns = "pair" if isinstance(result, (tuple, list)) and len(result) == 2 else type(result).__name__
    out3, w3 = _shape_pair(lambda: _sdpa(ns, i["q"], i["k"], i["v"]), "3-D")
    h = i["heads"]
    out4, w4 = _shape_pair(lambda: _sdpa(ns, h, h[..., ::-1], h[:, ::-1]), "4-D")
    cross_v = i["cross_k"] * 2.0
    outc, wc = _shape_pair(lambda: _sdpa(ns, i["cross_q"], i["cross_k"], cross_v), "cross")
    plain = _both(ns, i["q"], i["k"], i["v"], None, "")
    weights = plain["weights"]
    sums = weights.sum(axis=-1) if isinstance(weights, np.ndarray) else weights
    return {"returns": returns, "output_3d": out3, "weights_3d": w3, "output_4d": out4, "weights_4d": w4,
            "output_cross": outc, "weights_cross": wc, "row_sums": sums, "aux_output": plain["output"]}


def _values_inputs(rng: np.random.Generator) -> Inputs:
    # the large case: whole-number Q and K up to 32, so scores reach the thousands (exp overflows
    # float32 above about 88) and stay exact; its rows' top scores differ by multiples of 1/2
    large = {f"large_{n}": a * (16.0 if n != "v" else 1.0) for n, a in _qkv(rng, (2, 4, 4)).items()}
    return {**_qkv(rng, (2, 5, 6)), **large}


def _values_describe(i: Inputs) -> str:
    return (f"scaled_dot_product_attention(Q, K, V) on known {i['q'].shape} tensors (batch, seq, d_model), no mask; "
            f"then on {i['large_q'].shape} tensors whose scores reach the thousands (a numerically stable softmax)")


def _values_run(ns: Namespace, i: Inputs) -> Outputs:
    found = _both(ns, i["q"], i["k"], i["v"], None, "")
    if "large_q" in i:
        found.update(_both(ns, i["large_q"], i["large_k"], i["large_v"], None, "_large"))
    return found


def _heads_inputs(rng: np.random.Generator) -> Inputs:
    return _qkv(rng, (2, 3, 4, 5))


def _heads_describe(i: Inputs) -> str:
    return f"scaled_dot_product_attention(Q, K, V) on known {i['q'].shape} tensors (batch, heads, seq, head_dim)"


def _mask_inputs(rng: np.random.Generator) -> Inputs:
    heads = _qkv(rng, (2, 2, 5, 3))
    return {**_qkv(rng, (2, 5, 4)), **{f"h{n}": heads[n] for n in "qkv"}, "lengths": [3, 5]}


def _mask_describe(i: Inputs) -> str:
    return ("scaled_dot_product_attention(Q, K, V, mask) on known (2, 5, 4) tensors with a causal mask "
            f"(lower triangle of ones, shape (2, 5, 5)) and with a padding mask (keys {i['lengths']} long); "
            "then on (2, 2, 5, 3) tensors with a causal mask of shape (2, 1, 5, 5)")


def _mask_run(ns: Namespace, i: Inputs) -> Outputs:
    q, k, v = i["q"], i["k"], i["v"]
    return {**_both(ns, q, k, v, causal((2,), 5), "_causal"),
            **_both(ns, q, k, v, padding(i["lengths"], 5), "_padding"),
            **_both(ns, i["hq"], i["hk"], i["hv"], causal((2, 1), 5), "_heads"),
            "aux_weights_unmasked": _both(ns, q, k, v, None, "")["weights"],
            # context: a mask whose every query has allowed and blocked keys, read either way round,
            # so that a mask read the wrong way round gives finite numbers here
            "aux_weights_alternating": _both(ns, q, k, v, alternating((2,), 5), "")["weights"]}


def alternating(batch_shape: tuple[int, ...], seq: int) -> np.ndarray:
    """Key k open to query q of entry b when q + k + b is even: every row has both 0s and 1s."""
    grid = np.add.outer(np.arange(seq), np.arange(seq))
    entries = np.arange(int(np.prod(batch_shape))).reshape(*batch_shape, 1, 1)
    mask: np.ndarray = ((grid + entries) % 2 == 0).astype(float)
    return mask


def _refusal_inputs(rng: np.random.Generator) -> Inputs:
    return {}


def _refusal_describe(i: Inputs) -> str:
    return ("scaled_dot_product_attention with a mask holding 0.5, with a mask that blocks every key of a query, "
            "and with scores of 1e10 under a causal mask (Q = [[1e5], [1e5]], K = [[0], [1e5]], V = [[1], [99]]): "
            "all its weights and its output")


def _refusal_run(ns: Namespace, i: Inputs) -> Outputs:
    ones = np.ones((1, 2, 2))
    big_q = np.array([[[1e5], [1e5]]])
    big_k = np.array([[[0.0], [1e5]]])
    big_v = np.array([[[1.0], [99.0]]])
    pair = _both(ns, big_q, big_k, big_v, np.array([[1.0, 0.0], [1.0, 1.0]]), "")
    weights = pair["weights"]
    unmasked = _both(ns, big_q, big_k, big_v, None, "")["weights"]
    return {
        "fractional_mask": raised(lambda: _sdpa(ns, ones, ones, ones, np.array([[1.0, 0.5], [1.0, 1.0]]))),
        "row_all_blocked": raised(lambda: _sdpa(ns, ones, ones, ones, np.array([[0.0, 0.0], [1.0, 1.0]]))),
        "large_scores": weights,
        "large_output": pair["output"],
        # context: the same scores without a mask (NaN there is an overflowing softmax), and the
        # first query's weights alone (finite even when the second query's are NaN)
        "aux_large_unmasked": unmasked,
        "aux_large_first": weights[0, 0].copy() if isinstance(weights, np.ndarray) and weights.shape == (1, 2, 2)
        else "not (1, 2, 2) weights",
        "aux_newer": newer_marks(ns),
        "aux_order": pair["aux_order"],
    }


def _grad_inputs(rng: np.random.Generator) -> Inputs:
    return {**_qkv(rng, (2, 4, 3)), "upstream": dyadic(rng, (2, 4, 3), 32)}


def _grad_describe(i: Inputs) -> str:
    return ("output, _ = scaled_dot_product_attention(Q, K, V) on (2, 4, 3) tensors that require grad, then "
            "output.backward(known gradient); again with a causal mask")


def _grads(ns: Namespace, i: Inputs, mask: np.ndarray | None, tag: str) -> Outputs:
    tensors = [_t(i[n], grad=True) for n in "qkv"]
    found: Outputs = {}
    try:
        args = tensors + ([] if mask is None else [_t(mask)])
        out, w = _pair(ns["scaled_dot_product_attention"](*args), "scaled_dot_product_attention")
        found[f"aux_output{tag}"] = attempt(lambda: out, "output")
        found[f"aux_order{tag}"] = order(found[f"aux_output{tag}"], attempt(lambda: w, "attention_weights"),
                                         i["q"], i["v"])
        out.backward(i["upstream"].astype(np.float32))
    except ProbeError as e:
        return {**found, **{f"{n}_grad{tag}": str(e)[:300] for n in "qkv"}}
    except Exception as e:
        caught(e, "value")
        return {**found, **{f"{n}_grad{tag}": "raised " + exception_name(e) for n in "qkv"}}
    for name, tensor in zip("qkv", tensors, strict=True):
        grad = grad_of(tensor, name.upper())
        found[f"{name}_grad{tag}"] = grad if grad is not None else NO_GRADIENT
    return found


def _grad_run(ns: Namespace, i: Inputs) -> Outputs:
    return {**_grads(ns, i, None, ""), **_grads(ns, i, causal((2,), 4), "_causal")}


# ---- MultiHeadAttention ----------------------------------------------------------------------


def _config_inputs(rng: np.random.Generator) -> Inputs:
    heads = int(rng.integers(2, 5))
    return {"dim": heads * int(rng.integers(2, 5)), "heads": heads}


def _config_describe(i: Inputs) -> str:
    return f"MultiHeadAttention({i['dim']}, {i['heads']}): embed_dim, num_heads, head_dim and parameters()"


def _config_run(ns: Namespace, i: Inputs) -> Outputs:
    mha = ns["MultiHeadAttention"](i["dim"], i["heads"])
    params = parameters_of(mha, "MultiHeadAttention")
    tensors = [p for p in params if isinstance(p, tensor_class())]
    shapes = [str(tuple(int(n) for n in np.shape(getattr(p, "data", p)))) for p in params]
    held = {id(p) for p in params}
    return {
        "embed_dim": _int_attr(mha, "embed_dim"),
        "num_heads": _int_attr(mha, "num_heads"),
        "head_dim": _int_attr(mha, "head_dim"),
        "count": len(params),
        "shapes_any_order": sorted(shapes),
        "shapes": shapes,  # in order: only the newer course fixes it (its parameters() EXAMPLE)
        # context: the layers' tensors that parameters() leaves out
        "aux_left_out": [name for name in PARAMETERS
                         if isinstance(t := getattr(getattr(mha, name.split(".")[0], None), name.split(".")[1], None),
                                       tensor_class()) and id(t) not in held],
        "trainable": len(tensors) == len(params) and all(getattr(p, "requires_grad", False) is True for p in params),
        "distinct": len({id(p) for p in params}),
    }


def _int_attr(obj: Any, name: str) -> int | str:
    value = getattr(obj, name, None)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    return "missing" if value is None else f"a {type(value).__name__}"


def _divisible_describe(i: Inputs) -> str:
    return ("MultiHeadAttention(12, 5) (12 is not a multiple of 5); then MultiHeadAttention(2, 4), (4, 1.5), "
            "(4, 0), (4, -1) and (0, 1)")


def _divisible_run(ns: Namespace, i: Inputs) -> Outputs:
    make = ns["MultiHeadAttention"]
    return {
        "not_divisible": raised(lambda: make(12, 5)),
        "more_heads_than_dims": raised(lambda: make(2, 4)),
        "fractional_heads": raised(lambda: make(4, 1.5)),
        "zero_heads": raised(lambda: make(4, 0)),
        "negative_heads": raised(lambda: make(4, -1)),
        "zero_embed": raised(lambda: make(0, 1)),
        "aux_newer": newer_marks(ns),
    }


def _shapes_mha_inputs(rng: np.random.Generator) -> Inputs:
    return {"x": dyadic(rng, (2, 5, 8), 16), "x_small": dyadic(rng, (1, 3, 12), 16)}


def _shapes_mha_describe(i: Inputs) -> str:
    return ("MultiHeadAttention(8, 2) forward and __call__ on a (2, 5, 8) input, with and without a causal "
            "(2, 5, 5) mask; MultiHeadAttention(12, 4) and MultiHeadAttention(12, 1) on a (1, 3, 12) input")


def _shapes_mha_run(ns: Namespace, i: Inputs) -> Outputs:
    mha = ns["MultiHeadAttention"](8, 2)
    x = i["x"]
    small = ns["MultiHeadAttention"](12, 4)
    return {
        "forward": _shape_or_error(lambda: mha.forward(_t(x)), "forward(x)"),
        "call": _shape_or_error(lambda: mha(_t(x)), "mha(x)"),
        "masked": _shape_or_error(lambda: mha(_t(x), _t(causal((2,), 5))), "mha(x, mask)"),
        "small": _shape_or_error(lambda: small(_t(i["x_small"])), "MultiHeadAttention(12, 4)(x)"),
        "one_head": _shape_or_error(lambda: ns["MultiHeadAttention"](12, 1)(_t(i["x_small"])),
                                    "MultiHeadAttention(12, 1)(x)"),
        "aux_attention_4d": _shape_or_error(lambda: _sdpa(ns, *(i["x"].reshape(2, 5, 2, 4).transpose(0, 2, 1, 3),) * 3)[0],
                                            "scaled_dot_product_attention on (2, 2, 5, 4) tensors"),
        "aux_newer": newer_marks(ns),
    }


def _shape_or_error(call: Callable[[], Any], what: str) -> list[int] | str:
    out = attempt(call, what)
    return [int(n) for n in out.shape] if isinstance(out, np.ndarray) else out


def _mha_inputs(rng: np.random.Generator) -> Inputs:
    # head_dim (4), seq (5), batch (2) and heads (3) all differ, so that a scale by the wrong axis
    # (Q.shape[2] of a 4-D tensor) or a mask broadcast over the wrong axis changes the output
    dim, heads, batch, seq = 12, 3, 2, 5
    found: Inputs = {"dim": dim, "heads": heads, "x": dyadic(rng, (batch, seq, dim), 16),
                     "upstream": dyadic(rng, (batch, seq, dim), 16), "lengths": [2, 4]}
    for layer in LAYERS:
        found[f"{layer}.weight"] = dyadic(rng, (dim, dim), 8)
        found[f"{layer}.bias"] = dyadic(rng, (dim,), 8)
    return found


def _mha_describe(i: Inputs) -> str:
    return (f"MultiHeadAttention({i['dim']}, {i['heads']}) with known q_proj, k_proj, v_proj and out_proj weights "
            f"and biases, on a known {i['x'].shape} input")


def inject_mha(mha: Any, i: Inputs) -> list[Any]:
    """Write the known weights into the student's four Linear layers (by the names the course asks
    for; else parameters() in the course's order q, k, v, out, each weight then bias); the tensors."""
    names = [f"{layer}.{part}" for layer in LAYERS for part in ("weight", "bias")]
    held: list[Any] = [getattr(getattr(mha, layer, None), part, None) for layer in LAYERS for part in ("weight", "bias")]
    if not all(isinstance(t, tensor_class()) for t in held):
        held = parameters_of(mha, "MultiHeadAttention")
        if len(held) != 8:
            raise ProbeError("MultiHeadAttention has no q_proj, k_proj, v_proj and out_proj Linear layers, and "
                             f"its parameters() holds {len(held)} tensors, not their 8 weights and biases")
    for name, tensor in zip(names, held, strict=True):
        data: Any = getattr(tensor, "data", None)
        shape = tuple(np.shape(data))
        if shape != i[name].shape:
            raise ProbeError(f"MultiHeadAttention's {name} has shape {shape}, expected {i[name].shape}")
        tensor.data[...] = i[name]
    return held


def _heads(a: np.ndarray, heads: int) -> np.ndarray:
    b, s, d = a.shape
    return a.reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)


def own_attention(ns: Namespace, i: Inputs, mask: np.ndarray | None) -> np.ndarray | str:
    """The course's multi-head wiring around the student's own scaled_dot_product_attention (context
    only): tells a bug in the attention function from one in the class."""
    def run() -> Any:
        x, h = i["x"], i["heads"]
        q, k, v = (_heads(x @ i[f"{n}.weight"] + i[f"{n}.bias"], h) for n in LAYERS[:3])
        m = None if mask is None else mask[:, None]
        out, _ = _sdpa(ns, q, k, v, m)
        merged = as_array(out, "output").transpose(0, 2, 1, 3).reshape(x.shape)
        return merged @ i["out_proj.weight"] + i["out_proj.bias"]
    return attempt(run, "scaled_dot_product_attention on (batch, heads, seq, head_dim) tensors")


def _mha_run(ns: Namespace, i: Inputs) -> Outputs:
    mha = ns["MultiHeadAttention"](i["dim"], i["heads"])
    inject_mha(mha, i)
    return {"output": attempt(lambda: mha.forward(_t(i["x"])), "forward(x)"),
            "call": attempt(lambda: mha(_t(i["x"])), "mha(x)"),
            "aux_own_attention": own_attention(ns, i, None), "aux_newer": newer_marks(ns)}


def _mha_mask_describe(i: Inputs) -> str:
    return (f"MultiHeadAttention({i['dim']}, {i['heads']}) with known weights on a known {i['x'].shape} input, "
            f"with a causal {(i['x'].shape[0],) + (i['x'].shape[1],) * 2} mask and with a padding mask "
            f"(keys {i['lengths']} long)")


def _mha_mask_run(ns: Namespace, i: Inputs) -> Outputs:
    mha = ns["MultiHeadAttention"](i["dim"], i["heads"])
    inject_mha(mha, i)
    x = i["x"]
    batch, seq = x.shape[:2]
    return {"causal": attempt(lambda: mha(_t(x), _t(causal((batch,), seq))), "mha(x, causal mask)"),
            "padding": attempt(lambda: mha(_t(x), _t(padding(i["lengths"], seq))), "mha(x, padding mask)"),
            # context: the same without a mask, and through forward rather than __call__
            "aux_unmasked": attempt(lambda: mha(_t(x)), "mha(x)"),
            "aux_forward_causal": attempt(lambda: mha.forward(_t(x), _t(causal((batch,), seq))),
                                          "forward(x, causal mask)"),
            "aux_forward_padding": attempt(lambda: mha.forward(_t(x), _t(padding(i["lengths"], seq))),
                                           "forward(x, padding mask)"),
            "aux_own_causal": own_attention(ns, i, causal((batch,), seq)), "aux_newer": newer_marks(ns)}


def _mha_grad_describe(i: Inputs) -> str:
    return (f"MultiHeadAttention({i['dim']}, {i['heads']}) with known weights on a known input that requires grad, "
            "then output.backward(known gradient): the gradients of x and of the 8 projection tensors")


def _mha_grad_run(ns: Namespace, i: Inputs) -> Outputs:
    mha = ns["MultiHeadAttention"](i["dim"], i["heads"])
    held = inject_mha(mha, i)
    x = _t(i["x"], grad=True)
    try:
        out = mha(x)
        if isinstance(out, (tuple, list)):
            text = f"mha(x) returned a {type(out).__name__}, not a Tensor"
            return {"x": text, **{output: text for output in GRAD_OUTPUTS}, "aux_returned": type(out).__name__}
        forward = attempt(lambda: out, "mha(x)")
        out.backward(i["upstream"].astype(np.float32))
    except Exception as e:
        caught(e, "value")
        text = "raised " + exception_name(e)
        return {"x": text, **{output: text for output in GRAD_OUTPUTS}}
    found: Outputs = {"aux_output": forward}
    for (output, shown), tensor in zip([("x", "x"), *zip(GRAD_OUTPUTS, PARAMETERS, strict=True)], [x, *held],
                                       strict=True):
        grad = grad_of(tensor, shown)
        found[output] = grad if grad is not None else NO_GRADIENT
    return found


SDPA = ("scaled_dot_product_attention",)
MHA = ("MultiHeadAttention",)
PROBES = {
    p.name: p
    for p in [
        Probe("sdpa_shapes", SDPA, _shapes_inputs, _shapes_describe, _shapes_run),
        Probe("sdpa_values", SDPA, _values_inputs, _values_describe, _values_run),
        Probe("sdpa_heads", SDPA, _heads_inputs, _heads_describe, _values_run),
        Probe("sdpa_mask", SDPA, _mask_inputs, _mask_describe, _mask_run),
        Probe("sdpa_mask_refusal", SDPA, _refusal_inputs, _refusal_describe, _refusal_run),
        Probe("sdpa_grad", SDPA, _grad_inputs, _grad_describe, _grad_run),
        Probe("mha_config", MHA, _config_inputs, _config_describe, _config_run),
        Probe("mha_divisible", MHA, _refusal_inputs, _divisible_describe, _divisible_run),
        Probe("mha_shapes", MHA, _shapes_mha_inputs, _shapes_mha_describe, _shapes_mha_run),
        Probe("mha_values", MHA, _mha_inputs, _mha_describe, _mha_run),
        Probe("mha_mask", MHA, _mha_inputs, _mha_mask_describe, _mha_mask_run),
        Probe("mha_grad", MHA, _mha_inputs, _mha_grad_describe, _mha_grad_run),
    ]
}
