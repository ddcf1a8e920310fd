"""Module-11 probes of the API's edges: start_pos (newer generation), defaults, attributes, input
validation, very large ids, initial tables, and a backward that must leave the table alone.

Facts whose names start with ``aux_`` are context for the judge's diagnoses (and, for start_pos,
the evidence of the newer generation); they are never compared with the reference's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from grader.harness.probes import (
    FOREIGN,
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
    takes_parameter,
    tensor_class,
    token_ids,
)

Namespace = dict[str, Any]

START_POS_METHODS = (("PositionalEncoding", "forward"), ("PositionalEncoding", "__call__"),
                     ("EmbeddingLayer", "forward"), ("EmbeddingLayer", "__call__"))


def takes_start_pos(ns: Namespace) -> list[str]:
    """The methods that name a ``start_pos`` parameter: any one marks the newer generation's API."""
    return [f"{cls}.{method}" for cls, method in START_POS_METHODS
            if isinstance(ns.get(cls), type) and takes_parameter(ns[cls], method, "start_pos")]


def backward_style(ns: Namespace) -> str | None:
    """The generation the Embedding's graph node is written for, the second evidence of the course
    generation beside start_pos (context only): "newer" for a node class of the student's own that
    defines backward(grad_output) (the newer course's EmbeddingFunction(Function)), "older" for a
    module-05 node whose apply(grad_output) is an instance method (EmbeddingBackward, or one of the
    student's own), None when the output has no node, the node is the runtime's own operation, or
    the lookup fails."""
    try:
        out = ns["Embedding"](4, 2)(tensor_class()(np.array([0.0, 1.0])))
    except Exception:
        return None
    node = getattr(out, "_grad_fn", None)
    if node is None:
        return None
    for klass in type(node).__mro__:
        found = vars(klass).get("apply")
        if found is not None:
            if not isinstance(found, (classmethod, staticmethod)):
                return "older"
            break
    own = [k for k in type(node).__mro__ if not str(getattr(k, "__module__", "")).startswith(("tinytorch", "builtins"))]
    return "newer" if any("backward" in vars(k) for k in own) else None


def generation_evidence(ns: Namespace) -> Outputs:
    """The facts the judge reads the course generation from: which methods take start_pos, and the
    kind of the Embedding's backward node."""
    return {"aux_takes_start_pos": takes_start_pos(ns), "aux_backward_style": backward_style(ns)}


def seed_values(ns: Namespace) -> list[float] | None:
    """The values Embedding(4, 2), rows (10v, 10v + 1), gives for ids [3, 1], flattened (context for the
    judge: a lookup that reads the flattened table, np.take(W, ids) without axis=0, gives [11, 1])."""
    try:
        seed = ns["Embedding"](4, 2)
        inject(seed, np.array([[10.0 * v, 10.0 * v + 1] for v in range(4)]), "Embedding(4, 2)")
        return [float(v) for v in as_array(seed(tensor_class()([3.0, 1.0])), "embedding").reshape(-1)[:8]]
    except Exception:
        return None


def grad_after(param: Any, what: str, run: Callable[[], Any]) -> np.ndarray | str:
    """Run a forward + backward; the parameter's gradient, or why there is none."""
    try:
        run()
    except Exception as e:
        caught(e, "value")
        return "raised " + exception_name(e)
    grad = grad_of(param, what)
    return grad if grad is not None else "no gradient: .grad is still None after backward()"


def output_kind(call: Callable[[], Any]) -> str | None:
    """What ``call`` returns, for the judge: "graph" (a Tensor with a _grad_fn), "tensor" (a Tensor
    outside the graph), or the class name of anything else; None when it raised (context only)."""
    try:
        out = call()
    except Exception:
        return None
    if not isinstance(out, tensor_class()):
        return type(out).__name__[:60]
    return "graph" if getattr(out, "_grad_fn", None) is not None else "tensor"


