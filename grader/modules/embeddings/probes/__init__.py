"""Probes for TinyTorch module 11: Embedding, PositionalEncoding, sinusoids, EmbeddingLayer.

Inputs are small dyadic rationals (k/16), so lookups and gradient sums are exact in float32 and
a correct implementation in any style matches the reference to the last bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from grader.harness.probes import (
    Inputs,
    Outputs,
    Probe,
    as_array,
    attempt,
    caught,
    dyadic,
    exception_name,
    fmt,
    grad_of,
    held_tensors,
    inject,
    parameters_of,
    raised,
    shape_of,
    tensor_class,
    token_ids,
)

from .api import PROBES as API_PROBES
from .api import grad_after, held_rows, holds_instance, own_lookup, own_positions, seed_values, trainable_rows, type_name

Namespace = dict[str, Any]


def _seed_weights() -> np.ndarray:
    """The spec's table: vocab 4, d_model 2, row v = (10v, 10v + 1)."""
    return np.array([[10.0 * v, 10.0 * v + 1] for v in range(4)])


# ---- Embedding -----------------------------------------------------------------------------


def _emb_shape_inputs(rng: np.random.Generator) -> Inputs:
    vocab, dim, batch, seq = int(rng.integers(5, 30)), int(rng.integers(2, 9)), 3, int(rng.integers(2, 7))
    return {"vocab": vocab, "dim": dim, "ids_1d": token_ids(rng, vocab, (seq,)), "ids_2d": token_ids(rng, vocab, (batch, seq))}


def _emb_shape_describe(i: Inputs) -> str:
    return (f"Embedding({i['vocab']}, {i['dim']}).forward(ids of shape {tuple(i['ids_1d'].shape)}) and "
            f"embedding(ids of shape {tuple(i['ids_2d'].shape)}); then embedding(ids of shape (0,)), no ids at all")


def _emb_shape_run(ns: Namespace, i: Inputs) -> Outputs:
    T = tensor_class()
    emb = ns["Embedding"](i["vocab"], i["dim"])
    return {
        "forward_1d": shape_of(emb.forward(T(i["ids_1d"])), "forward(1-D ids)"),
        "call_2d": shape_of(emb(T(i["ids_2d"])), "embedding(2-D ids)"),
        "forward_2d": shape_of(emb.forward(T(i["ids_2d"])), "forward(2-D ids)"),
        "call_empty": _shape_or_error(lambda: emb(T(np.zeros(0))), "embedding(empty ids)"),
        "aux_seed_values": seed_values(ns),
    }


def _shape_or_error(call: Callable[[], Any], what: str) -> list[int] | str:
    """The result's shape, or "raised X" when the call raised."""
    out = attempt(call, what)
    return [int(n) for n in out.shape] if isinstance(out, np.ndarray) else out


def _emb_lookup_inputs(rng: np.random.Generator) -> Inputs:
    vocab, dim = int(rng.integers(6, 40)), int(rng.integers(2, 7))
    return {"vocab": vocab, "dim": dim, "weight": dyadic(rng, (vocab, dim)), "ids": token_ids(rng, vocab, (3, 5))}


def _emb_lookup_describe(i: Inputs) -> str:
    return (f"Embedding(4, 2) with weight rows (10v, 10v+1), forward(Tensor([2, 0])); then "
            f"Embedding({i['vocab']}, {i['dim']}) with known weights on ids {fmt(i['ids'].astype(int))}")


def _emb_lookup_run(ns: Namespace, i: Inputs) -> Outputs:
    T = tensor_class()
    seed = ns["Embedding"](4, 2)
    inject(seed, _seed_weights(), "Embedding(4, 2)")
    emb = ns["Embedding"](i["vocab"], i["dim"])
    inject(emb, i["weight"], f"Embedding({i['vocab']}, {i['dim']})")
    return {
        "seed_rows": as_array(seed(T([2.0, 0.0])), "embedding(Tensor([2, 0]))"),
        "rows": as_array(emb(T(i["ids"])), "embedding(ids)"),
        "aux_seed_values": seed_values(ns),
    }


def _emb_params_inputs(rng: np.random.Generator) -> Inputs:
    return {"vocab": int(rng.integers(10, 60)), "dim": int(rng.integers(3, 17))}


