"""Likely causes of module-11 failures, worked out on the host from the inputs and outputs.

Each diagnosis tests a concrete hypothesis (e.g. "row 0 got 1x the gradient") against the
student's numbers, and speaks only when it holds. They never decide pass or fail.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from grader.unit import NOT_A_TENSOR, Cause, CheckOutput, Diagnosis, Mismatch, close, judge_draw, likely_cause

from ..probes import A_COPY, IN_GRAPH
from . import api as embeddings_api
from . import crashes, layout, returned, scale, sinusoid

Inputs = dict[str, Any]
NO_GRAD_CAUSE = ("the gradient never reached the weights: forward must connect its output to the weight "
                 "(set out._grad_fn = EmbeddingBackward(self.weight, indices), or use EmbeddingFunction.apply)")


def _arr(out: CheckOutput, name: str) -> np.ndarray | None:
    return out.arrays.get(name)


def _same(a: np.ndarray | None, b: np.ndarray) -> bool:
    return a is not None and a.shape == b.shape and bool(close(a, b, 1e-6, 1e-6).all())


NODE_GAVE_NONE_CAUSE = ("the output is in the graph (it has a _grad_fn), but its backward gave the weight no "
                        "gradient: backward returns one gradient per input, in the inputs' order, and the weight "
                        "is the only input (the ids are a keyword attribute, not an input), so return "
                        "(grad_weight,)")


COPY_CAUSE = ("forward handed a copy of the weight to the graph (a new Tensor such as Tensor(self.weight.data, "
              "requires_grad=True)): the gradient went to that copy, so self.weight never gets one; pass self.weight "
              "itself (EmbeddingFunction.apply(self.weight, indices=...))")


def _no_gradient(got: CheckOutput) -> str | None:
    """Why no gradient reached the weight, when none did."""
    found = [v for v in got.facts.values() if isinstance(v, str) and v.startswith("no gradient")]
    if not found:
        return None
    if all(v.endswith(A_COPY) for v in found):
        return COPY_CAUSE
    return NODE_GAVE_NONE_CAUSE if all(v.endswith(IN_GRAPH) for v in found) else NO_GRAD_CAUSE


def emb_shape(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    if embeddings_api.reads_flat_table(got):
        return embeddings_api.TAKE_FLAT
    b, t = i["ids_2d"].shape
    if got.facts.get("call_2d") == [b * t, i["dim"]] or got.facts.get("forward_2d") == [b * t, i["dim"]]:
        return FLATTENED
    if got.facts.get("call_2d") != got.facts.get("forward_2d"):
        return "__call__ and forward give different results: __call__ should simply return self.forward(x)"
    empty = got.facts.get("call_empty")
    if isinstance(empty, str) and empty.startswith("raised"):
        return (f"an empty id array {empty}: no tokens is valid input and gives shape (0, embed_dim); validate "
                "with np.any(ids < 0) (False when there are no ids), or guard ids.min()/ids.max() with ids.size, "
                "which raise on an empty array")
    return None


FLATTENED = "the batch dimension was flattened away: reshape the result to ids.shape + (embed_dim,)"


def emb_lookup(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    if embeddings_api.reads_flat_table(got):
        return embeddings_api.TAKE_FLAT
    shape = _REJECTED_SHAPE.match(got.rejected.get("rows", ""))
    if shape and i["ids"].ndim > 1 and int(shape[1]) == i["ids"].size and int(shape[2]) == i["weight"].shape[1]:
        return FLATTENED
    rows = _arr(got, "rows")
    if rows is None or rows.shape != exp.arrays["rows"].shape:
        return None
    weight, ids = i["weight"], i["ids"].astype(int).reshape(-1)
    batch = i["ids"].astype(int)
    if batch.ndim == 2 and _same(rows, np.broadcast_to(weight[batch[0]], rows.shape)):
        return "every sequence of the batch came back as sequence 0: look up all the ids, not ids[0]"
    flat = rows.reshape(-1, weight.shape[1])
    for n, token in enumerate(ids):
        if np.array_equal(flat[n], weight[token]):
            continue
        matches = [r for r in range(len(weight)) if np.array_equal(flat[n], weight[r])]
        if matches:
            return f"for id {token} the output is weight row {matches[0]}: index the table with the ids themselves"
        ratio = flat[n] / np.where(weight[token] == 0, np.nan, weight[token])
        if np.nanstd(ratio) < 1e-6 and np.isfinite(np.nanmean(ratio)):
            return f"rows come out scaled by {np.nanmean(ratio):.4g}: a lookup returns weight rows unchanged"
        return f"for id {token} the output is not any row of the weight table"
    return None


def emb_params(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    if got.facts.get("count") != 1:
        return f"parameters() returned {got.facts.get('count')} tensors: it should be [self.weight]"
    if got.facts.get("is_weight") is not True:
        return "parameters() must return the weight tensor itself (self.weight), not a copy or its .data"
    if got.facts.get("requires_grad") is not True:
        return "the weight was created without requires_grad=True, so it cannot be trained"
    numel, dim = got.facts.get("numel"), i["dim"]
    if isinstance(numel, int) and numel % dim == 0 and (off := embeddings_api.table_rows(numel // dim, i["vocab"])):
        return off
    return None


def emb_index_error(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    zero = got.facts.get("aux_id_zero")
    if zero not in ("none", None) and got.facts.get("id_last_valid") not in ("none", None):
        return Cause(f"even id 0 raised {zero}: the lookup rejects valid ids, not only the bad ones", "emb_lookup")
    causes = []
    at_v, neg, last = got.facts.get("id_equal_vocab"), got.facts.get("id_minus_one"), got.facts.get("id_last_valid")
    v = i["vocab"]
    clamped = [f"id {token} read row {row}" for token, accepted, row, edge in (
        (v, at_v, got.facts.get("aux_row_of_vocab"), v - 1), (-1, neg, got.facts.get("aux_row_of_minus_one"), 0))
        if accepted == "none" and row == edge]
    wrapped = at_v == "none" and got.facts.get("aux_row_of_vocab") == 0
    unchecked = wrapped or (not clamped and at_v == "none" and neg == "none")
    if clamped:
        causes.append(f"out-of-range ids are clamped into range ({' and '.join(clamped)}, as np.clip(ids, 0, "
                      "vocab_size - 1) does): a bad id is an error, raise ValueError instead of clipping it")
    elif wrapped:
        causes.append(f"out-of-range ids wrap around (id {v} read row 0, as np.take(..., mode='wrap') or ids % "
                      "vocab_size does) and nothing checks them: raise ValueError when any id < 0 or >= vocab_size")
    elif unchecked:
        causes.append("neither id == vocab_size nor id -1 was refused: there is no range check; raise ValueError "
                      "when any id < 0 or >= vocab_size")
    elif at_v == "none":
        causes.append("id == vocab_size was accepted: the check must be ids >= vocab_size, not > vocab_size")
    if neg == "none" and not clamped and not unchecked:
        wraps = got.facts.get("aux_row_of_minus_one") == v - 1
        causes.append("id -1 was accepted" + (" (numpy silently wraps negative indices to the last row)" if wraps
                                              else "") + ": reject ids < 0")
    if "IndexError" in (at_v, neg):
        causes.append(_index_error_cause(got, at_v, neg))
    if last not in ("none", None):
        causes.append(f"the last valid id ({i['vocab'] - 1}) raised {last}: valid ids are 0..vocab_size-1")
    mixed = [f"[{ids}]" for name, ids in (("mixed_negative", "-1, 2"), ("mixed_too_big", f"1, {i['vocab']}"))
             if got.facts.get(name) not in ("ValueError", None)]
    if not causes and mixed:
        causes.append(f"a lone bad id is rejected, but {' and '.join(mixed)} got through: the check must fire when "
                      "ANY id is out of range (np.any), not only when all of them are")
    if not causes and got.facts.get("batch_too_big") not in ("ValueError", None):
        causes.append("a bad id in the second row of a 2-D batch got through: check every id of the batch")
    return "; ".join(causes) or None


# The IndexErrors numpy and Python raise themselves (indexing, np.take, lists): any other message is
# the student's own raise.
NUMPY_INDEX_ERROR = re.compile(r"index -?\d+ is out of bounds for (axis -?\d+ with )?size \d+")
LIBRARY_INDEX_ERROR = re.compile(r"^(index -?\d+ is out of bounds for .*|(list|tuple|string) index out of range|"
                                 r"too many indices for .*|arrays used as indices must be .*|only integers, slices .*)$")


def _index_errors(got: CheckOutput) -> list[str]:
    """The messages of the IndexErrors the probe's calls raised (kept as "kind|type|cell|line|function|message")."""
    listed = got.facts.get("aux_raised")
    parts = [str(entry).split("|", 5) for entry in (listed if isinstance(listed, list) else [])]
    return [p[5] for p in parts if len(p) == 6 and p[1] == "IndexError"]