def holds_instance(obj: Any, cls: Any) -> bool | None:
    """Whether ``obj`` keeps an instance of ``cls`` in an attribute, or in a list, tuple or dict held
    by one (None when that cannot be told): context only."""
    if not isinstance(cls, type):
        return None
    try:
        values = list(vars(obj).values())
    except TypeError:
        return None
    for value in values:
        inner = list(value.values()) if isinstance(value, dict) else list(value) if isinstance(
            value, (list, tuple)) else [value]
        if any(isinstance(v, cls) for v in inner):
            return True
    return False


def held_rows(obj: Any) -> list[int] | None:
    """The row counts of every Tensor held by ``obj`` or its attributes, trainable or not (context only)."""
    held = held_tensors(obj)
    if held is None:
        return None
    rows = []
    for tensor in held:
        data: Any = getattr(tensor, "data", None)
        rows.append(int(np.shape(data)[0]) if np.ndim(data) else -1)
    return sorted(rows)


def trainable_rows(obj: Any) -> list[int] | None:
    """The row counts of every trainable Tensor held by ``obj`` or by one of its attributes, in any
    order: lets the judge tell a table missing from parameters() from one never made (context only)."""
    held = held_tensors(obj)
    if held is None:
        return None
    rows = []
    for tensor in held:
        if getattr(tensor, "requires_grad", False) is True:
            data: Any = getattr(tensor, "data", None)
            rows.append(int(np.shape(data)[0]) if np.ndim(data) else -1)
    return sorted(rows)


def own_lookup(ns: Namespace, i: Inputs) -> np.ndarray | str:
    """The student's own Embedding, with the same weights, on the same tokens: lets the judge tell
    a layer bug from a lookup bug (context only, never compared)."""
    T = tensor_class()

    def lookup() -> Any:
        emb = ns["Embedding"](i["vocab"], i["dim"])
        inject(emb, i["weight"], "Embedding")
        return emb(T(i["tokens"]))

    return attempt(lookup, "Embedding output")


def own_positions(ns: Namespace, table: np.ndarray, seq: int, **start: int) -> np.ndarray | str:
    """What the student's own PositionalEncoding, with ``table``, adds to zeros of shape (1, seq, D)
    (given ``start_pos=`` if any): lets the judge tell a layer bug from a PositionalEncoding bug
    (context only, never compared)."""
    T = tensor_class()

    def positions() -> Any:
        pe = ns["PositionalEncoding"](*table.shape)
        inject(pe, table, "PositionalEncoding")
        return pe(T(np.zeros((1, seq, table.shape[1]))), **start)

    return attempt(positions, "PositionalEncoding output")


# ---- start_pos (newer generation) ----------------------------------------------------------


def _pe_start_inputs(rng: np.random.Generator) -> Inputs:
    max_len, dim, batch = int(rng.integers(9, 16)), int(rng.integers(2, 7)), int(rng.integers(2, 4))
    seq = int(rng.integers(2, max_len - 5))
    start = int(rng.integers(1, max_len - seq - 1))  # start + seq < max_len: strictly inside the table
    return {"max_len": max_len, "dim": dim, "start": start, "table": dyadic(rng, (max_len, dim)),
            "x": dyadic(rng, (batch, seq, dim)), "x_end": dyadic(rng, (1, 2, dim)),
            "upstream": dyadic(rng, (batch, seq, dim)) + 0.0625}


def _pe_start_describe(i: Inputs) -> str:
    m, d, s = i["max_len"], i["dim"], i["start"]
    return (f"PositionalEncoding({m}, {d}) with known position table: forward(x) and forward(x, start_pos={s}), "
            f"pe(x, start_pos={s}) and its backward, for x of shape {tuple(i['x'].shape)}; then x of shape "
            f"(1, 2, {d}) and (1, 3, {d}) at start_pos={m - 2} (ending at max_seq_len, and one past it); "
            "then pe(x, start_pos=-1), pe(x, start_pos=1.5) and, for x of shape (1, 2, D), pe(x, start_pos=-3)")


