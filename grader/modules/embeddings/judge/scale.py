"""Constant factors between a student's output and the right one, shared by the module-11 diagnoses."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from grader.unit import CheckOutput, close


def factor(got: np.ndarray | None, base: np.ndarray | None) -> float | None:
    """The one constant c with got == c * base (to 1e-6), if there is one."""
    if got is None or base is None or got.shape != base.shape or not np.any(base != 0):
        return None
    c = float(np.sum(got * base) / np.sum(base * base))
    return c if bool(close(got, c * base, 1e-6, 1e-6).all()) else None


def gradient_scale(got: CheckOutput, exp: CheckOutput, ids: Mapping[str, int]) -> str | None:
    """Each gradient output (name -> how many ids its backward had) is the right one times a constant
    other than 1: 1/N for its own N (an averaged gradient), or one constant for all of them."""
    factors = {name: factor(got.arrays.get(name), exp.arrays.get(name)) for name in ids}
    found = {name: c for name, c in factors.items() if c is not None}
    if len(found) < len(ids) or all(math.isclose(c, 1.0, rel_tol=1e-6) for c in found.values()):
        return None
    fix = "every id adds its upstream row unchanged (a sum over the ids, not a mean)"
    if all(math.isclose(c * ids[name], 1.0, rel_tol=1e-5) for name, c in found.items()):
        n = max(ids.values())
        return f"the gradient is scaled by 1/N, N = the number of ids in the backward (1/{n} for {n} ids): {fix}"
    first = next(iter(found.values()))
    if not all(math.isclose(c, first, rel_tol=1e-5) for c in found.values()):
        return None
    whole = round(first)
    if whole > 1 and math.isclose(first, whole, rel_tol=1e-5):
        return (f"the gradient is {whole} times the right one, whatever the number of ids: it was added {whole} times "
                "(backward both stores it in weight.grad and returns it, and the engine adds what it returns; or the "
                "rows are added twice); backward only returns (grad_weight,), and autograd accumulates it into .grad")
    return f"the gradient is {first:.4g} times the right one: {fix}"