def _index_error_cause(got: CheckOutput, at_v: Any, neg: Any) -> str:
    """Whose IndexError it was: the student's own raise (the wrong class), or numpy's indexing past
    the table because the upper check lets id == vocab_size through."""
    messages = _index_errors(got)
    if messages and not any(LIBRARY_INDEX_ERROR.match(m.strip()) for m in messages):
        return ("your own check raises IndexError: the assignment asks for ValueError, raise ValueError(...) for an "
                "id outside 0..vocab_size-1")
    numpy_raised = bool(messages) and all(NUMPY_INDEX_ERROR.match(m.strip()) for m in messages)
    if neg == "ValueError" and at_v == "IndexError" and numpy_raised:
        return ("id -1 is refused with your ValueError, but id == vocab_size got past your check to numpy's "
                "indexing, which raised IndexError: the upper bound must refuse ids >= vocab_size (the last valid "
                "id is vocab_size - 1), not only ids > vocab_size")
    if numpy_raised:
        return "numpy's IndexError escaped: validate the ids yourself and raise ValueError"
    return "an IndexError reached the caller where the assignment asks for ValueError: raise ValueError for bad ids"


def _gradient_shape(got: CheckOutput, i: Inputs) -> str | None:
    """A weight gradient refused for its shape: rows for the ids seen instead of the whole table."""
    for name, reason in got.rejected.items():
        m = _REJECTED_SHAPE.match(reason)
        if m and "grad" in name and int(m[2]) == i["dim"] and int(m[1]) != i["vocab"]:
            return (f"the weight's gradient has {m[1]} rows, not the table's {i['vocab']}: every row of the table gets "
                    "a gradient row (0 where no id points), so create it as np.zeros_like(weight.data)")
    return None


STARTED_FROM_WEIGHTS = ("the gradient holds the weight values themselves: every row of the weight's gradient is the "
                        "right gradient plus that row's weights, so backward starts from a copy of weight.data; "
                        "start from np.zeros_like(weight.data)")