def _pe_start_run(ns: Namespace, i: Inputs) -> Outputs:
    evidence = generation_evidence(ns)
    found = evidence["aux_takes_start_pos"]
    if not found:
        return evidence
    T = tensor_class()
    m, d, s, x = i["max_len"], i["dim"], i["start"], i["x"]

    def fresh() -> Any:
        pe = ns["PositionalEncoding"](m, d)
        inject(pe, i["table"], "PositionalEncoding")
        return pe

    pe, graded = fresh(), ns["PositionalEncoding"](m, d)
    param = inject(graded, i["table"], "PositionalEncoding")
    return {
        **evidence,
        "forward_default": attempt(lambda: pe.forward(T(x)), "forward(x)"),
        "forward_shifted": attempt(lambda: pe.forward(T(x), start_pos=s), "forward(x, start_pos)"),
        "call_shifted": attempt(lambda: pe(T(x), start_pos=s), "pe(x, start_pos)"),
        "grad_shifted": grad_after(param, "position_embeddings", lambda: graded(
            T(x, requires_grad=True), start_pos=s).backward(i["upstream"].copy())),
        "at_end": attempt(lambda: pe(T(i["x_end"]), start_pos=m - 2), "pe(x, start_pos) at the end"),
        "past_end": raised(lambda: pe(T(np.zeros((1, 3, d))), start_pos=m - 2)),
        "negative": raised(lambda: pe(T(x), start_pos=-1)),
        # far enough below 0 that a slice from it is not empty: numpy would add rows from the end
        "negative_wraps": raised(lambda: pe(T(i["x_end"]), start_pos=-3)),
        "fractional": raised(lambda: pe(T(x), start_pos=1.5)),
    }


def _layer_start_inputs(rng: np.random.Generator) -> Inputs:
    vocab, dim, max_len = int(rng.integers(20, 40)), int(rng.integers(1, 4)) * 2, int(rng.integers(9, 16))
    seq = int(rng.integers(2, max_len - 5))
    return {"vocab": vocab, "dim": dim, "max_len": max_len, "start": int(rng.integers(1, max_len - seq - 1)),
            "weight": dyadic(rng, (vocab, dim)), "table": dyadic(rng, (max_len, dim)),
            "tokens": token_ids(rng, vocab, (2, seq)), "tokens_end": token_ids(rng, vocab, (1, 2))}


def _layer_start_describe(i: Inputs) -> str:
    m, s = i["max_len"], i["start"]
    return (f"EmbeddingLayer({i['vocab']}, {i['dim']}, max_seq_len={m}) with known weights, pos_encoding "
            f"'learned' and 'sinusoidal', on tokens {fmt(i['tokens'].astype(int))}: forward(tokens), "
            f"forward(tokens, start_pos={s}) and layer(tokens, start_pos={s}); then 2 and 3 tokens at "
            f"start_pos={m - 2} (ending at max_seq_len, and one past it)")


def _layer_start_run(ns: Namespace, i: Inputs) -> Outputs:
    evidence = generation_evidence(ns)
    found = evidence["aux_takes_start_pos"]
    if not found:
        return evidence
    T = tensor_class()
    Layer, m = ns["EmbeddingLayer"], i["max_len"]
    learned = Layer(i["vocab"], i["dim"], max_seq_len=m, pos_encoding="learned")
    inject(learned, i["weight"], "EmbeddingLayer")
    inject(learned, i["table"], "EmbeddingLayer")
    sinusoidal = Layer(i["vocab"], i["dim"], max_seq_len=m, pos_encoding="sinusoidal")
    inject(sinusoidal, i["weight"], "EmbeddingLayer")
    return {
        **evidence,
        "aux_lookup": own_lookup(ns, i),
        "aux_positions": own_positions(ns, i["table"], i["tokens"].shape[1], start_pos=i["start"]),
        "learned_default": attempt(lambda: learned.forward(T(i["tokens"])), "forward(tokens)"),
        **_windows(learned, "learned", i),
        **_windows(sinusoidal, "sin", i),
        "aux_sinusoids": attempt(lambda: ns["create_sinusoidal_embeddings"](m, i["dim"]),
                                 "create_sinusoidal_embeddings(...)"),
        "aux_sin_type": type_name(lambda: ns["create_sinusoidal_embeddings"](m, i["dim"])),
    }


