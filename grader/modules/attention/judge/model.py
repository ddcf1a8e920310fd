"""Attention recomputed on the host, right and in the ways students get it wrong.

Each function returns what a submission with one named bug would have produced on the probe's
inputs, so that a diagnosis can test that hypothesis on the student's numbers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

Inputs = dict[str, Any]
LAYERS = ("q_proj", "k_proj", "v_proj", "out_proj")


def softmax(s: np.ndarray, axis: int = -1) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(s - np.max(s, axis=axis, keepdims=True))
        out: np.ndarray = e / np.sum(e, axis=axis, keepdims=True)
    return out


def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None, *,
           scale: float | None = None, axis: int = -1, masking: str = "fill",
           kqt: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(output, weights). ``masking``: "fill" (the course), "ignored", "inverted" (0 allows),
    "multiply" (scores * mask: blocked scores become 0, not -inf), "after" (softmax, then * mask),
    "boost" (+1e9 where the mask is 0, in float32 as a student's Tensor adds it), "first" (every
    batch entry filled by the first one's mask). ``kqt``: scores K Q^T instead of Q K^T."""
    raw = k @ np.swapaxes(q, -1, -2) if kqt else q @ np.swapaxes(k, -1, -2)
    s = raw * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        m = np.broadcast_to(mask[:1] if masking == "first" else mask, s.shape)
        if masking in ("fill", "first"):
            s = np.where(m == 0, -np.inf, s)
        elif masking == "inverted":
            s = np.where(m == 1, -np.inf, s)
        elif masking == "multiply":
            s = s * m
        elif masking == "boost":
            s = (s.astype(np.float32) + np.where(m == 0, np.float32(1e9), np.float32(0.0))).astype(np.float64)
    w = softmax(s, axis)
    if mask is not None and masking == "after":
        w = w * np.broadcast_to(mask, w.shape)
    return w @ v, w


def _split(a: np.ndarray, heads: int, how: str) -> np.ndarray:
    b, s, d = a.shape
    if how == "reshape_only":  # (b, s, d) read straight as (b, h, s, hd): no transpose
        return a.reshape(b, heads, s, d // heads)
    if how == "interleaved":  # head h takes columns h, h + H, ...: reshape (b, s, hd, h)
        return a.reshape(b, s, d // heads, heads).transpose(0, 3, 1, 2)
    if how == "batch_axis":  # transpose(0, 2): (h, s, b, hd), attending across the batch
        return a.reshape(b, s, heads, d // heads).transpose(2, 1, 0, 3)
    return a.reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)


def _merge(a: np.ndarray, how: str) -> np.ndarray:
    b, h, s, hd = a.shape
    if how == "reshape_only":
        return a.reshape(b, s, h * hd)
    if how == "interleaved":
        return a.transpose(0, 2, 3, 1).reshape(b, s, h * hd)
    if how == "batch_axis":  # a is (h, s, b, hd): transpose(0, 2) back
        return a.transpose(2, 1, 0, 3).reshape(a.shape[2], a.shape[1], a.shape[0] * a.shape[3])
    return a.transpose(0, 2, 1, 3).reshape(b, s, h * hd)


def mha(i: Inputs, mask: np.ndarray | None = None, *, split: str = "course", merge: str = "course",
        scale: float | None = None, out_proj: bool = True, heads: int | None = None, masking: str = "fill",
        upstream: np.ndarray | None = None, bias: bool = True, sources: tuple[str, ...] = LAYERS[:3],
        out_bias: bool = True) -> np.ndarray:
    """MultiHeadAttention on the probe's known weights, with the named variations (``bias``: the
    Q, K and V projections add their biases; ``sources``: the projections Q, K and V come from;
    ``out_bias``: out_proj adds its bias)."""
    x, h = i["x"], heads or i["heads"]
    q, k, v = (_split(x @ i[f"{n}.weight"] + (i[f"{n}.bias"] if bias else 0.0), h, split) for n in sources)
    m = None if mask is None else (mask[:, None] if split != "batch_axis" else None)
    out, _ = attend(q, k, v, m, scale=scale, masking=masking)
    merged = _merge(out, merge)
    if not out_proj:
        return merged
    projected: np.ndarray = merged @ i["out_proj.weight"] + (i["out_proj.bias"] if out_bias else 0.0)
    return projected