def _emb_params_describe(i: Inputs) -> str:
    return f"Embedding({i['vocab']}, {i['dim']}).parameters()"


def _emb_params_run(ns: Namespace, i: Inputs) -> Outputs:
    emb = ns["Embedding"](i["vocab"], i["dim"])
    params = parameters_of(emb, "Embedding")
    weight = getattr(emb, "weight", None)
    return {
        "count": len(params),
        "is_weight": bool(params) and weight is not None and params[0] is weight,
        "requires_grad": bool(params) and getattr(params[0], "requires_grad", None) is True,
        "numel": int(sum(as_array(p, "parameter").size for p in params)),
    }


def _emb_index_error_inputs(rng: np.random.Generator) -> Inputs:
    return {"vocab": int(rng.integers(5, 50)), "dim": int(rng.integers(2, 6))}


def _emb_index_error_describe(i: Inputs) -> str:
    v = i["vocab"]
    return (f"Embedding({v}, {i['dim']}) on ids [{v}], [-1] and [{v - 1}]; then on [-1, 2], [1, {v}] "
            f"and [[0, 1], [{v - 1}, {v}]] (one bad id among good ones)")


def _emb_index_error_run(ns: Namespace, i: Inputs) -> Outputs:
    T = tensor_class()
    emb = ns["Embedding"](i["vocab"], i["dim"])
    v = float(i["vocab"])
    return {
        "id_equal_vocab": raised(lambda: emb(T([v]))),
        "id_minus_one": raised(lambda: emb(T([-1.0]))),
        "id_last_valid": raised(lambda: emb(T([v - 1]))),
        "mixed_negative": raised(lambda: emb(T([-1.0, 2.0]))),
        "mixed_too_big": raised(lambda: emb(T([1.0, v]))),
        "batch_too_big": raised(lambda: emb(T([[0.0, 1.0], [v - 1, v]]))),
        "aux_id_zero": raised(lambda: emb(T([0.0]))),
        "aux_row_of_vocab": _row_read(emb, v, i),
        "aux_row_of_minus_one": _row_read(emb, -1.0, i),
    }


def _row_read(emb: Any, token: float, i: Inputs) -> int | None:
    """The one row of the Embedding's own (vocab, dim) table that a lookup of ``token`` returned, when
    it returned one (context for the judge: where an id that should be refused was sent)."""
    try:
        table = next(w for w in (as_array(p, "parameter") for p in parameters_of(emb, "Embedding"))
                     if w.shape == (i["vocab"], i["dim"]))
        row = as_array(emb(tensor_class()([token])), "embedding(id)").reshape(-1)
    except Exception:
        return None
    if row.shape != (i["dim"],):
        return None
    matches = np.flatnonzero(np.all(table == row, axis=1))
    return int(matches[0]) if matches.size == 1 else None


def _emb_xavier_inputs(rng: np.random.Generator) -> Inputs:
    return {"vocab": int(rng.integers(400, 1200)), "dim": int(rng.integers(16, 65))}


def _emb_xavier_describe(i: Inputs) -> str:
    return f"Embedding({i['vocab']}, {i['dim']}) fresh weights"


def _emb_xavier_run(ns: Namespace, i: Inputs) -> Outputs:
    emb = ns["Embedding"](i["vocab"], i["dim"])
    params = parameters_of(emb, "Embedding")
    weight = getattr(emb, "weight", params[0] if params else None)
    return {"weight": as_array(weight, "Embedding.weight")}


# ---- gradients -----------------------------------------------------------------------------


NO_GRADIENT = "no gradient: .grad is still None after backward()"
IN_GRAPH = ", although the output has a _grad_fn"  # the node ran, but gave the weight no gradient
A_COPY = ", whose input is another Tensor than the weight"  # ... to a copy of the weight it was handed


def _backward(ns: Namespace, weight: np.ndarray, ids: np.ndarray, upstream: np.ndarray) -> np.ndarray | str:
    """Fresh Embedding with ``weight``; forward ``ids``; backward ``upstream``; the weight's grad."""
    T = tensor_class()
    emb = ns["Embedding"](*weight.shape)
    param = inject(emb, weight, f"Embedding{weight.shape}")
    out = emb(T(ids))
    out.backward(upstream.copy())
    grad = grad_of(param, "weight")
    if grad is not None:
        return grad
    node = getattr(out, "_grad_fn", None)
    in_graph = getattr(out, "requires_grad", False) is True and node is not None
    return NO_GRADIENT + (IN_GRAPH + (A_COPY if _holds_a_copy(node, param) else "") if in_graph else "")