def type_name(call: Callable[[], Any]) -> str | None:
    """The class name of what ``call`` returns (None when it raised): context for the judge."""
    try:
        return type(call()).__name__[:60]
    except Exception:
        return None


def _windows(layer: Any, name: str, i: Inputs) -> Outputs:
    """One layer's outputs at start_pos through forward and __call__, and at the table's end."""
    T = tensor_class()
    s, end, tokens = i["start"], i["max_len"] - 2, T(i["tokens"])
    return {
        f"{name}_forward": attempt(lambda: layer.forward(tokens, start_pos=s), "forward(tokens, start_pos)"),
        f"{name}_call": attempt(lambda: layer(tokens, start_pos=s), "layer(tokens, start_pos)"),
        f"{name}_at_end": attempt(lambda: layer(T(i["tokens_end"]), start_pos=end), "layer(tokens, start_pos)"),
        f"{name}_past_end": raised(lambda: layer(T(np.zeros((1, 3))), start_pos=end)),
    }


# ---- Embedding: ids, attributes, the table after backward ----------------------------------


WRAP_POINTS = (255, 256, 32767, 32768, 32769, 65535, 65536)


def _emb_large_ids_inputs(rng: np.random.Generator) -> Inputs:
    vocab = int(rng.integers(66_000, 70_000))
    extra = rng.choice(np.arange(33_000, vocab), size=3, replace=False)
    ids = np.array([0, *WRAP_POINTS, *extra, vocab - 1], dtype=np.float64)
    return {"vocab": vocab, "dim": 2, "ids": ids}


def large_table(vocab: int, dim: int) -> np.ndarray:
    """Row v is (v, v + 1/4, ...): every row differs, and all values are exact in float32."""
    return np.arange(vocab, dtype=np.float64)[:, None] + np.arange(dim) / 4.0


def _emb_large_ids_describe(i: Inputs) -> str:
    return (f"Embedding({i['vocab']}, {i['dim']}) with row v = (v, v + 0.25), forward and backward of ids "
            f"{fmt(i['ids'].astype(int))}")


def _emb_large_ids_run(ns: Namespace, i: Inputs) -> Outputs:
    T = tensor_class()
    vocab, dim, ids = i["vocab"], i["dim"], i["ids"]
    emb = ns["Embedding"](vocab, dim)
    param = inject(emb, large_table(vocab, dim), f"Embedding({vocab}, {dim})")
    rows = attempt(lambda: emb(T(ids)), "embedding(ids)")  # before backward, which might spoil the table
    upstream = (np.arange(ids.size, dtype=np.float64)[:, None] + 1.0) / 16.0 * np.ones(dim)
    grad = grad_after(param, "weight", lambda: emb(T(ids)).backward(upstream.copy()))
    used = ids.astype(int)
    return {
        "aux_seed_values": seed_values(ns),
        "aux_output": output_kind(lambda: emb(T(ids[:2]))),
        "aux_weight_trainable": getattr(param, "requires_grad", None) is True,
        "rows": rows,
        "grad_rows": grad[used] if isinstance(grad, np.ndarray) and grad.shape == (vocab, dim) else str(grad)[:200],
        "grad_nonzero_rows": (int(np.count_nonzero(np.any(grad != 0, axis=1)))
                              if isinstance(grad, np.ndarray) and grad.ndim == 2
                              else grad[:200] if isinstance(grad, str) else "no gradient table"),
    }


def _emb_bad_ids_inputs(rng: np.random.Generator) -> Inputs:
    return {"vocab": int(rng.integers(5, 50)), "dim": int(rng.integers(2, 6))}


def _emb_bad_ids_describe(i: Inputs) -> str:
    return f"Embedding({i['vocab']}, {i['dim']}) on ids [1.5], [0, 2.5], [nan], [1, nan] and [inf]"