def _started_from_weights(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    grad, right = _arr(got, "grad"), exp.arrays.get("grad")
    if grad is None or right is None or right.shape != i["weight"].shape or _same(grad, right):
        return None
    return STARTED_FROM_WEIGHTS if _same(grad, right + i["weight"]) else None


def grad_accumulate(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    if no_gradient := _no_gradient(got):
        return no_gradient
    if wrong_size := _gradient_shape(got, i):
        return wrong_size
    if started := _started_from_weights(got, exp, i):
        return started
    scaled = scale.gradient_scale(got, exp, {"seed_grad": 2, "grad": 3})  # before row 0 alone, which a scale fools
    if scaled:
        return scaled
    grad, g = _arr(got, "grad"), i["upstream"]
    if grad is not None and np.abs(g).max() > 1:
        clipped = np.zeros_like(grad)
        np.add.at(clipped, np.array([0, 2, 0]), np.clip(g, -1, 1))
        if _same(grad, clipped):
            return "the upstream gradient was clipped to [-1, 1]: the weight's gradient adds the upstream rows unchanged"
    if grad is not None and _same(grad[0], (g[0] + g[2]) / 2):
        return ("row 0 received the mean of its two gradient rows: repeated tokens must add up their gradients "
                "(sum, not average)")
    if grad is not None and (np.array_equal(grad[0], g[2]) or np.array_equal(grad[0], g[0])):
        return ("row 0 received 1x the gradient instead of 2x: repeated tokens must accumulate "
                "(np.add.at), not overwrite (grad[ids] = ... keeps only one occurrence)")
    seed = _arr(got, "seed_grad")
    if (seed is not None and np.array_equal(seed[1], [3.0, 4.0])) or (seed is not None and np.array_equal(seed[1], [1.0, 2.0])):
        return ("for ids (1, 1) row 1 got one gradient row instead of their sum (4, 6): repeated tokens must "
                "accumulate (np.add.at), not overwrite")
    if grad is not None and _half_precision(grad, exp.arrays.get("grad")):
        return ("the gradient is right to float16 precision only (every value is a float16 number): build it in "
                "float32, e.g. np.zeros_like(weight.data), and do not cast the upstream gradient to float16")
    return None


def _half_precision(got: np.ndarray, expected: np.ndarray | None) -> bool:
    """``got`` is ``expected`` rounded through float16: within float16's precision, and made of float16 values."""
    if expected is None or got.shape != expected.shape or _same(got, expected):
        return False
    with np.errstate(over="ignore"):
        representable = np.array_equal(got.astype(np.float16).astype(np.float64), got)
    return representable and bool(np.all(np.abs(got - expected) <= 2.0**-8 * np.abs(expected) + 1e-6))


def grad_sparse(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    if no_gradient := _no_gradient(got):
        return no_gradient
    grad = _arr(got, "grad")
    if grad is not None:
        unused = np.setdiff1d(np.arange(i["vocab"]), i["ids"].astype(int))
        touched = [int(r) for r in unused if np.any(grad[r] != 0)]
        if touched:
            return (f"row {touched[0]} was never looked up but got a non-zero gradient: start from "
                    "np.zeros_like(weight) and add only into the rows that were used")
    shared = _shared_gradient(got, exp)
    if shared:
        return shared
    return scale.gradient_scale(got, exp, {"seed_grad_second": 2, "grad": i["ids"].size})


def _shared_gradient(got: CheckOutput, exp: CheckOutput) -> str | None:
    """The second seed Embedding's gradient is its own plus the first one's (tokens (2, 2), rows (1, 2) and
    (3, 4), so row 2 got (4, 6)): what both Embeddings wrote went into one place."""
    second, right = _arr(got, "seed_grad_second"), exp.arrays.get("seed_grad_second")
    first = np.zeros((4, 2))
    first[2] = [4.0, 6.0]
    if second is None or right is None or not _same(second, right + first):
        return None
    if got.facts.get("aux_shared_table") is True:
        return ("two Embedding(4, 2) share one weight Tensor, so the second one's gradient already held the first "
                "one's (row 2): each Embedding must create its own table in __init__ (no class-level or "
                "module-level table, no table shared through a default argument)")
    return ("the second Embedding(4, 2)'s gradient already held the first one's (row 2): the gradient is kept "
            "somewhere both share (a module-level or class-level buffer?); each backward starts from a new "
            "np.zeros_like(weight.data)")


def grad_batch(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    if no_gradient := _no_gradient(got):
        return no_gradient
    grad = _arr(got, "grad")
    if grad is None:
        return None
    if started := _started_from_weights(got, exp, i):
        return started
    ids, g = i["ids"].astype(int), i["upstream"]
    shared = np.zeros_like(i["weight"])
    np.add.at(shared, ids[0], g.sum(axis=0))
    if _same(grad, shared):
        return ("the upstream gradient was summed over the batch and sent to the first sequence's ids: every "
                "(batch, position) pair adds its own row to its own token's row (flatten both, then np.add.at)")
    first = np.zeros_like(i["weight"])
    np.add.at(first, ids[0], g[0])
    if np.array_equal(grad, first):
        return "only the first batch element contributed: accumulate over every (batch, position) pair"
    summed = np.zeros_like(i["weight"])
    np.add.at(summed, ids.reshape(-1), g.reshape(-1, g.shape[-1]))
    counts = np.bincount(ids.reshape(-1), minlength=len(summed))
    if _same(grad, summed / np.maximum(counts, 1)[:, None]):
        return "each row got the mean of its tokens' gradients: repeated tokens must add up their gradients"
    overwrite = np.zeros_like(i["weight"])
    overwrite[ids.reshape(-1)] = g.reshape(-1, g.shape[-1])
    if np.array_equal(grad, overwrite):
        return "repeated ids overwrite each other: accumulate with np.add.at over the flattened batch"
    transposed = np.zeros_like(i["weight"])
    np.add.at(transposed, ids.T.reshape(-1), g.reshape(-1, g.shape[-1]))
    if _same(grad, transposed):
        return ("the ids are flattened in another order than the upstream gradient (ids.T, or order='F', against "
                "grad_output in row order), so each gradient row goes to another position's token: flatten both the "
                "same way, ids.reshape(-1) and grad_output.reshape(-1, embed_dim)")
    per_row = np.zeros_like(i["weight"])
    for row_ids, row_grad in zip(ids, g, strict=True):
        per_row[row_ids] += row_grad  # numpy's fancy +=: a repeated id within one row adds only once
    if _same(grad, per_row):
        return ("grad[ids] += upstream keeps only one row per repeated id (numpy's fancy-index += does not add "
                "twice): accumulate with np.add.at(grad, ids, upstream)")
    return scale.gradient_scale(got, exp, {"grad": ids.size})


def pe_broadcast(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    out, x, table = _arr(got, "out"), i["x"], i["table"]
    seq = x.shape[1]
    for reason in got.rejected.values():
        if reason.startswith(f"shape ({seq}, {x.shape[2]}) differs"):
            return ("forward returns the (seq_len, embed_dim) position rows alone, not x + positions: return the sum "
                    "(batch, seq_len, embed_dim)")
    if out is None:
        return None
    seq = x.shape[1]
    if _same(out, x):
        return "the output equals the input: the position table was not added"
    if seq + 1 <= len(table) and _same(out, x + table[1 : seq + 1]):
        return "positions are off by one: add position_embeddings[:seq_len], starting at row 0"
    if _same(out[0], x[0] + table[:seq]):
        return "only the first batch element got its positions: rely on broadcasting over the batch axis"
    rows = table[:seq]
    if seq < len(table) and _same(out, x + table[-seq:]):
        return "the position rows are taken from the end of the table (P[-seq_len:]): add rows 0 .. seq_len-1, P[:seq_len]"
    if _same(out, x * rows):
        return "x is multiplied by the position rows: positions are added, x + P[:seq_len]"
    if _same(out, x + 2 * rows):
        return "the position rows were added twice: add them once, x + P[:seq_len]"
    if (factor := scale.factor(out - x, np.broadcast_to(rows, x.shape))) is not None and abs(factor - 1) > 1e-6:
        named = " (= sqrt(embed_dim))" if math.isclose(factor, math.sqrt(x.shape[2]), rel_tol=1e-5) else ""
        return (f"the position rows are multiplied by {factor:.4g}{named} before they are added: add them unscaled, "
                "x + P[:seq_len] (scaling belongs to EmbeddingLayer's token embeddings)")
    if seq > 1 and _same(out, x + table[:seq][::-1]):
        return ("the position rows are added in reverse order (the last position's row to the first token): add "
                "rows 0 .. seq_len-1 in order")
    return None


def pe_too_long(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    if got.facts.get("too_long") == "none":
        return ("a sequence longer than max_seq_len was accepted (slicing P[:seq_len] silently returns fewer "
                "rows): raise ValueError when x.shape[1] > max_seq_len")
    at_max, below = got.facts.get("at_max"), got.facts.get("aux_below_max")
    if at_max not in ("none", None) and below not in ("none", None):
        return Cause(f"valid sequences shorter than max_seq_len fail too ({below}): what fails is the forward "
                     "itself, not the length check", "pe_broadcast")
    if at_max in ("none", None):
        for name, axis, what in (("big_batch", 0, "more sequences (the batch axis)"),
                                 ("wide", 2, "a wider embed_dim (the last axis)")):
            if got.facts.get(name) not in ("none", None):
                return (f"a valid x with {what} than max_seq_len was refused ({got.facts.get(name)}): the length "
                        f"check must read the sequence axis, x.shape[1], not x.shape[{axis}]")
    if at_max == "ValueError":
        return "a sequence of exactly max_seq_len was rejected: compare with >, not >="
    if isinstance(at_max, str) and at_max.startswith("ValueError"):
        return ("a valid sequence of exactly max_seq_len failed inside numpy, not in your own check: the "
                "position rows added do not match x's shape (they must be rows 0 .. seq_len-1)")
    if at_max not in ("none", None):
        return f"a valid sequence of exactly max_seq_len raised {at_max}"
    if str(got.facts.get("too_long")).endswith("not from your own check"):
        return ("no length check: the ValueError came from numpy failing to broadcast; check "
                "x.shape[1] > max_seq_len yourself and raise ValueError with a clear message")
    if got.facts.get("too_long") != "ValueError":
        return f"raised {got.facts.get('too_long')} instead of ValueError for a too-long sequence"
    return None


def pe_grad(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    if str(got.facts.get("grad", "")).startswith("no gradient") and got.facts.get("aux_table_trainable") is False:
        return ("the position table was created without requires_grad=True, so no gradient is kept for it: "
                "create position_embeddings as Tensor(..., requires_grad=True)")
    x_grad = _arr(got, "x_grad")
    if (str(got.facts.get("grad", "")).startswith("no gradient") and x_grad is not None
            and _same(x_grad, i["upstream"])):
        return ("the gradient never reached position_embeddings: build the output with a slice of the table Tensor "
                "itself, x + self.position_embeddings[:seq_len]. x gets its gradient, but the rows added are a new "
                "Tensor built from position_embeddings.data (such as Tensor(P.data[:seq_len], requires_grad=True), as "
                "the older ABOUT.md sketches it), and wrapping the table's data in a new Tensor cuts the gradient: the "
                "table must get it, since it is learned")
    if str(got.facts.get("grad", "")).startswith("no gradient"):
        return ("the gradient never reached position_embeddings: build the output with Tensor operations "
                "(x + self.position_embeddings[:seq_len]), not Tensor(x.data + ...)")
    grad, g = _arr(got, "grad"), i["upstream"]
    if grad is None:
        return None
    if _same(grad, exp.arrays.get("grad", np.empty(0))):
        return _pe_x_grad_cause(got, g)
    return _pe_table_grad_cause(grad, g)


def _pe_x_grad_cause(got: CheckOutput, g: np.ndarray) -> str | None:
    """x + P hands x the upstream gradient unchanged."""
    fix = ("x + P hands x the upstream gradient unchanged, so that the token embeddings before it learn: add to x "
           "itself, not to x.data, and have a backward of your own return x's gradient next to the table's")
    if str(got.facts.get("x_grad", "")).startswith("no gradient"):
        return f"the table's gradient is right, but none reached x: {fix}"
    x_grad = _arr(got, "x_grad")
    if x_grad is not None and not _same(x_grad, g):
        return f"the table's gradient is right, but x received a different one: {fix}"
    return None


def _pe_table_grad_cause(grad: np.ndarray, g: np.ndarray) -> str | Cause | None:
    seq = g.shape[1]
    shifted = np.zeros_like(grad)
    shifted[1:seq + 1] = g.sum(axis=0)[: len(grad) - 1]
    if _same(grad, shifted):
        return Cause("the gradient went to rows 1 .. seq_len: the positions are off by one", "pe_broadcast")
    if np.any(grad[seq:] != 0):
        return f"rows at or beyond seq_len ({seq}) received gradient: only the rows that were added may"
    if _same(grad[:seq], g.mean(axis=0)):
        return "the gradient was averaged over the batch: it must be summed"
    if _same(grad[:seq], g[0]) or _same(grad[:seq], g[-1]):
        return "only one batch element's gradient arrived: sum it over the batch axis"
    return None


_sinusoid = sinusoid.table
HALVES = sinusoid.HALVES
_REJECTED_SHAPE = re.compile(r"^shape \((\d+), (\d+)\) differs")


def sin_pos0(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    for reason in got.rejected.values():
        m = re.match(r"^shape \((\d+),\) differs from the expected \((\d+),\)", reason)
        if m and int(m[1]) * 2 in (int(m[2]), int(m[2]) + 1):
            return ("row 0 has half the columns: the sines and the cosines are stacked one above the other instead "
                    "of interleaved in the columns of each row, PE[:, 0::2] = sin and PE[:, 1::2] = cos")
    for row in got.arrays.values():
        if row.ndim == 1 and row.size >= 2 and np.allclose(row[:2], [1.0, 0.0]):
            return "row 0 starts [1, 0, ...]: sin and cos are swapped (even columns sin, odd columns cos)"
        if row.ndim == 1 and row.size >= 3 and np.allclose(row, _sinusoid(1, row.size, halves=True)[0]):
            return f"row 0 is [0, ..., 0, 1, ..., 1]: {HALVES}"
        if row.ndim == 1 and (cause := sinusoid.fit(row[None, :], i["max_len"], row.size, slice(0, 1))):
            return cause
    return None


def sin_values(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    for name, got_table in got.arrays.items():
        if cause := sinusoid.fit(got_table, i["max_len"], int(name.rsplit("_d", 1)[1])):
            return cause
    for name, got_table in got.arrays.items():
        if _half_precision(got_table, _sinusoid(i["max_len"], int(name.rsplit("_d", 1)[1]))):
            return ("the values are right to float16 precision only (every value is a float16 number): compute and "
                    "store the table in float32 (or float64)")
    for name, reason in got.rejected.items():
        shape = _REJECTED_SHAPE.match(reason)
        if shape and int(shape[1]) != i["max_len"] and int(shape[2]) == int(name.rsplit("_d", 1)[1]):
            return (f"the table has {shape[1]} rows whatever max_seq_len is: create_sinusoidal_embeddings(max_seq_len, "
                    f"embed_dim) returns exactly max_seq_len rows (here {i['max_len']})")
        if shape and int(shape[1]) == 2 * i["max_len"] and int(shape[2]) * 2 in (dim := int(name.rsplit("_d", 1)[1]),
                                                                                   dim + 1):
            return ("the sines and the cosines are stacked one above the other (2 * max_seq_len rows): they share "
                    "each row, interleaved in the columns, PE[:, 0::2] = sin and PE[:, 1::2] = cos")
        if "shape" in reason and name.endswith(tuple(f"_d{d}" for d in i["dims"] if d % 2)):
            return "odd embed_dim is not handled: the table must have exactly D columns (drop the last cos)"
    return None


def _a(name: str) -> str:
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def layer_modes(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    if wrong_shape := embeddings_api.lookup_shape(got, i):
        return wrong_shape
    sin_type = got.facts.get("aux_sin_type")
    if sin_type not in (None, "Tensor") and any(
            str(got.facts.get(f"sinusoidal_shape_{n}", "")).startswith("raised") for n in ("1d", "2d")):
        return Cause(f"create_sinusoidal_embeddings returns {_a(str(sin_type))}, not a Tensor, and the sinusoidal mode fails "
                     "on it: return Tensor(table)", hint=False)
    own, held = got.facts.get("aux_sin_shape"), got.facts.get("aux_sin_layer_held")
    m, d = i["max_len"], i["dim"]
    if own == [m, d] and isinstance(held, list) and f"{d}x{m}" in held and f"{m}x{d}" not in held:
        return (f"the sinusoidal layer holds a table of shape (embed_dim, max_seq_len) = ({d}, {m}), while your "
                f"create_sinusoidal_embeddings({m}, {d}) gives ({m}, {d}): the layer calls it with the arguments swapped; "
                "call create_sinusoidal_embeddings(max_seq_len, embed_dim)")
    if got.facts.get("bogus_mode") == "none":
        return "an unknown pos_encoding was accepted: raise ValueError for anything but 'learned', 'sinusoidal', None"
    for mode in ("learned", "sinusoidal", "None"):
        first, again = got.facts.get(f"{mode}_params"), got.facts.get(f"{mode}_params_again")
        if isinstance(first, int) and isinstance(again, int) and again != first:
            return (f"parameters() gives {first} tensors, then {again} when called again: it appends to a list the "
                    "layer keeps; build and return a new list each time")
    learned, held = got.facts.get("learned_params"), got.facts.get("aux_learned_trainable")
    if isinstance(learned, int) and isinstance(held, int) and learned < 2 <= held:
        return embeddings_api.MISSING_TABLE
    tables = got.facts.get("aux_learned_held")
    if learned == 1 and isinstance(tables, list) and tables == [i["vocab"]] and got.facts.get(
            "aux_learned_holds_pe") is False:
        return ("pos_encoding='learned' built no position table: the layer holds only the token weights, so the "
                "'learned' branch never ran (compare pos_encoding == 'learned' exactly) and it must create "
                "PositionalEncoding(max_seq_len, embed_dim)")
    if got.facts.get("None_params") not in (1, None):
        return "pos_encoding=None must not create (or count) a positional table: parameters() is [token weights]"
    if got.facts.get("sinusoidal_params") not in (1, None):
        return "the sinusoidal table is fixed, not a parameter: parameters() is [token weights]"
    for mode in ("learned", "sinusoidal", "None"):
        one, two = got.facts.get(f"{mode}_shape_1d"), got.facts.get(f"{mode}_shape_2d")
        want = exp.facts.get(f"{mode}_shape_1d")
        if isinstance(one, list) and isinstance(want, list) and one == want[::-1] and one != want:
            return (f"for 1-D tokens the output is (embed_dim, seq) = ({one[0]}, {one[1]}), not (seq, embed_dim): "
                    "the axes are swapped (a transpose, or a reshape in the wrong order)")
        if isinstance(one, list) and two == exp.facts.get(f"{mode}_shape_2d") and one != exp.facts.get(
                f"{mode}_shape_1d"):
            return "1-D tokens (seq,) must give a 2-D output (seq, embed_dim): add a batch axis, then remove it"
    for mode in ("learned", "sinusoidal", "None"):
        again, want = got.facts.get(f"{mode}_shape_1d_again"), exp.facts.get(f"{mode}_shape_1d")
        if got.facts.get(f"{mode}_shape_1d") == want and isinstance(want, list) and again == [1, *want]:
            return (f"the layer changes the caller's tokens in place: the first call on 1-D tokens gives ({want[0]}, "
                    f"{want[1]}), but the same Tensor then holds 2-D ids (tokens.data = tokens.data[np.newaxis, :]?), "
                    f"so a second call gives (1, {want[0]}, {want[1]}); add the batch axis to a new Tensor, "
                    "tokens.reshape(1, -1), and leave the caller's tokens alone")
    return None


def layer_sin_values(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    if wrong_shape := embeddings_api.lookup_shape(got, i):
        return wrong_shape
    out = _arr(got, "out")
    if out is None:
        return None
    tokens = i["tokens"].astype(int)
    seq, tok = tokens.shape[1], i["weight"][tokens]
    if _same(out, tok):
        return "the output equals the token embeddings alone: the sinusoid table was not added"
    right = _sinusoid(i["max_len"], i["dim"])[:seq]
    if _same(out, tok * math.sqrt(i["dim"]) + right):
        return ("the token embeddings are scaled by sqrt(embed_dim) although scale_embeddings was left at its "
                "default: scale_embeddings defaults to False, and only scale_embeddings=True scales")
    kept = got.rejected.get("out_1d", "")
    if kept.startswith(f"shape (1, {seq}, {i['dim']}) differs from the expected ({seq}, {i['dim']})") and _same(
            out, tok + right):
        return ("1-D tokens came back with the batch axis that was added for them, (1, seq_len, embed_dim): remove "
                "it again, so that (seq_len,) tokens give (seq_len, embed_dim)")
    sin, own_sin, own = exp.arrays.get("aux_sinusoids"), _arr(got, "aux_sinusoids"), _arr(got, "aux_lookup")
    rows = own if own is not None and own.shape == tok.shape else tok
    if (own_sin is not None and sin is not None and own_sin.shape == sin.shape and not _same(own_sin, sin)
            and _same(out, rows + own_sin[:seq])):
        return Cause("the layer adds your create_sinusoidal_embeddings table correctly, but that table is wrong",
                     "sin_values")
    if sin is not None and not _same(rows, tok) and _same(out, rows + sin[:seq]):
        return Cause("the layer is right for the rows your Embedding returns, but the lookup itself is wrong",
                     "emb_lookup")
    right = _sinusoid(i["max_len"], i["dim"])[:seq]
    if math.isclose(math.sqrt(i["dim"]), 2.0) and _same(out, tok + 2 * right):
        return ("the sinusoid rows are doubled: added twice, or multiplied by sqrt(embed_dim) (= 2 here); add them "
                "once and unscaled")
    if _same(out, tok + 2 * right):
        return "the sinusoid rows were added twice: add them once"
    if _same(out, tok + math.sqrt(i["dim"]) * right):
        return ("the sinusoid rows are multiplied by sqrt(embed_dim): only the token embeddings are scaled, and only "
                "with scale_embeddings=True")
    own_table_right = own_sin is not None and sin is not None and own_sin.shape == sin.shape and _same(own_sin, sin)
    for mistake in sinusoid.MISTAKES:
        variant = _sinusoid(i["max_len"], i["dim"], **mistake.kwargs)[:seq]
        if not _same(variant, right) and _same(out, tok + variant):
            if own_table_right:  # the layer builds or slices a table of its own
                return (f"your create_sinusoidal_embeddings is right, but the table the layer adds is not: "
                        f"{mistake.cause}. Add rows 0 .. seq_len - 1 of create_sinusoidal_embeddings' table")
            return Cause(f"the added sinusoid table is wrong: {mistake.cause}", "sin_values")
    return _layer_1d_cause(got, exp, i) if sin is not None and _same(out, tok + sin[:seq]) else None


def _layer_1d_cause(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    """2-D tokens come out right; what went wrong with the same tokens given as one 1-D sequence."""
    one, expected = _arr(got, "out_1d"), exp.arrays.get("out_1d")
    if one is None or expected is None or one.shape != expected.shape or _same(one, expected):
        return None
    row = i["tokens"].astype(int)[1]
    fix = "add the batch axis in front (tokens.reshape(1, -1)), run the 2-D code, then drop that axis"
    if _same(one, i["weight"][row] + exp.arrays["aux_sinusoids"][0]):
        return (f"1-D tokens became seq_len sequences of one token each (reshape(-1, 1)), so every token got "
                f"position 0: {fix}")
    return f"2-D tokens are right, but the same tokens as one 1-D sequence are not: {fix}"


def layer_scale(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    if wrong_shape := embeddings_api.lookup_shape(got, i):
        return wrong_shape
    plain, learned, own = _arr(got, "no_positions"), _arr(got, "learned"), _arr(got, "aux_lookup")
    tok = i["weight"][i["tokens"].astype(int)]
    dim, seq = i["dim"], tok.shape[1]
    pos = i["table"][:seq]
    if own is not None and own.shape == tok.shape and not _same(own, tok):
        root = math.sqrt(dim)
        if _same(plain, own * root) and _same(learned, own * root + pos):
            return Cause("the scaling is right for the rows your Embedding returns, but the lookup itself is wrong",
                         "emb_lookup")
        return None  # the lookup is wrong: any guess about the scale would be untested
    root = math.sqrt(dim)
    again = _arr(got, "no_positions_again")
    if _same(plain, tok * root) and again is not None and _same(again, tok * dim):
        return ("the second call returns the tokens scaled twice: forward multiplies the weight table itself in place "
                "(self.weight.data *= ...); scale a new array, h * math.sqrt(embed_dim)")
    failed_sin = got.facts.get("sinusoidal_tokens")
    if isinstance(failed_sin, str) and failed_sin.startswith("raised") and got.facts.get("aux_sin_type") not in (
            None, "Tensor"):
        return Cause(f"create_sinusoidal_embeddings returns {_a(str(got.facts['aux_sin_type']))}, not a Tensor, and "
                     "the sinusoidal mode fails on it: return Tensor(table)", hint=False)
    own_sin = _arr(got, "aux_sinusoids")
    if _same(plain, tok * root) and _same(learned, tok * root + pos) and own_sin is not None:
        tokens_part, added = _arr(got, "sinusoidal_tokens"), own_sin[:seq]
        if _same(tokens_part, tok * root):
            return _layer_grad_cause(got, exp, i)
        if _same(tokens_part, tok * root + added * (root - 1)):
            return ("in the sinusoidal mode the scale was applied after adding the sinusoid: scale only the token "
                    "embeddings, then add the positions")
        if _same(tokens_part, tok):
            return "scale_embeddings=True has no effect in the sinusoidal mode: scale the tokens there as well"
        if _same(tokens_part, tok * root - added):
            return Cause("the tokens are scaled, but the sinusoidal mode adds no positions", "layer_sin_values_visible")
        if tokens_part is not None and tokens_part.shape == tok.shape:
            return Cause("the tokens are scaled right, but the sinusoidal mode adds the wrong position rows",
                         "layer_sin_values_visible")
    if _same(plain, tok * dim):
        return f"the token embeddings were multiplied by D ({dim}) instead of sqrt(D) ({root:.4g})"
    if _same(plain, tok) and _same(learned, tok + root * pos):
        return "the position rows are scaled by sqrt(D) instead of the token embeddings: scale the tokens, then add positions"
    if _same(plain, tok) and _same(learned, tok * root + pos):
        return ("the tokens are scaled only when positions are added: with pos_encoding=None, scale_embeddings=True "
                "must scale them as well")
    if _same(plain, tok) and _same(learned, tok + pos) and _same(_arr(got, "sinusoidal_tokens"), tok * root):
        return ("scale_embeddings=True scales the token embeddings only in the sinusoidal mode: with pos_encoding=None "
                "and 'learned' they are not scaled; scale them once, right after the lookup, before the modes branch")
    ratio = got.facts.get("aux_fresh_table_ratio")
    if _same(plain, tok) and isinstance(ratio, float) and math.isclose(ratio, root, rel_tol=0.15):
        return (f"scale_embeddings=True scales the token table once, in __init__ (its fresh values are {ratio:.3g} times "
                "those of an unscaled layer), not the token embeddings in forward: a table trained, loaded or set "
                "afterwards is used unscaled; multiply in forward, h = h * math.sqrt(embed_dim)")
    if _same(plain, tok):
        return "scale_embeddings=True had no effect: multiply the token embeddings by math.sqrt(embed_dim)"
    if _same(learned, (tok + pos) * root):
        return "the scale was applied after adding positions: scale only the token embeddings, then add positions"
    if _same(plain, tok * root):
        if _same(learned, tok * root + 2 * pos):
            return TWICE
        if _same(learned, tok * root + pos):
            return _layer_grad_cause(got, exp, i)
        return embeddings_api.upstream_positions(got, pos, lambda added: tok * root + added, "learned")
    factor = scale.factor(plain, tok)
    if factor is not None and math.isclose(factor * factor, i["vocab"], rel_tol=1e-6):
        return (f"the token embeddings were multiplied by sqrt(vocab_size) = sqrt({i['vocab']}) = {factor:.4g}: the "
                f"scale is sqrt(embed_dim) = sqrt({dim}) = {root:.4g}")
    if factor is not None and math.isclose(factor * root, 1.0, rel_tol=1e-5):
        return (f"the token embeddings were divided by sqrt(embed_dim) = {root:.4g} instead of multiplied by it: "
                "h * math.sqrt(embed_dim)")
    if factor is not None and math.isclose(factor, dim / 2, rel_tol=1e-6):
        return (f"the token embeddings were multiplied by D/2 = {dim / 2:g}: embed_dim ** 1/2 is (embed_dim ** 1) / 2, "
                "since ** binds tighter than /; write math.sqrt(embed_dim) or embed_dim ** 0.5")
    if factor is not None:
        return (f"the token embeddings were multiplied by {factor:.4g} (= sqrt({factor * factor:.4g})) instead of "
                f"sqrt(embed_dim) = sqrt({dim}) = {root:.4g}")
    return None


DETACHED = ("the layer's output is cut off from the autograd graph: its values are right, but no gradient reaches the "
            "token table or the position table (a new Tensor built from .data, such as Tensor(h.data), starts a new "
            "graph); return the Tensor the operations built")


def _grad_fact(got: CheckOutput, name: str) -> np.ndarray | str | None:
    value, fact = got.arrays.get(name), got.facts.get(name)
    return value if value is not None else fact if isinstance(fact, str) else None


def _layer_grad_cause(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    """The layer's output is right; why a table's gradient through it is not (read from the layer's and
    the student's own parts' gradients for the same upstream gradient)."""
    tok, own_tok = _grad_fact(got, "aux_grad_tokens"), _grad_fact(got, "aux_own_tokens")
    pos, own_pos = _grad_fact(got, "aux_grad_positions"), _grad_fact(got, "aux_own_positions")
    wrong = {name for name in ("grad_tokens", "grad_positions")
             if not _same(_arr(got, name), exp.arrays.get(name, np.empty(0)))}

    def none(value: Any) -> bool:
        return isinstance(value, str) and value.startswith("no gradient")

    root = math.sqrt(i["dim"])
    if wrong and none(tok) and none(pos) and (isinstance(own_tok, np.ndarray) or isinstance(own_pos, np.ndarray)):
        return DETACHED
    if "grad_tokens" in wrong and isinstance(own_tok, np.ndarray):
        if none(tok):
            return ("the output is scaled, but no gradient reaches the token table: the scaled token embeddings are a new "
                    "Tensor built from .data (Tensor(h.data * math.sqrt(embed_dim))?); multiply the Tensor itself, "
                    "h = h * math.sqrt(embed_dim)")
        # own_tok is the student's Embedding's gradient for the upstream gradient times sqrt(embed_dim)
        found = scale.factor(tok if isinstance(tok, np.ndarray) else None, own_tok)
        factor = None if found is None else found * root
        if factor is not None and math.isclose(factor, 1.0, rel_tol=1e-5):
            return ("the output is scaled, but the token table's gradient is not scaled: the scale was applied to h.data "
                    "(in place, or into a new Tensor), outside the autograd graph, so backward never multiplies by "
                    "sqrt(embed_dim); multiply the Tensor itself, h = h * math.sqrt(embed_dim)")
        if factor is not None:
            return (f"the token table's gradient is {factor:.4g} times what your Embedding gives for the upstream "
                    f"gradient, not sqrt(embed_dim) = {root:.4g} times: the scale must be one Tensor multiplication, "
                    "h * math.sqrt(embed_dim), in the graph")
    if "grad_positions" in wrong and isinstance(own_pos, np.ndarray):
        if none(pos):
            return ("the output is right and your PositionalEncoding passes a gradient to its table, but none reaches "
                    "the position table through the layer: the layer adds positions outside the graph (from .data, "
                    "or to a new Tensor); add them through self.pos_encoding.forward(h)")
        factor = scale.factor(pos if isinstance(pos, np.ndarray) else None, own_pos)
        if factor is not None and not math.isclose(factor, 1.0, rel_tol=1e-5):
            return (f"the position table's gradient through the layer is {factor:.4g} times what your "
                    "PositionalEncoding gives for the same gradient: only the token embeddings are scaled, the "
                    "positions are added unscaled and once")
    return None


TWICE = ("the learned position rows were added twice (the PositionalEncoding adds them already): add them once, "
         "through the PositionalEncoding")


def emb_xavier(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    weight = _arr(got, "weight")
    shape = _REJECTED_SHAPE.match(got.rejected.get("weight", ""))
    if weight is None and shape and int(shape[2]) == i["dim"]:
        return embeddings_api.table_rows(int(shape[1]), i["vocab"])
    if weight is None:
        return None
    v, d = i["vocab"], i["dim"]
    others = {"sqrt(6/(V*D))": math.sqrt(6.0 / (v * d)), "sqrt(2/D)": math.sqrt(2.0 / d),
              "sqrt(6/V)": math.sqrt(6.0 / v), "sqrt(6/D)": math.sqrt(6.0 / d),
              "sqrt(2/(V+D))": math.sqrt(2.0 / (v + d)), "sqrt(1/D)": math.sqrt(1.0 / d),
              "sqrt(6)/(V+D)": math.sqrt(6.0) / (v + d), "6/(V+D)": 6.0 / (v + d)}
    return likely_cause(weight, _xavier_limit(i), others)


def pe_init(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    table = _arr(got, "weight")
    if table is None:
        return None
    m, d = i["max_len"], i["dim"]
    others = {"sqrt(6/(max_seq_len+D))": math.sqrt(6.0 / (m + d)), "sqrt(1/D)": math.sqrt(1.0 / d),
              "sqrt(6/D)": math.sqrt(6.0 / d), "sqrt(2/max_seq_len)": math.sqrt(2.0 / m),
              "sqrt(2)/D": math.sqrt(2.0) / d}
    return likely_cause(table, _pe_limit(i), others)


def _xavier_limit(i: Inputs) -> float:
    return math.sqrt(6.0 / (i["vocab"] + i["dim"]))


def _pe_limit(i: Inputs) -> float:
    return math.sqrt(2.0 / i["dim"])


def _uniform_comparator(limit: Callable[[Inputs], float], formula: Callable[[Inputs], str]) -> Callable[
        [CheckOutput, CheckOutput, Inputs], list[Mismatch]]:
    def compare_draw(got: CheckOutput, exp: CheckOutput, i: Inputs) -> list[Mismatch]:
        """Init is judged against the distribution itself: the reference's random draw is only a shape."""
        weight = got.arrays.get("weight")
        if weight is None:
            return [Mismatch("weight", f"weight: {got.rejected.get('weight', 'no output')}")]
        problem = judge_draw(weight, limit(i), formula(i)).problem
        return [Mismatch("weight", f"weight: {problem}")] if problem else []

    return compare_draw


xavier_bounds = _uniform_comparator(_xavier_limit, lambda i: f"sqrt(6/({i['vocab']}+{i['dim']}))")
pe_init_bounds = _uniform_comparator(_pe_limit, lambda i: f"sqrt(2/{i['dim']})")

DIAGNOSES: dict[str, Diagnosis] = {
    name: layout.first(f)
    for name, f in ({
        f.__name__: f
        for f in (emb_shape, emb_lookup, emb_params, emb_index_error, emb_xavier, grad_accumulate, grad_sparse,
                  grad_batch, pe_broadcast, pe_too_long, pe_grad, pe_init, sin_pos0, sin_values, layer_modes,
                  layer_sin_values, layer_scale)
    } | embeddings_api.DIAGNOSES).items()
}
def error_cause(got: CheckOutput, i: Inputs) -> str | None:
    """The cause of a check that ended in an error: a transposed table, parameters() that gives
    arrays, or a bare backward result."""
    if got.error is not None and got.error.type == "ProbeError" and NOT_A_TENSOR in got.error.message:
        return ("parameters() returns each Tensor's .data, a numpy array that no optimizer can update (nor the "
                "gradient reach): return the Tensors themselves, [self.weight]")
    missing = re.search(r"has no tensor of shape \((\d+), (\d+)\) \(found \[(.*)\]\)", got.error.message if got.error else "")
    lookup = re.search(r"\bEmbedding\(\d+, \d+\)\.parameters\(\) has no tensor", got.error.message if got.error else "")
    if missing and (int(missing[1]) == i.get("vocab") or lookup):
        for rows, cols in re.findall(r"\((\d+), (\d+)\)", missing[3]):
            if cols == missing[2] and (off := embeddings_api.table_rows(int(rows), int(missing[1]))):
                return off
    m = re.search(r"gave a gradient of shape \((\d+), (\d+)\) for a tensor of shape \((\d+), (\d+)\)",
                  got.error.message if got.error is not None else "")
    if m and m[2] == m[4] and m[1] != m[3]:
        return (f"the weight's gradient has {m[1]} rows, not the table's {m[3]}: every row of the table gets a "
                "gradient row (0 where no id points), so create it as np.zeros_like(weight.data)")
    message = got.error.message if got.error is not None else ""
    lost = re.search(r"gave a gradient of shape \(([\d, ]+)\) for a tensor of shape \(([\d, ]+)\)", message)
    reshape = re.search(r"cannot reshape array of size (\d+) into shape \((\d+), ?(\d+)\)", message)
    if (lost and lost[1].replace(" ", "").rsplit(",", 1)[0] == lost[2].replace(" ", "").rstrip(",")) or (
            reshape and reshape[1] == reshape[2] and int(reshape[3]) > 1):
        return ("the lookup's output has the ids' own shape, one number per id, so the upstream gradient has no "
                "embed_dim axis for the backward: the lookup lost the embed_dim axis (np.take(table, ids) without "
                "axis=0 reads the flattened table?); return ids.shape + (embed_dim,)")
    flat = re.search(r"gave a gradient of shape \(([\d, ]+)\) for a tensor of shape \((\d+), (\d+)\)",
                     got.error.message if got.error is not None else "")
    if flat:
        upstream = [int(n) for n in flat[1].replace(" ", "").split(",") if n]
        if len(upstream) > 2 and math.prod(upstream[:-1]) == int(flat[2]) and upstream[-1] == int(flat[3]):
            return (f"forward's output has shape ({flat[2]}, {flat[3]}), the batch flattened away, where the ids "
                    f"need ({', '.join(map(str, upstream))}): reshape the result to ids.shape + (embed_dim,)")
    if got.error is not None and "'numpy.ndarray' object has no attribute 'backward'" in got.error.message:
        return ("forward returns a numpy array, not a Tensor, so there is no backward() to call: return a Tensor "
                "connected to the weight (out._grad_fn = EmbeddingBackward(self.weight, indices), or "
                "EmbeddingFunction.apply)")
    if got.error is not None and got.error.type == "ProbeError" and got.error.message.rstrip().endswith(" is None"):
        what = got.error.message.rstrip().removesuffix(" is None").strip()
        return (f"{what} returned None: the method computes its result but does not return it (a missing "
                "`return`, or __call__ that calls forward without returning what it gives)")
    return layout.error_cause(got, i) or returned.bare_gradient(got)


ERROR_CAUSE = error_cause
COMPARATORS = {"xavier_bounds": xavier_bounds, "pe_init_bounds": pe_init_bounds}
NOT_APPLICABLE = embeddings_api.NOT_APPLICABLE
GENERATION = embeddings_api.generation
CRASH_MEANING = crashes.meaning
SOURCE_GENERATION = embeddings_api.source_generation