def _holds_a_copy(node: Any, param: Any) -> bool:
    """The graph node's inputs hold a Tensor of the weight's shape, but not the weight itself (forward
    handed the node a copy, such as Tensor(self.weight.data, requires_grad=True))."""
    inputs = getattr(node, "inputs", None) or getattr(node, "saved_tensors", None) or ()
    try:
        held = list(inputs)
    except TypeError:
        return False
    def shape(t: Any) -> Any:
        data: Any = getattr(t, "data", None)
        return np.shape(data)

    return all(t is not param for t in held) and any(shape(t) == shape(param) for t in held)


# k/16 * (1 + 2^-12) = k * 4097 / 2^16: 13 to 20 significant bits, exact in float32 (24) and in
# sums of two, never in float16 (11), so a gradient kept in float16 shows.
FINE = 1.0 + 2.0**-12


def _grad_accumulate_inputs(rng: np.random.Generator) -> Inputs:
    vocab, dim = int(rng.integers(4, 12)), int(rng.integers(2, 6))
    return {"vocab": vocab, "dim": dim, "weight": dyadic(rng, (vocab, dim)),
            "upstream": (dyadic(rng, (3, dim)) + 0.0625) * FINE}


def _grad_accumulate_describe(i: Inputs) -> str:
    return (f"Embedding(4, 2) backward of ids (1, 1) with gradient rows (1, 2), (3, 4); then "
            f"Embedding({i['vocab']}, {i['dim']}) backward of tokens [0, 2, 0] with gradient rows {fmt(i['upstream'])}")


def _grad_accumulate_run(ns: Namespace, i: Inputs) -> Outputs:
    return {
        "seed_grad": _backward(ns, _seed_weights(), np.array([1.0, 1.0]), np.array([[1.0, 2.0], [3.0, 4.0]])),
        "grad": _backward(ns, i["weight"], np.array([0.0, 2.0, 0.0]), i["upstream"]),
    }


def _grad_sparse_inputs(rng: np.random.Generator) -> Inputs:
    vocab, dim = int(rng.integers(20, 60)), int(rng.integers(2, 6))
    used = rng.choice(vocab, size=int(rng.integers(2, 6)), replace=False)
    return {"vocab": vocab, "dim": dim, "weight": dyadic(rng, (vocab, dim)), "ids": used.astype(np.float64),
            "upstream": dyadic(rng, (len(used), dim)) + 0.0625}


def _grad_sparse_describe(i: Inputs) -> str:
    return ("Embedding(4, 2): backward of tokens (2, 2), then separately of tokens (1, 3), each with "
            f"gradient rows (1, 2), (3, 4); then Embedding({i['vocab']}, {i['dim']}) backward of tokens "
            f"{fmt(i['ids'].astype(int))}")


def _grad_sparse_run(ns: Namespace, i: Inputs) -> Outputs:
    g = np.array([[1.0, 2.0], [3.0, 4.0]])
    first = _backward(ns, _seed_weights(), np.array([2.0, 2.0]), g)
    second = _backward(ns, _seed_weights(), np.array([1.0, 3.0]), g)
    grad = _backward(ns, i["weight"], i["ids"], i["upstream"])
    return {
        "nonzero_rows_first": _nonzero_rows(first),
        "nonzero_rows_second": _nonzero_rows(second),
        "seed_grad_second": second,
        "grad": grad,
        "aux_shared_table": _shares_table(ns),
    }


def _shares_table(ns: Namespace) -> bool | None:
    """Do two fresh Embedding(4, 2) hold one and the same table (context for the judge)?"""
    try:
        first, second = (parameters_of(ns["Embedding"](4, 2), "Embedding") for _ in range(2))
        data = [[getattr(p, "data", None) for p in params] for params in (first, second)]
        return any(p is q or (a is not None and a is b) or (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
                                                            and np.shares_memory(a, b))
                   for p, a in zip(first, data[0], strict=True) for q, b in zip(second, data[1], strict=True))
    except Exception:
        return None