def _emb_bad_ids_run(ns: Namespace, i: Inputs) -> Outputs:
    evidence = generation_evidence(ns)
    found = evidence["aux_takes_start_pos"]
    if not found:
        return evidence
    emb = ns["Embedding"](i["vocab"], i["dim"])
    cases = {"fraction": [1.5], "mixed_fraction": [0.0, 2.5], "nan": [np.nan], "mixed_nan": [1.0, np.nan],
             "inf": [np.inf]}
    out: Outputs = dict(evidence)
    for name, ids in cases.items():
        out[name] = _rejects(emb, ids)
    return out


def _rejects(emb: Any, ids: list[float]) -> str:
    T = tensor_class()
    return raised(lambda: emb(T(np.array(ids))))


def _emb_attrs_inputs(rng: np.random.Generator) -> Inputs:
    return {"vocab": int(rng.integers(10, 60)), "dim": int(rng.integers(3, 17))}


def _emb_attrs_describe(i: Inputs) -> str:
    return f"Embedding({i['vocab']}, {i['dim']}).vocab_size and .embed_dim"


def _attribute(obj: Any, name: str) -> int | str:
    if not hasattr(obj, name):
        return "missing"
    value = getattr(obj, name)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    return f"a {type(value).__name__}"


def _emb_attrs_run(ns: Namespace, i: Inputs) -> Outputs:
    emb = ns["Embedding"](i["vocab"], i["dim"])
    return {"vocab_size": _attribute(emb, "vocab_size"), "embed_dim": _attribute(emb, "embed_dim")}


_MISSING = object()


def _layer_attrs_inputs(rng: np.random.Generator) -> Inputs:
    return {"vocab": int(rng.integers(10, 60)), "dim": int(rng.integers(1, 9)) * 2}


def _layer_attrs_describe(i: Inputs) -> str:
    return (f"EmbeddingLayer({i['vocab']}, {i['dim']}, pos_encoding=None).vocab_size, .embed_dim and "
            ".pos_encoding")


def _layer_attrs_run(ns: Namespace, i: Inputs) -> Outputs:
    layer = ns["EmbeddingLayer"](i["vocab"], i["dim"], pos_encoding=None)
    positions = getattr(layer, "pos_encoding", _MISSING)
    return {
        "vocab_size": _attribute(layer, "vocab_size"),
        "embed_dim": _attribute(layer, "embed_dim"),
        "pos_encoding": ("missing" if positions is _MISSING else "None" if positions is None
                         else f"a {type(positions).__name__}"),
    }


def _grad_keeps_weight_inputs(rng: np.random.Generator) -> Inputs:
    vocab, dim = int(rng.integers(5, 12)), int(rng.integers(2, 6))
    return {"vocab": vocab, "dim": dim, "weight": dyadic(rng, (vocab, dim)), "ids": np.array([0.0, 2.0, 0.0, 1.0]),
            "upstream": dyadic(rng, (4, dim)) + 0.0625}


def _grad_keeps_weight_describe(i: Inputs) -> str:
    return (f"Embedding({i['vocab']}, {i['dim']}) with known weights: forward of tokens [0, 2, 0, 1], backward "
            "of a known gradient, then the weight table itself")


def _grad_keeps_weight_run(ns: Namespace, i: Inputs) -> Outputs:
    T = tensor_class()
    emb = ns["Embedding"](i["vocab"], i["dim"])
    param = inject(emb, i["weight"], "Embedding")
    grad = grad_after(param, "weight", lambda: emb(T(i["ids"])).backward(i["upstream"].copy()))
    return {"weight_after": as_array(param, "Embedding.weight after backward"), "aux_grad": grad}


# ---- PositionalEncoding: initial table, input validation -----------------------------------


def _pe_init_inputs(rng: np.random.Generator) -> Inputs:
    return {"max_len": int(rng.integers(250, 450)), "dim": int(rng.integers(16, 49))}  # >= 4,000 values


def _pe_init_describe(i: Inputs) -> str:
    return f"PositionalEncoding({i['max_len']}, {i['dim']}) fresh position table"


