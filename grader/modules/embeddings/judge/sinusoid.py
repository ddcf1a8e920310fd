"""The sinusoid table and the usual mistakes in writing it, fitted against a student's table.

Each mistake is a table of its own (a doubled exponent, another logarithm, positions from 1, ...);
a likely cause names the one mistake whose table equals the student's, and only when that table
differs from the right one for these sizes (so that a mistake that changes nothing is never
named).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grader.unit import close

BASE = 10000.0
HALVES = ("the sines fill the first half of the columns and the cosines the second half (concatenated): the "
          "course interleaves them, PE[:, 0::2] = sin and PE[:, 1::2] = cos")


def table(max_len: int, dim: int, *, swap: bool = False, per_column: bool = False, base: float = BASE,
          halves: bool = False, padded: bool = False, exponent_scale: float = 1.0, first_position: int = 0,
          sign: float = 1.0, only: str = "", degrees: bool = False, floor: bool = False,
          normalised: bool = False, width_offset: int = 0, precedence: bool = False, integer: bool = False,
          linspace: bool = False, cos_shift_90: bool = False, cos_reversed: bool = False,
          angles: bool = False) -> np.ndarray:
    """The sinusoid table, or one of its usual mistakes; ``padded``: the exponent divides by the even
    width (D + 1 for odd D) of a table built for whole (sin, cos) pairs and then cut to D columns;
    ``exponent_scale``: 2 for 10000^(4i/D); ``sign``: -1 for pos * 10000^(2i/D); ``only``: "sin" or
    "cos" in every column; ``degrees``: the angle read as degrees; ``floor``: the exponent computed
    with integer division, 2i // D; ``normalised``: positions divided by max_seq_len; ``angles``: the
    size of each angle instead of the table (not for ``halves``)."""
    pos = np.arange(first_position, first_position + max_len)[:, None].astype(np.float64)
    if normalised:
        pos = pos / max_len
    if linspace:  # np.linspace(0, max_len, max_len): the end point included, so every step is a bit longer
        pos = np.linspace(0, max_len, max_len)[:, None]
    col = np.arange(dim)[None, :]
    if halves:  # sines of frequency i in column i, then the cosines: concatenated, not interleaved
        first = (dim + 1) // 2
        pair = np.where(col < first, col, col - first)
        angle = pos / base ** (2 * pair / dim)
        return np.where(col < first, np.sin(angle), np.cos(angle))
    index = col if per_column else 2 * (col // 2)
    width = (dim + dim % 2 if padded else dim) + width_offset
    exponent = (index // width) if floor else exponent_scale * index / width
    with np.errstate(over="ignore"):
        angle = pos * width / base ** (sign * index.astype(np.float64)) if precedence else pos / base ** (sign * exponent)
    if degrees:
        angle = np.deg2rad(angle)
    if angles:  # the angle's size, for the float32 rounding a table built in float32 carries
        return np.abs(np.broadcast_to(angle, (max_len, dim)))
    even = (col % 2 == 0) != swap
    if only:
        even = np.full(even.shape, only == "sin")
    if cos_reversed:  # the cos columns take the frequencies from the last one back
        pairs = (dim + 1) // 2
        angle_rev = pos / base ** (2 * (pairs - 1 - col // 2) / dim)
        cos = np.cos(angle_rev)
    else:
        cos = np.sin(angle + 90.0) if cos_shift_90 else np.cos(angle)
    out = np.where(even, np.sin(angle), cos)
    return np.trunc(out) if integer else out


@dataclass(frozen=True)
class Mistake:
    cause: str
    kwargs: dict[str, Any] = field(default_factory=dict)


MISTAKES = (
    Mistake("sin and cos are swapped: even columns take sin, odd columns cos", {"swap": True}),
    Mistake("the frequency uses each column's own index: columns 2i and 2i+1 must share 10000^(2i/D)",
            {"per_column": True}),
    Mistake("the exponent is doubled, 10000^(4i/D): with i counting the (sin, cos) pairs, the exponent is 2i/D "
            "(or, with the even column index 2i itself, that index over D, not 2 * index over D)",
            {"exponent_scale": 2.0}),
    Mistake("the exponent is halved, 10000^(i/D): the pair index i must be doubled, 10000^(2i/D)",
            {"exponent_scale": 0.5}),
    Mistake("the frequencies use log10(10000) where the natural logarithm belongs: exp(-2i * ln(10000) / D) "
            "(math.log, np.log), not math.log10", {"base": math.exp(math.log10(BASE))}),
    Mistake("the frequencies use log2(10000) where the natural logarithm belongs: exp(-2i * ln(10000) / D) "
            "(math.log, np.log), not math.log2", {"base": math.exp(math.log2(BASE))}),
    Mistake("the sign of the exponent is flipped: positions are divided by 10000^(2i/D) (or multiplied by "
            "exp(-2i * ln(10000) / D)), not multiplied by it", {"sign": -1.0}),
    Mistake("positions are counted from 1: row p must use position p, so row 0 is sin(0) = 0, cos(0) = 1",
            {"first_position": 1}),
    Mistake("the base is 1000, not 10000", {"base": 1000.0}),
    Mistake("every column holds cos: even columns take sin (PE[:, 0::2]), odd columns cos (PE[:, 1::2])",
            {"only": "cos"}),
    Mistake("every column holds sin: odd columns take cos (PE[:, 1::2] = cos), even columns sin", {"only": "sin"}),
    Mistake("the angle is read as degrees (np.deg2rad, or * pi / 180): pos / 10000^(2i/D) is already in radians",
            {"degrees": True}),
    Mistake("the exponent is computed with integer division, 2i // D (0 for every column), so every frequency is "
            "1: divide with /, 10000^(2i / D)", {"floor": True}),
    Mistake("the positions are divided by max_seq_len: the angle uses the position itself, pos / 10000^(2i/D)",
            {"normalised": True}),
    Mistake("the exponent divides by D - 1: the frequencies are 10000^(2i/D), with D itself", {"width_offset": -1}),
    Mistake("10000 ** 2i / D is (10000^(2i)) / D, since ** binds tighter than /: write 10000 ** (2i / D)",
            {"precedence": True}),
    Mistake("the table holds whole numbers only (an integer array, np.zeros(..., dtype=int)): sin and cos values are "
            "cut to 0 or ±1; make it float32", {"integer": True}),
    Mistake("the positions come from np.linspace(0, max_seq_len, max_seq_len), which includes the end point, so "
            "position p becomes p * L / (L - 1): use np.arange(max_seq_len)", {"linspace": True}),
    Mistake("cos is computed as sin(angle + 90), but the angle is in radians: cos(angle) = sin(angle + pi / 2); use "
            "np.cos", {"cos_shift_90": True}),
    Mistake("the cos columns take the frequencies in reverse order: columns 2i and 2i+1 share 10000^(2i/D)",
            {"cos_reversed": True}),
    Mistake(HALVES, {"halves": True}),
    Mistake("for odd embed_dim the exponent divides by D + 1 (the width of whole sin/cos pairs) instead of D: the "
            "frequencies are 10000^(2i/D) with D itself, then the last cos is dropped", {"padded": True}),
)


def _fits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(close(a, b, 1e-4, 1e-5).all())


# A table built in float32 carries a rounding error of a few float32 steps of each angle (a flipped
# sign makes angles of 10^5 and more, where one step is 0.01): 8 steps of 2^-23 relative.
FLOAT32_ANGLE = 8 * 2.0**-23


def _fits_rounded(got: np.ndarray, variant: np.ndarray, angle: np.ndarray | None) -> bool:
    """``got`` equals ``variant`` up to the rounding of angles computed in float32."""
    if _fits(got, variant):
        return True
    if angle is None or got.shape != variant.shape or angle.shape != variant.shape:
        return False
    with np.errstate(invalid="ignore"):
        slack = 1e-4 * np.abs(variant) + 1e-5 + FLOAT32_ANGLE * angle
        return bool(np.all(np.abs(got - variant) <= slack))


def fit(got: np.ndarray, max_len: int, dim: int, rows: slice = slice(None)) -> str | None:
    """The one usual mistake whose table (its ``rows``) equals ``got``, or None."""
    right = table(max_len, dim)[rows]
    if got.shape != right.shape:
        return None
    for mistake in MISTAKES:
        variant = table(max_len, dim, **mistake.kwargs)[rows]
        angle = None if mistake.kwargs.get("halves") else table(max_len, dim, angles=True, **mistake.kwargs)[rows]
        if not _fits(variant, right) and _fits_rounded(got, variant, angle):
            return mistake.cause
    return None


def fixed_length(got: np.ndarray, dim: int) -> int | None:
    """The row count of a table that ignores max_seq_len, when ``got`` has the right rows for its own."""
    rows = got.shape[0] if got.ndim == 2 else 0
    if rows and got.shape[1] == dim and _fits(got, table(rows, dim)):
        return rows
    return None