def _nonzero_rows(grad: np.ndarray | str) -> int | str:
    if isinstance(grad, str) or grad.ndim != 2:
        return grad if isinstance(grad, str) else f"gradient of shape {grad.shape}"
    return int(np.count_nonzero(np.any(grad != 0, axis=1)))


def _grad_batch_inputs(rng: np.random.Generator) -> Inputs:
    vocab, dim, batch, seq = int(rng.integers(4, 9)), int(rng.integers(2, 5)), 3, int(rng.integers(3, 6))
    return {"vocab": vocab, "dim": dim, "weight": dyadic(rng, (vocab, dim)), "ids": token_ids(rng, vocab, (batch, seq)),
            "upstream": dyadic(rng, (batch, seq, dim)) + 0.0625}


def _grad_batch_describe(i: Inputs) -> str:
    return (f"Embedding({i['vocab']}, {i['dim']}) backward of a batch of ids {fmt(i['ids'].astype(int))} "
            f"with a known upstream gradient of shape {tuple(i['upstream'].shape)}")


def _grad_batch_run(ns: Namespace, i: Inputs) -> Outputs:
    return {"grad": _backward(ns, i["weight"], i["ids"], i["upstream"])}


# ---- PositionalEncoding --------------------------------------------------------------------


def _pe_inputs(rng: np.random.Generator) -> Inputs:
    max_len, dim, batch = int(rng.integers(6, 16)), int(rng.integers(2, 7)), int(rng.integers(2, 5))
    seq = int(rng.integers(2, max_len))
    return {"max_len": max_len, "dim": dim, "table": dyadic(rng, (max_len, dim)),
            "x": dyadic(rng, (batch, seq, dim)), "upstream": dyadic(rng, (batch, seq, dim)) + 0.0625}


def _pe_describe(i: Inputs) -> str:
    return (f"PositionalEncoding({i['max_len']}, {i['dim']}) with known position table, "
            f"forward(x of shape {tuple(i['x'].shape)})")


def _pe_broadcast_run(ns: Namespace, i: Inputs) -> Outputs:
    T = tensor_class()
    pe = ns["PositionalEncoding"](i["max_len"], i["dim"])
    inject(pe, i["table"], "PositionalEncoding")
    return {"out": as_array(pe(T(i["x"])), "PositionalEncoding output")}


def _pe_grad_describe(i: Inputs) -> str:
    return (_pe_describe(i) + f" with x.requires_grad, then backward of a known gradient of shape "
            f"{tuple(i['upstream'].shape)}; the gradients of the table and of x")


def _pe_grad_run(ns: Namespace, i: Inputs) -> Outputs:
    T = tensor_class()
    pe = ns["PositionalEncoding"](i["max_len"], i["dim"])
    param = inject(pe, i["table"], "PositionalEncoding")
    x = T(i["x"], requires_grad=True)
    pe(x).backward(i["upstream"].copy())
    grad, x_grad = grad_of(param, "position_embeddings"), grad_of(x, "x")
    return {"grad": grad if grad is not None else NO_GRADIENT,
            "x_grad": x_grad if x_grad is not None else NO_GRADIENT,
            "aux_table_trainable": getattr(param, "requires_grad", None) is True}


def _pe_too_long_inputs(rng: np.random.Generator) -> Inputs:
    return {"max_len": int(rng.integers(4, 12)), "dim": int(rng.integers(2, 6))}


def _pe_too_long_describe(i: Inputs) -> str:
    m, d = i["max_len"], i["dim"]
    return (f"PositionalEncoding({m}, {d}) on x of shape (2, {m + 1}, {d}), of shape (2, {m}, {d}) and of shape "
            f"({m + 3}, 2, {d}) (more sequences than max_seq_len); then PositionalEncoding(2, {m + 4}) on x of "
            f"shape (2, 2, {m + 4}) (embed_dim above max_seq_len)")