def _pe_init_run(ns: Namespace, i: Inputs) -> Outputs:
    pe = ns["PositionalEncoding"](i["max_len"], i["dim"])
    params = parameters_of(pe, "PositionalEncoding")
    table = getattr(pe, "position_embeddings", params[0] if params else None)
    return {"weight": as_array(table, "PositionalEncoding.position_embeddings")}


def _pe_bad_shape_inputs(rng: np.random.Generator) -> Inputs:
    max_len, dim = int(rng.integers(6, 12)), int(rng.integers(2, 7))
    return {"max_len": max_len, "dim": dim, "seq": int(rng.integers(2, max_len))}


def _pe_bad_shape_describe(i: Inputs) -> str:
    m, d, t = i["max_len"], i["dim"], i["seq"]
    return f"PositionalEncoding({m}, {d}) on x of shape (2, {t}, {d + 1}), (2, {t}, 1) and ({t}, {d})"


def _pe_bad_shape_run(ns: Namespace, i: Inputs) -> Outputs:
    T = tensor_class()
    d, t = i["dim"], i["seq"]
    pe = ns["PositionalEncoding"](i["max_len"], d)
    return {
        "dim_plus_one": raised(lambda: pe(T(np.zeros((2, t, d + 1))))),
        "dim_one": raised(lambda: pe(T(np.zeros((2, t, 1))))),
        "two_d": raised(lambda: pe(T(np.zeros((t, d))))),
    }


# ---- sinusoids: a constant table -----------------------------------------------------------


def _sin_fixed_inputs(rng: np.random.Generator) -> Inputs:
    return {"max_len": int(rng.integers(4, 20)), "dim": int(rng.integers(1, 9)) * 2}


def _sin_fixed_describe(i: Inputs) -> str:
    return f"create_sinusoidal_embeddings({i['max_len']}, {i['dim']}): what it returns, and its requires_grad"


def _sin_fixed_run(ns: Namespace, i: Inputs) -> Outputs:
    table = ns["create_sinusoidal_embeddings"](i["max_len"], i["dim"])
    flag = getattr(table, "requires_grad", False)  # a plain array cannot collect gradients either
    # the signature says -> Tensor, and the course's test reads pe.data[0], which a numpy array's
    # .data (a memoryview) cannot do
    return {"requires_grad": flag if isinstance(flag, bool) else f"a {type(flag).__name__}",
            "returns": "Tensor" if isinstance(table, tensor_class()) else type(table).__name__[:60]}


# ---- EmbeddingLayer: the sinusoidal length check, defaults --------------------------------


def _layer_too_long_inputs(rng: np.random.Generator) -> Inputs:
    return {"vocab": int(rng.integers(20, 40)), "dim": int(rng.integers(1, 4)) * 2, "max_len": int(rng.integers(4, 12))}


def _layer_too_long_describe(i: Inputs) -> str:
    v, d, m = i["vocab"], i["dim"], i["max_len"]
    return (f"EmbeddingLayer({v}, {d}, max_seq_len={m}, pos_encoding='sinusoidal') on {m + 1} tokens (one too "
            f"many) and on {m}")


def _layer_too_long_run(ns: Namespace, i: Inputs) -> Outputs:
    T = tensor_class()
    m, found = i["max_len"], takes_start_pos(ns)
    layer = ns["EmbeddingLayer"](i["vocab"], i["dim"], max_seq_len=m, pos_encoding="sinusoidal")
    too_long = raised(lambda: layer(T(np.zeros((2, m + 1)))))
    if not found:  # the older course's own solution lets numpy's failed addition raise the ValueError
        too_long = too_long.replace(FOREIGN, "")
    return {"too_long": too_long, "at_max": raised(lambda: layer(T(np.zeros((2, m))))),
            "aux_takes_start_pos": found, "aux_one_token": raised(lambda: layer(T(np.zeros((2, 1)))))}


DEFAULT_MAX_SEQ_LEN = 512


