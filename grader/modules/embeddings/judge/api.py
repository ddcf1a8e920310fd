"""Likely causes for the module-11 checks of the API's edges (see harness/probes/embeddings_api.py).

As in ``embeddings``, each diagnosis tests one hypothesis on the student's numbers and speaks only
when it holds; ``Cause.upstream`` names a check whose failure explains this one.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from grader.unit import Cause, CheckOutput, Diagnosis, close

from ..probes.api import large_table
from .scale import gradient_scale

Inputs = dict[str, Any]
OWN = "ValueError"  # raised by the student's own check (numpy's own ValueError is reported differently)
NO_START_POS = ("written for the older TinyTorch API (no method of PositionalEncoding or EmbeddingLayer takes "
                "start_pos), so this newer-API check does not apply; its points are given")


def _same(a: Any, b: np.ndarray) -> bool:
    return isinstance(a, np.ndarray) and a.shape == b.shape and bool(close(a, b, 1e-5, 1e-5).all())


def _foreign(fact: Any) -> bool:
    return isinstance(fact, str) and fact.startswith(OWN) and fact != OWN


MIXED = ("written partly for each TinyTorch generation ({methods} {verb} start_pos, as in the newer API, but "
         "the Embedding's backward is the older module-05 kind, a node whose apply(grad_output) returns the "
         "gradient), so only what both generations ask is scored: this newer-API check does not apply; its points "
         "are given")


def _signature_generation(takes: Any) -> str | None:
    return None if not isinstance(takes, list) else "newer" if takes else "older"


def _agreed(signature: str | None, node: Any) -> str | None:
    """The generation both kinds of evidence agree on: the start_pos parameters, and the Embedding's
    backward node (None there is no evidence either way); None when they disagree or say nothing."""
    if node in ("older", "newer") and signature not in (None, node):
        return None
    return signature or (node if node in ("older", "newer") else None)


def older_generation(got: CheckOutput) -> str | None:
    """Why a newer-generation check does not apply (the submission is not written for the newer
    API by agreeing evidence), or None when it does."""
    takes = got.facts.get("aux_takes_start_pos")
    signature = _signature_generation(takes)
    if signature == "older":
        return NO_START_POS
    if isinstance(takes, list) and takes and _agreed("newer", got.facts.get("aux_backward_style")) is None:
        return MIXED.format(methods=" and ".join(str(t) for t in takes), verb="takes" if len(takes) == 1 else "take")
    return None


# ---- start_pos -------------------------------------------------------------------------------


def _takes_no_start_pos(got: CheckOutput, names: tuple[str, ...], owner: str) -> str | None:
    """A TypeError from a method that names no start_pos parameter (the probe read the signatures)."""
    takes = got.facts.get("aux_takes_start_pos")
    for name in names:
        value = got.facts.get(name)
        method = "__call__" if "call" in name.split("_") else "forward"
        if value == "raised TypeError" and not (isinstance(takes, list) and f"{owner}.{method}" in takes):
            return (f"{method} does not accept start_pos (TypeError): give it a start_pos=0 parameter"
                    + (" and pass it on to self.forward" if method == "__call__" else ""))
    return None


def _window_causes(got: CheckOutput, out: str, at_start: np.ndarray, at_zero: np.ndarray, what: str) -> str | None:
    """Causes read from one output taken at start_pos: the window ignored, or taken from row 0."""
    if _same(got.arrays.get(out), at_zero):
        via = "__call__" if "call" in out.split("_") else "forward"
        if via == "__call__" and _same(got.arrays.get(out.replace("call", "forward")), at_start):
            return "__call__ drops start_pos: forward is right, so __call__ must return self.forward(x, start_pos)"
        return (f"start_pos is ignored by {via}: the {what} added must be rows start_pos .. start_pos+seq_len-1 "
                "(table[start_pos:start_pos + seq_len]), not the first seq_len rows")
    return None


def _window_placement(got: CheckOutput, outputs: tuple[str, ...], x: np.ndarray, table: np.ndarray,
                      start: int) -> str | None:
    """start_pos=0 is right, but the window taken at ``start`` is not rows start .. start+seq_len-1: it
    is seq_len rows from another row, or (numpy failed to add it) not seq_len rows long."""
    seq = x.shape[1]
    if not _same(got.arrays.get("forward_default"), x + table[:seq]):
        return None
    fix = "take table[start_pos:start_pos + seq_len]"
    for name in outputs:
        out = got.arrays.get(name)
        rows = [k for k in range(1, len(table) - seq + 1) if k != start and _same(out, x + table[k:k + seq])]
        if rows:
            return (f"with start_pos={start} the window starts at row {rows[0]} instead of row {start}: "
                    f"{fix}, rows start_pos .. start_pos+seq_len-1")
        if _foreign(str(got.facts.get(name, "")).removeprefix("raised ")):
            return (f"with start_pos={start} the addition failed inside numpy although rows {start} .. "
                    f"{start + seq - 1} fit in the table (and start_pos=0 works): the window for start_pos is not "
                    f"seq_len ({seq}) rows long, it starts or ends at the wrong row (a slice that ends at seq_len "
                    f"instead of start_pos + seq_len?); {fix}")
    return None


def _end_causes(got: CheckOutput, at_end: str, past_end: str) -> str | None:
    if got.facts.get(at_end) == f"raised {OWN}":
        return ("a window ending exactly at max_seq_len was rejected: the check is start_pos + seq_len > "
                "max_seq_len (> not >=)")
    past = got.facts.get(past_end)
    if past == "none":
        return ("a window running past max_seq_len was accepted: the length check must include start_pos "
                "(start_pos + seq_len > max_seq_len raises ValueError)")
    if _foreign(past):
        return ("no length check that includes start_pos: the ValueError came from numpy failing to add a "
                "window cut short by the table's end; raise ValueError yourself when start_pos + seq_len > "
                "max_seq_len")
    return None


def pe_start_pos(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    x, table, s = i["x"], i["table"], i["start"]
    seq = x.shape[1]
    at_start, at_zero = x + table[s:s + seq], x + table[:seq]
    cause = (_takes_no_start_pos(got, ("forward_shifted", "call_shifted"), "PositionalEncoding")
             or _window_causes(got, "forward_shifted", at_start, at_zero, "position rows")
             or _window_causes(got, "call_shifted", at_start, at_zero, "position rows"))
    if cause:
        return cause
    if _same(got.arrays.get("forward_shifted"), at_start) and not _same(got.arrays.get("forward_default"), at_zero):
        return "forward(x) without start_pos must use start_pos=0 (rows 0 .. seq_len-1)"
    cause = _window_placement(got, ("forward_shifted", "call_shifted"), x, table, s)
    if cause:
        return cause
    if str(got.facts.get("grad_shifted", "")).startswith("no gradient"):
        return Cause("the rows added are right, but no gradient reached position_embeddings", "pe_grad")
    grad, g = got.arrays.get("grad_shifted"), i["upstream"].sum(axis=0)
    shifted_to_zero = np.zeros_like(table)
    shifted_to_zero[:seq] = g
    if _same(grad, shifted_to_zero):
        return "the output is right but the gradient went to rows 0 .. seq_len-1: slice the table Tensor at start_pos"
    return _end_causes(got, "at_end", "past_end") or _bad_start_causes(got)


def _bad_start_causes(got: CheckOutput) -> str | None:
    negative, fractional = got.facts.get("negative"), got.facts.get("fractional")
    fix = "raise ValueError unless start_pos is an integer >= 0 (isinstance(start_pos, (int, np.integer)))"
    if got.facts.get("negative_wraps") == "none":
        return ("start_pos=-3 was accepted for 2 positions: numpy reads a negative start from the table's end, so "
                f"the last rows but one were added (start_pos=-1 fails only because its window is empty): {fix}")
    if negative != OWN:
        what = ("was accepted" if negative == "none" else "failed inside numpy or the Tensor library, not in your "
                "own check" if _foreign(negative) else f"raised {negative}")
        return f"start_pos=-1 {what} (a negative start slices the table from its end): {fix}"
    if fractional != OWN:
        what = "was accepted" if fractional == "none" else f"raised {fractional}, not your own ValueError"
        return f"start_pos=1.5 {what}: {fix}"
    return None


def layer_start_pos(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    tok = i["weight"][i["tokens"].astype(int)]
    s, seq = i["start"], tok.shape[1]
    cause: str | Cause | None = _takes_no_start_pos(got, ("learned_forward", "learned_call", "sin_forward", "sin_call"),
                                "EmbeddingLayer")
    if cause is None and got.facts.get("aux_sin_type") not in (None, "Tensor") and any(
            str(got.facts.get(name, "")).startswith("raised") for name in ("sin_forward", "sin_call")):
        kind = str(got.facts["aux_sin_type"])
        article = "an" if kind[:1] in "aeiou" else "a"
        cause = Cause(f"create_sinusoidal_embeddings returns {article} {kind}, not a Tensor, and the sinusoidal mode "
                      "fails on it: return Tensor(table)", hint=False)
    if cause:
        return cause
    upstream = upstream_positions(got, i["table"][s:s + seq], lambda added: tok + added, "learned_forward",
                                  "learned_call")
    if upstream:
        return Cause("the layer passes start_pos on, but your PositionalEncoding does not add the right rows",
                     "pe_start_pos")
    own = got.facts.get("aux_positions")
    if isinstance(own, str) and own.startswith("raised") and own == got.facts.get("learned_forward"):
        return Cause(f"the layer passes start_pos on, but at start_pos={s} your PositionalEncoding itself {own}",
                     "pe_start_pos")
    sin = exp.arrays.get("aux_sinusoids")
    windows = {"learned": (tok + i["table"][s:s + seq], tok + i["table"][:seq], "learned position rows")}
    if sin is not None:
        windows["sin"] = (tok + sin[s:s + seq], tok + sin[:seq], "sinusoid rows")
    for mode, (at_start, at_zero, what) in windows.items():
        cause = (_window_causes(got, f"{mode}_forward", at_start, at_zero, what)
                 or _window_causes(got, f"{mode}_call", at_start, at_zero, what))
        if cause:
            return f"{cause} (pos_encoding='{'learned' if mode == 'learned' else 'sinusoidal'}')"
    upstream = _upstream_lookup(got, i, lambda rows: rows + i["table"][s:s + seq], "learned_forward", "learned_call")
    if upstream:
        return upstream
    own_sin = got.arrays.get("aux_sinusoids")
    if (sin is not None and own_sin is not None and not _same(own_sin, sin)
            and _same(got.arrays.get("sin_forward"), tok + own_sin[s:s + seq])):
        return Cause("the start_pos window is right, but your create_sinusoidal_embeddings table is not", "sin_values")
    if not _same(got.arrays.get("learned_default"), tok + i["table"][:seq]) and _same(
            got.arrays.get("learned_forward"), tok + i["table"][s:s + seq]):
        return "forward(tokens) without start_pos must use start_pos=0"
    return _end_causes(got, "learned_at_end", "learned_past_end") or _end_causes(got, "sin_at_end", "sin_past_end")


SHAPE_IN_REJECTION = re.compile(r"^shape (\([\d, ]*\)) differs")


def lookup_shape(got: CheckOutput, i: Inputs) -> Cause | None:
    """The student's own Embedding, on the layer's tokens, returns another shape than tokens.shape +
    (embed_dim,): the layer cannot work on it, whatever it does (emb_shape says so)."""
    own, tokens = got.arrays.get("aux_lookup"), i["tokens"]
    shape = own.shape if own is not None else None
    if shape is None and (m := SHAPE_IN_REJECTION.match(got.rejected.get("aux_lookup", ""))):
        shape = tuple(int(n) for n in m[1].strip("()").split(",") if n.strip())
    want = (*tokens.shape, i["dim"])
    if shape is None or shape == want:
        return None
    return Cause(f"your Embedding returns shape {tuple(shape)} for tokens of shape {tuple(tokens.shape)}, not "
                 f"{want} (tokens.shape + (embed_dim,)), so the layer cannot work on it", "emb_shape")


def _upstream_lookup(got: CheckOutput, i: Inputs, layer_of: Any, *outputs: str) -> Cause | None:
    """The layer's outputs are right for the student's own (wrong) Embedding lookup, or fail as it does."""
    if wrong_shape := lookup_shape(got, i):
        return wrong_shape
    failed = got.facts.get("aux_lookup")
    if (isinstance(failed, str) and failed.startswith("raised")
            and all(str(got.facts.get(name, "")).startswith("raised") for name in outputs)):
        return Cause(f"your Embedding itself {failed} on these valid token ids, so the layer cannot work",
                     "emb_lookup")
    own = got.arrays.get("aux_lookup")
    tok = i["weight"][i["tokens"].astype(int)]
    if own is None or own.shape != tok.shape or _same(own, tok):
        return None
    if all(_same(got.arrays.get(name), layer_of(own)) for name in outputs):
        return Cause("the layer is right for the rows your Embedding returns, but the lookup itself is wrong",
                     "emb_lookup")
    return None


def upstream_positions(got: CheckOutput, expected: np.ndarray, layer_of: Any, *outputs: str) -> Cause | None:
    """The layer's outputs are right for what the student's own (wrong) PositionalEncoding adds."""
    own = got.arrays.get("aux_positions")
    if own is None or own.shape != (1, *expected.shape) or _same(own[0], expected):
        return None
    if all(_same(got.arrays.get(name), layer_of(own[0])) for name in outputs):
        return Cause("the layer adds what your PositionalEncoding returns, and that is wrong", "pe_broadcast")
    return None


TAKE_FLAT = ("the lookup gives one number per id, not a row: np.take(table, ids) without axis=0 reads the flattened "
             "table (Embedding(4, 2) with rows (10v, 10v+1) gave [11, 1] for ids [3, 1], entries 3 and 1 of "
             "W.ravel()); take whole rows, np.take(table, ids, axis=0) or table[ids]")


def reads_flat_table(got: CheckOutput) -> bool:
    """Embedding(4, 2) with rows (10v, 10v + 1) gave W.ravel()[[3, 1]] for ids [3, 1]."""
    return got.facts.get("aux_seed_values") == [11.0, 1.0]


def table_rows(rows: int, vocab: int) -> str | None:
    """The cause of an embedding table one row longer or shorter than vocab_size."""
    if abs(rows - vocab) != 1:
        return None
    what = "one row more (a spare row for unknown or padding tokens?)" if rows > vocab else "one row less"
    return (f"the embedding table has {rows} rows, {what} than vocab_size = {vocab}: ids run 0 .. vocab_size-1, one "
            "row each, so create it as (vocab_size, embed_dim)")


# ---- Embedding -----------------------------------------------------------------------------


CASTS = ("int16", "uint16", "int8", "uint8", "float16")


def _read_rows(ids: np.ndarray, dtype: str, vocab: int) -> np.ndarray | None:
    """The table rows a lookup reads when ids go through ``astype(dtype)`` first (None: would raise)."""
    with np.errstate(all="ignore"):
        cast = ids.astype(dtype).astype(np.int64)
    if np.any(cast >= vocab) or np.any(cast < -vocab):
        return None
    return cast % vocab


def emb_large_ids(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    if reads_flat_table(got):
        return TAKE_FLAT
    ids, vocab, dim = i["ids"], i["vocab"], i["dim"]
    table = large_table(vocab, dim)
    rows = got.arrays.get("rows")
    for dtype in CASTS:
        read = _read_rows(ids, dtype, vocab)
        if read is not None and _same(rows, table[read]):
            k = int(np.argmax(read != ids.astype(int)))
            return (f"the ids went through {dtype}, which wraps at {_wrap(dtype)} (id {int(ids[k])} read row "
                    f"{int(read[k])}): cast with astype(int) or np.int64")
    grad = got.arrays.get("grad_rows")
    if grad is not None and _same(rows, table[ids.astype(int)]):
        upstream = (np.arange(ids.size)[:, None] + 1.0) / 16.0 * np.ones(dim)
        for dtype in CASTS:
            read = _read_rows(ids, dtype, vocab)
            if read is None:
                continue
            full = np.zeros((vocab, dim))
            np.add.at(full, read, upstream)
            if _same(grad, full[ids.astype(int)]):
                return (f"the forward is right, but the backward casts the ids to {dtype}, which wraps at "
                        f"{_wrap(dtype)}: cast with astype(int) or np.int64")
    looked_up = got.facts.get("rows")
    if isinstance(looked_up, str) and looked_up.startswith("raised"):
        return f"the lookup of these valid ids {looked_up}"
    if not _same(rows, table[ids.astype(int)]):
        return None
    failed, kind = got.facts.get("grad_rows"), got.facts.get("aux_output")
    if isinstance(failed, str) and kind not in (None, "graph", "tensor"):
        return (f"the lookup values are right, but forward returns {_article(str(kind))}, not a Tensor, so "
                f"backward() cannot run through it ({failed.removeprefix('raised ')}): return a Tensor connected "
                "to the weight (Tensor(rows, requires_grad=True) with out._grad_fn = EmbeddingBackward(self.weight, "
                "indices), or EmbeddingFunction.apply)")
    if isinstance(failed, str) and failed.startswith("no gradient"):
        if kind == "tensor" and got.facts.get("aux_weight_trainable") is True:
            return Cause("the lookup is right, but its output is a Tensor outside the autograd graph (no _grad_fn): "
                         "a new Tensor built from weight.data[ids] is cut off from the weight; connect it (out._grad_fn "
                         "= EmbeddingBackward(self.weight, indices)) or use EmbeddingFunction.apply", "grad_accumulate")
        return Cause("the lookup is right, but no gradient reached the weights", "grad_accumulate")
    if isinstance(failed, str) and failed.startswith("raised"):
        return f"the lookup is right, but the backward of these ids {failed}"
    started = _started_from_weights(got, exp, table, ids)
    if started:
        return started
    scaled = gradient_scale(got, exp, {"grad_rows": ids.size})
    if scaled:
        return scaled
    if grad is not None and not _same(grad, exp.arrays.get("grad_rows", np.empty(0))):
        return Cause("the lookup of these large ids is right and no cast of the ids explains the gradient: the "
                     "backward itself computes a wrong gradient (the gradient checks show it on small tables)",
                     hint=False)
    return None


def _article(name: str) -> str:
    if name == "ndarray":
        return "a numpy array"
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _started_from_weights(got: CheckOutput, exp: CheckOutput, table: np.ndarray, ids: np.ndarray) -> Cause | None:
    """Rows never looked up got a gradient: every row that was read holds its weight row besides the
    right gradient (a backward that starts from weight.data.copy()), or at least the count says so."""
    grad, right, count = got.arrays.get("grad_rows"), exp.arrays.get("grad_rows"), got.facts.get("grad_nonzero_rows")
    used = int(np.unique(ids.astype(int)).size)
    if not isinstance(count, int) or count <= used or grad is None or right is None:
        return None
    if _same(grad, right + table[ids.astype(int)]):
        return Cause(f"the gradient holds the weight values themselves (each row read got its weight row added, and "
                     f"{count} of {len(table)} rows are non-zero): backward starts from a copy of weight.data; start "
                     "from np.zeros_like(weight.data)", "grad_sparse")
    return Cause(f"{count} rows of the gradient are non-zero, but only {used} ids were looked up: rows never used "
                 "must get exactly zero; start from np.zeros_like(weight.data) and add only into the rows read",
                 "grad_sparse")


def _wrap(dtype: str) -> str:
    return {"int16": "32768", "uint16": "65536", "int8": "128", "uint8": "256"}.get(dtype, "2048 (float16)")


def emb_bad_ids(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    causes = []
    fraction, mixed = got.facts.get("fraction"), got.facts.get("mixed_fraction")
    if fraction != OWN:
        causes.append("an id of 1.5 was not rejected: ids must be whole numbers (raise ValueError when "
                      "np.any(ids != np.floor(ids)))")
    elif mixed != OWN:
        causes.append("[1.5] is rejected but [0, 2.5] is not: test every id (np.any), not only the first one")
    nan, mixed_nan = got.facts.get("nan"), got.facts.get("mixed_nan")
    if nan != OWN or mixed_nan != OWN:
        causes.append("a NaN id was not rejected with ValueError: check np.all(np.isfinite(ids)) first "
                      "(NaN fails every comparison, so a range check alone lets it through)")
    if got.facts.get("inf") != OWN:
        causes.append("an infinite id was not rejected with ValueError: check np.isfinite as well")
    return "; ".join(causes) or None


def _size_causes(got: CheckOutput, i: Inputs, owner: str) -> str | None:
    vocab, dim = got.facts.get("vocab_size"), got.facts.get("embed_dim")
    if (vocab, dim) == (i["dim"], i["vocab"]):
        return "vocab_size and embed_dim are swapped"
    missing = [name for name, value in (("vocab_size", vocab), ("embed_dim", dim)) if value == "missing"]
    if missing:
        return f"{owner} has no {' or '.join(missing)} attribute: keep the constructor's arguments as self.{missing[0]}"
    return None


def emb_attrs(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    return _size_causes(got, i, "Embedding")


def layer_attrs(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    causes = [c for c in [_size_causes(got, i, "EmbeddingLayer")] if c]
    positions = got.facts.get("pos_encoding")
    if positions == "missing":
        causes.append("with pos_encoding=None the layer has no pos_encoding attribute: set self.pos_encoding = None "
                      "in that mode too (an if/elif without the None branch leaves it unset)")
    elif positions not in ("None", None):
        causes.append(f"with pos_encoding=None, self.pos_encoding is {positions}: it should be None")
    return "; ".join(causes) or None


def sin_fixed(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    returned = got.facts.get("returns")
    if isinstance(returned, str) and returned != "Tensor":
        return (f"create_sinusoidal_embeddings returns {_article(returned)}, not a Tensor: its signature says -> Tensor, "
                "and code that reads the table's .data, as the course's test does, cannot index it; "
                "return Tensor(table)")
    if got.facts.get("requires_grad") is True:
        return ("the sinusoid table was created with requires_grad=True: it is fixed, never trained, so it must not "
                "collect gradients (return Tensor(table), whose requires_grad is False)")
    return None


def grad_keeps_weight(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    after, weight, grad = got.arrays.get("weight_after"), i["weight"], got.arrays.get("aux_grad")
    if after is None or after.shape != weight.shape:
        return None
    if grad is not None and _same(after, grad):
        return ("backward wrote the gradient into the weight table: grad = weight.data makes both names one "
                "array; start from np.zeros_like(weight.data)")
    zeroed = np.all(after == 0, axis=1) & np.any(weight != 0, axis=1)
    if zeroed.any():
        return (f"backward set row {int(np.argmax(zeroed))} of the weight table to zero: it must write only into a "
                "new gradient array (np.zeros_like(weight.data)), never into weight.data")
    if _same(after, weight - grad if grad is not None else weight):
        return "backward changed the weights (an update step?): it only computes the gradient"
    return None


# ---- PositionalEncoding --------------------------------------------------------------------


def pe_bad_shape(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | None:
    causes = []
    if got.facts.get("dim_one") == "none":
        causes.append("x with last dimension 1 was accepted: numpy broadcasts it against the table silently; "
                      f"raise ValueError when x.shape[-1] != embed_dim ({i['dim']})")
    if _foreign(got.facts.get("dim_plus_one")):
        causes.append("no embed_dim check: the ValueError for a wrong embed_dim came from numpy failing to "
                      "broadcast, not from your own check")
    elif got.facts.get("dim_plus_one") == "none":
        causes.append("a wrong embed_dim was accepted: compare x.shape[-1] with embed_dim")
    if got.facts.get("two_d") not in (OWN, None):
        causes.append("a 2-D x was not rejected with ValueError: check len(x.shape) == 3 first")
    return "; ".join(causes) or None


# ---- EmbeddingLayer ------------------------------------------------------------------------


def layer_sin_too_long(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    too_long, at_max = got.facts.get("too_long"), got.facts.get("at_max")
    one = got.facts.get("aux_one_token")
    if at_max not in ("none", None) and one not in ("none", None):
        return Cause(f"the layer raised {one} even for a single token: what fails is not the length check but the "
                     "layer itself", "layer_modes")
    if at_max == OWN:
        return "exactly max_seq_len tokens were rejected: compare with >, not >="
    if _foreign(at_max):
        return ("exactly max_seq_len tokens failed inside numpy: the sinusoid rows and the token embeddings do "
                "not broadcast")
    if _foreign(too_long):
        return ("no length check in the sinusoidal mode: the ValueError came from numpy failing to add a table "
                "cut short; raise ValueError yourself when seq_len > max_seq_len")
    if too_long == "none":
        return "too many tokens were accepted: raise ValueError when seq_len > max_seq_len"
    return None


MISSING_TABLE = ("parameters() leaves out the learned position table: the layer holds it (its PositionalEncoding "
                 "has one), but an optimizer only trains what parameters() returns; return the token weights and "
                 "the PositionalEncoding's parameters")


def layer_defaults(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
    rows, held = got.facts.get("param_rows"), got.facts.get("aux_trainable_rows")
    kinds = got.facts.get("aux_param_types")
    if isinstance(kinds, list) and "ndarray" in kinds and str(got.facts.get("out", "")).startswith("raised"):
        return Cause("EmbeddingLayer.parameters() gives numpy arrays, not Tensors (parameters() returns .data "
                     "somewhere): no optimizer can update an array; return the Tensors themselves", "emb_params",
                     hint=False)
    if isinstance(rows, list) and isinstance(held, list) and len(rows) < 2 and len(held) >= 2 and set(rows) < set(held):
        return Cause(MISSING_TABLE, hint=False)
    if isinstance(rows, list) and len(rows) != 2:
        return (f"EmbeddingLayer(vocab_size, embed_dim) has {len(rows)} parameter tensors: by default "
                "pos_encoding='learned', which adds a trainable position table")
    if isinstance(rows, list) and i["vocab"] not in rows:
        for count in rows:
            if isinstance(count, int) and (off := table_rows(count, i["vocab"])):
                return off
    positions = [r for r in rows if r != i["vocab"]] if isinstance(rows, list) else []
    if len(positions) == 1 and positions[0] != 512:
        return f"max_seq_len defaults to {positions[0]}: the course's default is 512"
    if got.facts.get("sin_513") == "none":
        return "513 tokens were accepted by a sinusoidal layer built with the defaults: max_seq_len defaults to 512"
    out, tok = got.arrays.get("out"), i["weight"][i["tokens"].astype(int)]
    table = i["table"][: tok.shape[1]]
    if _same(out, tok * math.sqrt(i["dim"]) + table):
        return ("with the defaults the token embeddings are scaled by sqrt(D): scale_embeddings defaults to False, "
                "and only scale_embeddings=True scales (test the flag itself, not whether it `is not None`)")
    if _same(out, tok + 2 * table):  # the signature (the check's hint) is not what is wrong
        return Cause("the defaults are right, but the learned position rows were added twice (the PositionalEncoding "
                     "adds them already): add them once", hint=False)
    return (_upstream_lookup(got, i, lambda looked_up: looked_up + table, "out")
            or upstream_positions(got, table, lambda added: tok + added, "out"))


DIAGNOSES: dict[str, Diagnosis] = {
    f.__name__: f
    for f in (pe_start_pos, layer_start_pos, emb_large_ids, emb_bad_ids, emb_attrs, layer_attrs, sin_fixed,
              grad_keeps_weight, pe_bad_shape, layer_sin_too_long, layer_defaults)
}
NOT_APPLICABLE: dict[str, Callable[[CheckOutput], str | None]] = {"newer_generation": older_generation}


def source_generation(cells: Sequence[str]) -> str | None:
    """A correct source's generation, from its code (grader selftest --mutants): 'newer' when the
    student writes a Function subclass with its own ``backward``, else 'older'."""
    last: dict[str, ast.stmt] = {}  # name -> its last top-level definition
    for code in cells:
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue  # magics and shell lines: analysis cells, never the graded code
        last.update((node.name, node) for node in tree.body
                    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))
    for node in last.values():
        if isinstance(node, ast.ClassDef) and any(
                (b.attr if isinstance(b, ast.Attribute) else b.id if isinstance(b, ast.Name) else "")
                .endswith("Function") for b in node.bases) and any(
                isinstance(b, ast.FunctionDef) and b.name == "backward" for b in node.body):
            return "newer"
    return "older"


def generation(outputs: Mapping[str, CheckOutput]) -> str | None:
    """The generation two kinds of evidence agree on: 'newer' when some method of PositionalEncoding
    or EmbeddingLayer takes start_pos (the newer course's API) and the Embedding's backward is not
    the older module-05 kind of node; 'older' when none takes start_pos and the backward is not the
    newer kind (a Function of the student's own with backward). None when they disagree (an older
    notebook that added start_pos, say: only what both generations ask is then scored) or when no
    check could tell (they did not run)."""
    seen = [got.facts["aux_takes_start_pos"] for got in outputs.values()
            if isinstance(got.facts.get("aux_takes_start_pos"), list)]
    if not seen:
        return None
    nodes = {got.facts.get("aux_backward_style") for got in outputs.values()} & {"older", "newer"}
    signature = "newer" if any(seen) else "older"
    return _agreed(signature, nodes.pop()) if len(nodes) == 1 else signature if not nodes else None