def _pe_too_long_run(ns: Namespace, i: Inputs) -> Outputs:
    T = tensor_class()
    m, d = i["max_len"], i["dim"]
    pe, wide = ns["PositionalEncoding"](m, d), ns["PositionalEncoding"](2, m + 4)
    return {
        "too_long": raised(lambda: pe(T(np.zeros((2, m + 1, d))))),
        "at_max": raised(lambda: pe(T(np.zeros((2, m, d))))),
        # valid sequences whatever the other axes: a length check must read x.shape[1]
        "big_batch": raised(lambda: pe(T(np.zeros((m + 3, 2, d))))),
        "wide": raised(lambda: wide(T(np.zeros((2, 2, m + 4))))),
        "aux_below_max": raised(lambda: pe(T(np.zeros((2, m - 1, d))))),  # tells ">=" from a broken forward
    }


# ---- sinusoids -----------------------------------------------------------------------------


def _sin_inputs(rng: np.random.Generator) -> Inputs:
    return {"max_len": int(rng.integers(20, 80)), "dims": [int(rng.integers(2, 9)) * 2, int(rng.integers(1, 9)) * 2 + 1]}


def _sin_pos0_describe(i: Inputs) -> str:
    return f"create_sinusoidal_embeddings({i['max_len']}, D) row 0, for D in {i['dims']}"


def _sin_pos0_run(ns: Namespace, i: Inputs) -> Outputs:
    out: Outputs = {}
    for d in i["dims"]:
        table = as_array(ns["create_sinusoidal_embeddings"](i["max_len"], d), "create_sinusoidal_embeddings(...)")
        out[f"row0_d{d}"] = table[0] if table.ndim == 2 else table
    return out


def _sin_values_describe(i: Inputs) -> str:
    return f"create_sinusoidal_embeddings({i['max_len']}, D) for D in {i['dims']}"


def _sin_values_run(ns: Namespace, i: Inputs) -> Outputs:
    out: Outputs = {}
    for d in i["dims"]:
        table = ns["create_sinusoidal_embeddings"](i["max_len"], d)
        out[f"table_d{d}"] = as_array(table, "create_sinusoidal_embeddings(...)")
    return out


# ---- EmbeddingLayer ------------------------------------------------------------------------


def _layer_inputs(rng: np.random.Generator) -> Inputs:
    vocab, dim, batch, seq = int(rng.integers(20, 40)), int(rng.integers(2, 7)) * 2, 2, int(rng.integers(2, 6))
    max_len = int(rng.integers(8, 16))  # always differs from vocab, so injected tables are unambiguous
    inputs = {"vocab": vocab, "dim": dim, "max_len": max_len, "weight": dyadic(rng, (vocab, dim)),
              "table": dyadic(rng, (max_len, dim)), "tokens": token_ids(rng, vocab, (batch, seq))}
    inputs["upstream"] = dyadic(rng, (batch, seq, dim)) + 0.0625  # drawn last: the draws above stay as they were
    return inputs


def _layer_modes_describe(i: Inputs) -> str:
    return (f"EmbeddingLayer({i['vocab']}, {i['dim']}, max_seq_len={i['max_len']}, pos_encoding=M) for M in "
            f"'learned', 'sinusoidal', None, 'bogus'; tokens of shape {tuple(i['tokens'].shape)} and "
            f"{tuple(i['tokens'][0].shape)}")