def _layer_defaults_inputs(rng: np.random.Generator) -> Inputs:
    vocab, dim = int(rng.integers(20, 40)), int(rng.integers(1, 4)) * 2
    return {"vocab": vocab, "dim": dim, "weight": dyadic(rng, (vocab, dim)),
            "table": dyadic(rng, (DEFAULT_MAX_SEQ_LEN, dim)), "tokens": token_ids(rng, vocab, (2, 3))}


def _layer_defaults_describe(i: Inputs) -> str:
    v, d = i["vocab"], i["dim"]
    return (f"EmbeddingLayer({v}, {d}): its parameters' shapes and its output with known weights on tokens "
            f"{fmt(i['tokens'].astype(int))}; EmbeddingLayer({v}, {d}, pos_encoding='sinusoidal') on 512 "
            "and on 513 tokens")


def _layer_defaults_run(ns: Namespace, i: Inputs) -> Outputs:
    T = tensor_class()
    Layer = ns["EmbeddingLayer"]
    layer = Layer(i["vocab"], i["dim"])
    data: list[Any] = [getattr(p, "data", None) for p in parameters_of(layer, "EmbeddingLayer")]
    shapes = [np.shape(d) for d in data]

    def output() -> Any:
        inject(layer, i["weight"], "EmbeddingLayer")
        inject(layer, i["table"], "EmbeddingLayer")
        return layer(T(i["tokens"]))

    sinusoidal = Layer(i["vocab"], i["dim"], pos_encoding="sinusoidal")
    return {
        "aux_param_types": sorted({type(p).__name__[:60] for p in parameters_of(layer, "EmbeddingLayer")}),
        "param_rows": sorted(int(s[0]) if s else -1 for s in shapes),  # in any order
        "aux_trainable_rows": trainable_rows(layer),
        "out": attempt(output, "EmbeddingLayer output"),
        "aux_lookup": own_lookup(ns, i),
        "aux_positions": own_positions(ns, i["table"], i["tokens"].shape[1]),
        "sin_512": raised(lambda: sinusoidal(T(np.zeros((1, DEFAULT_MAX_SEQ_LEN))))),
        # any ValueError will do here: whose check raised it is layer_sin_too_long's business
        "sin_513": raised(lambda: sinusoidal(T(np.zeros((1, DEFAULT_MAX_SEQ_LEN + 1))))).replace(FOREIGN, ""),
    }


PROBES = {
    p.name: p
    for p in [
        Probe("pe_start_pos", ("PositionalEncoding",), _pe_start_inputs, _pe_start_describe, _pe_start_run),
        Probe("layer_start_pos", ("EmbeddingLayer",), _layer_start_inputs, _layer_start_describe, _layer_start_run),
        Probe("emb_large_ids", ("Embedding",), _emb_large_ids_inputs, _emb_large_ids_describe, _emb_large_ids_run),
        Probe("emb_bad_ids", ("Embedding",), _emb_bad_ids_inputs, _emb_bad_ids_describe, _emb_bad_ids_run),
        Probe("emb_attrs", ("Embedding",), _emb_attrs_inputs, _emb_attrs_describe, _emb_attrs_run),
        Probe("layer_attrs", ("EmbeddingLayer",), _layer_attrs_inputs, _layer_attrs_describe, _layer_attrs_run),
        Probe("sin_fixed", ("create_sinusoidal_embeddings",), _sin_fixed_inputs, _sin_fixed_describe,
              _sin_fixed_run),
        Probe("grad_keeps_weight", ("Embedding",), _grad_keeps_weight_inputs, _grad_keeps_weight_describe,
              _grad_keeps_weight_run),
        Probe("pe_init", ("PositionalEncoding",), _pe_init_inputs, _pe_init_describe, _pe_init_run),
        Probe("pe_bad_shape", ("PositionalEncoding",), _pe_bad_shape_inputs, _pe_bad_shape_describe,
              _pe_bad_shape_run),
        Probe("layer_sin_too_long", ("EmbeddingLayer",), _layer_too_long_inputs, _layer_too_long_describe,
              _layer_too_long_run),
        Probe("layer_defaults", ("EmbeddingLayer",), _layer_defaults_inputs, _layer_defaults_describe,
              _layer_defaults_run),
    ]
}