def _layer_modes_run(ns: Namespace, i: Inputs) -> Outputs:
    T = tensor_class()
    Layer = ns["EmbeddingLayer"]
    out: Outputs = {}
    for mode in ("learned", "sinusoidal", None):
        layer = Layer(i["vocab"], i["dim"], max_seq_len=i["max_len"], pos_encoding=mode)
        out[f"{mode}_params"] = len(parameters_of(layer, "EmbeddingLayer"))
        out[f"{mode}_params_again"] = len(parameters_of(layer, "EmbeddingLayer"))  # parameters() has no side effect
        if mode == "learned":
            out["aux_learned_trainable"] = len(trainable_rows(layer) or ())
            out["aux_learned_held"] = held_rows(layer)
            out["aux_learned_holds_pe"] = holds_instance(layer, ns.get("PositionalEncoding"))
        # one mode that fails costs only its own outputs (and the judge reads what it raised)
        for name, tokens in (("2d", i["tokens"]), ("1d", i["tokens"][0])):
            out[f"{mode}_shape_{name}"] = _shape_or_error(partial(layer, T(tokens)), "EmbeddingLayer output"
                                                          + (" on 1-D tokens" if name == "1d" else ""))
        # one 1-D Tensor given twice: a layer that reshapes the caller's tokens in place sees 2-D ids the second time
        same = T(i["tokens"][0])
        attempt(partial(layer, same), "EmbeddingLayer output on 1-D tokens")
        out[f"{mode}_shape_1d_again"] = _shape_or_error(partial(layer, same),
                                                        "EmbeddingLayer output on the same 1-D tokens again")
    out["bogus_mode"] = raised(lambda: Layer(i["vocab"], i["dim"], max_seq_len=i["max_len"], pos_encoding="bogus"))
    out["aux_lookup"] = own_lookup(ns, i)
    out["aux_sin_shape"] = _shape_or_error(lambda: ns["create_sinusoidal_embeddings"](i["max_len"], i["dim"]),
                                           "create_sinusoidal_embeddings(...)")
    out["aux_sin_layer_held"] = _held_shapes(lambda: Layer(i["vocab"], i["dim"], max_seq_len=i["max_len"],
                                                           pos_encoding="sinusoidal"))
    out["aux_sin_type"] = type_name(lambda: ns["create_sinusoidal_embeddings"](i["max_len"], i["dim"]))
    return out


def _held_shapes(build: Callable[[], Any]) -> list[str] | None:
    """The shapes of the Tensors a freshly built object holds, as "RxC" (context for the judge)."""
    try:
        held = held_tensors(build()) or []
    except Exception:
        return None
    shapes = []
    for tensor in held[:8]:
        data: Any = getattr(tensor, "data", None)
        shapes.append("x".join(str(n) for n in np.shape(data)))
    return shapes


def _layer_sin_values_describe(i: Inputs) -> str:
    return (f"EmbeddingLayer({i['vocab']}, {i['dim']}, max_seq_len={i['max_len']}, pos_encoding='sinusoidal') "
            f"with known token weights, on tokens {fmt(i['tokens'].astype(int))}, then on its second row alone "
            "(1-D tokens)")


def _layer_sin_values_run(ns: Namespace, i: Inputs) -> Outputs:
    T = tensor_class()
    layer = ns["EmbeddingLayer"](i["vocab"], i["dim"], max_seq_len=i["max_len"], pos_encoding="sinusoidal")
    inject(layer, i["weight"], "EmbeddingLayer")
    return {
        "out": as_array(layer(T(i["tokens"])), "EmbeddingLayer output"),
        "out_1d": attempt(lambda: layer(T(i["tokens"][1])), "EmbeddingLayer output on 1-D tokens"),
        "aux_lookup": own_lookup(ns, i),
        "aux_sinusoids": attempt(lambda: ns["create_sinusoidal_embeddings"](i["max_len"], i["dim"]),
                                 "create_sinusoidal_embeddings(...)"),
    }


def _layer_scale_describe(i: Inputs) -> str:
    return (f"EmbeddingLayer({i['vocab']}, {i['dim']}, max_seq_len={i['max_len']}, scale_embeddings=True) "
            f"with known weights, pos_encoding None, 'learned' and 'sinusoidal', on tokens {fmt(i['tokens'].astype(int))}; "
            "then the learned layer's backward of a known gradient: the token table's gradient against sqrt(embed_dim) "
            "times what your Embedding gives for that gradient, and the position table's against your "
            "PositionalEncoding's")


def _relative_to_own(layer: np.ndarray | str, own: np.ndarray | str, shape: tuple[int, ...]) -> np.ndarray | str:
    """The layer's gradient less what the student's own part gives for the same upstream gradient,
    relative to that (zeros when the layer passes the gradient on right, whatever the part computes):
    only the layer's own share is judged here. When neither gives a gradient, the part's own check
    reports it: zeros."""
    if isinstance(layer, np.ndarray) and isinstance(own, np.ndarray) and layer.shape == own.shape:
        relative = (layer - own) / np.maximum(1.0, np.abs(own))
        return np.where(np.abs(relative) < 1e-6, 0.0, relative)  # float32 rounding is not a difference
    if isinstance(layer, str) and isinstance(own, str):
        return np.zeros(shape)
    return layer


def _layer_grads(ns: Namespace, i: Inputs) -> Outputs:
    """Backward through a learned, scaled layer; the two tables' gradients, beside what the student's own
    Embedding gives for the upstream gradient times sqrt(embed_dim) and their own PositionalEncoding for
    the upstream gradient (context for the judge)."""
    T = tensor_class()
    Layer, g = ns["EmbeddingLayer"], i["upstream"]
    scaled = g.astype(np.float32) * np.float32(math.sqrt(i["dim"]))  # as the layer's Tensor product hands it on
    layer = Layer(i["vocab"], i["dim"], max_seq_len=i["max_len"], pos_encoding="learned", scale_embeddings=True)
    tokens, positions = inject(layer, i["weight"], "EmbeddingLayer"), inject(layer, i["table"], "EmbeddingLayer")
    tok = grad_after(tokens, "token weight", lambda: layer(T(i["tokens"])).backward(g.copy()))
    emb = ns["Embedding"](i["vocab"], i["dim"])
    own_tok = grad_after(inject(emb, i["weight"], "Embedding"), "weight", lambda: emb(T(i["tokens"])).backward(scaled))
    pe = ns["PositionalEncoding"](i["max_len"], i["dim"])
    own_pos = grad_after(inject(pe, i["table"], "PositionalEncoding"), "position_embeddings",
                         lambda: pe(T(np.zeros(g.shape), requires_grad=True)).backward(g.copy()))
    failed = isinstance(tok, str) and tok.startswith("raised")
    pos = tok if failed else grad_after(positions, "position_embeddings", lambda: None)  # the same backward
    if failed and isinstance(own_tok, str) and own_tok.startswith("raised"):
        pos = own_pos = tok  # the Embedding's own backward fails as well: its checks report it
    return {
        "grad_tokens": _relative_to_own(tok, own_tok, i["weight"].shape),
        "grad_positions": _relative_to_own(pos, own_pos, i["table"].shape),
        "aux_grad_tokens": tok, "aux_own_tokens": own_tok, "aux_grad_positions": pos, "aux_own_positions": own_pos,
    }


def _layer_scale_run(ns: Namespace, i: Inputs) -> Outputs:
    T = tensor_class()
    Layer = ns["EmbeddingLayer"]
    plain = Layer(i["vocab"], i["dim"], max_seq_len=i["max_len"], pos_encoding=None, scale_embeddings=True)
    inject(plain, i["weight"], "EmbeddingLayer")
    learned = Layer(i["vocab"], i["dim"], max_seq_len=i["max_len"], pos_encoding="learned", scale_embeddings=True)
    inject(learned, i["weight"], "EmbeddingLayer")
    inject(learned, i["table"], "EmbeddingLayer")
    sinusoidal = Layer(i["vocab"], i["dim"], max_seq_len=i["max_len"], pos_encoding="sinusoidal", scale_embeddings=True)
    inject(sinusoidal, i["weight"], "EmbeddingLayer")
    return {
        "no_positions": as_array(plain(T(i["tokens"])), "EmbeddingLayer output (pos_encoding=None)"),
        # the same call again: a forward that scales the table in place changes its own next answer
        "no_positions_again": attempt(lambda: plain(T(i["tokens"])), "EmbeddingLayer output, called again"),
        "learned": attempt(lambda: learned(T(i["tokens"])), "EmbeddingLayer output (pos_encoding='learned')"),
        # the sinusoidal mode's output less the student's own sinusoid rows: only the scaling is
        # judged here (a wrong table is sin_values' business, not this check's)
        "sinusoidal_tokens": _less_own_sinusoid(ns, sinusoidal, i),
        "aux_sinusoids": attempt(lambda: ns["create_sinusoidal_embeddings"](i["max_len"], i["dim"]),
                                 "create_sinusoidal_embeddings(...)"),
        "aux_sin_type": type_name(lambda: ns["create_sinusoidal_embeddings"](i["max_len"], i["dim"])),
        "aux_lookup": own_lookup(ns, i),
        "aux_positions": own_positions(ns, i["table"], i["tokens"].shape[1]),
        **_guarded(partial(_layer_grads, ns, i), ("grad_tokens", "grad_positions")),
        "aux_fresh_table_ratio": _fresh_table_ratio(ns, i),
    }


def _fresh_table_ratio(ns: Namespace, i: Inputs) -> float | None:
    """The largest token-table value of a fresh layer with scale_embeddings=True over that of one without
    (about 1; about sqrt(embed_dim) when __init__ scales the table itself): context for the judge."""
    peaks = []
    try:
        for flag in (True, False):
            layer = ns["EmbeddingLayer"](i["vocab"], i["dim"], max_seq_len=i["max_len"], pos_encoding=None,
                                         scale_embeddings=flag)
            tables = [as_array(p, "parameter") for p in parameters_of(layer, "EmbeddingLayer")]
            peaks.append(max(float(np.abs(t).max()) for t in tables if t.shape == (i["vocab"], i["dim"])))
    except Exception:
        return None
    return peaks[0] / peaks[1] if peaks[1] > 0 else None


def _guarded(run: Callable[[], Outputs], names: tuple[str, ...]) -> Outputs:
    """``run``'s outputs, or each of ``names`` saying what it raised: one failing part costs only its own outputs."""
    try:
        return run()
    except Exception as e:
        caught(e, "value")
        return dict.fromkeys(names, "raised " + exception_name(e))


def _less_own_sinusoid(ns: Namespace, layer: Any, i: Inputs) -> np.ndarray | str:
    """A sinusoidal layer's output on the tokens, less the rows of the student's own sinusoid table."""
    out = attempt(lambda: layer(tensor_class()(i["tokens"])), "EmbeddingLayer output (pos_encoding='sinusoidal')")
    own = attempt(lambda: ns["create_sinusoidal_embeddings"](i["max_len"], i["dim"]), "create_sinusoidal_embeddings")
    seq = i["tokens"].shape[1]
    if isinstance(out, str) or isinstance(own, str) or own.ndim != 2 or own.shape[0] < seq:
        return out
    rows = own[:seq]
    return out - rows if out.shape[-2:] == rows.shape else out


PROBES = {
    p.name: p
    for p in [
        Probe("emb_shape", ("Embedding",), _emb_shape_inputs, _emb_shape_describe, _emb_shape_run),
        Probe("emb_lookup", ("Embedding",), _emb_lookup_inputs, _emb_lookup_describe, _emb_lookup_run),
        Probe("emb_params", ("Embedding",), _emb_params_inputs, _emb_params_describe, _emb_params_run),
        Probe("emb_index_error", ("Embedding",), _emb_index_error_inputs, _emb_index_error_describe,
              _emb_index_error_run),
        Probe("emb_xavier", ("Embedding",), _emb_xavier_inputs, _emb_xavier_describe, _emb_xavier_run),
        Probe("grad_accumulate", ("Embedding",), _grad_accumulate_inputs, _grad_accumulate_describe,
              _grad_accumulate_run),
        Probe("grad_sparse", ("Embedding",), _grad_sparse_inputs, _grad_sparse_describe, _grad_sparse_run),
        Probe("grad_batch", ("Embedding",), _grad_batch_inputs, _grad_batch_describe, _grad_batch_run),
        Probe("pe_broadcast", ("PositionalEncoding",), _pe_inputs, _pe_describe, _pe_broadcast_run),
        Probe("pe_too_long", ("PositionalEncoding",), _pe_too_long_inputs, _pe_too_long_describe, _pe_too_long_run),
        Probe("pe_grad", ("PositionalEncoding",), _pe_inputs, _pe_grad_describe, _pe_grad_run),
        Probe("sin_pos0", ("create_sinusoidal_embeddings",), _sin_inputs, _sin_pos0_describe, _sin_pos0_run),
        Probe("sin_values", ("create_sinusoidal_embeddings",), _sin_inputs, _sin_values_describe, _sin_values_run),
        Probe("layer_modes", ("EmbeddingLayer",), _layer_inputs, _layer_modes_describe, _layer_modes_run),
        Probe("layer_sin_values", ("EmbeddingLayer",), _layer_inputs, _layer_sin_values_describe,
              _layer_sin_values_run),
        Probe("layer_scale", ("EmbeddingLayer",), _layer_inputs, _layer_scale_describe, _layer_scale_run),
    ]
}
PROBES.update(API_PROBES)
