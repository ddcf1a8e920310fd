"""Pure comparison of validated student outputs against the reference's, with explicit tolerances."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..channel import CheckOutput

_MISSING = object()
AUX = "aux_"  # outputs named aux_* are context for diagnoses, never compared


@dataclass(frozen=True)
class Cause:
    """A likely cause whose hypothesis was tested on the numbers. ``upstream`` names another check
    whose failure explains this one (the check's own hint is then beside the point). ``hint``:
    False when the cause rules out what the check's hint is about."""

    text: str
    upstream: str = ""
    hint: bool = True


Diagnosis = Callable[[CheckOutput, CheckOutput, dict[str, Any]], "str | Cause | None"]


def one_line(text: object, limit: int = 300) -> str:
    """Text from the sandbox folded onto one line, so it can never start a line of our own."""
    return " ".join(str(text).split())[:limit]


@dataclass(frozen=True)
class Mismatch:
    """One output that differs; ``text`` says how, in terms a student can act on."""

    name: str
    text: str


def close(got: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Elementwise ``|got - expected| <= atol + rtol * |expected|`` on float64 copies."""
    g, e = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    return np.abs(g - e) <= atol + rtol * np.abs(e)


def array_difference(got: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> str | None:
    """None if equal within tolerance, else the shape, how many differ and the worst place."""
    if got.shape != expected.shape:
        return f"shape {got.shape}, expected {expected.shape}"
    ok = close(got, expected, rtol, atol)
    if ok.all():
        return None
    diff = np.abs(got - expected)
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(np.where(ok, -1.0, diff))), got.shape))
    return (f"shape {got.shape}: {int((~ok).sum())} of {got.size} values differ; largest difference "
            f"{_num(diff[worst])} at index {list(worst)}: expected {_num(expected[worst])}, got {_num(got[worst])}")


def facts_equal(got: Any, expected: Any) -> bool:
    if isinstance(expected, float) and type(got) in (int, float) and not isinstance(got, bool):
        return math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(expected, list):
        return (isinstance(got, list) and len(got) == len(expected)
                and all(facts_equal(g, e) for g, e in zip(got, expected, strict=True)))
    return type(got) is type(expected) and got == expected


def compare(got: CheckOutput, expected: CheckOutput, rtol: float, atol: float) -> list[Mismatch]:
    """Every expected output the student's do not match, in the reference's order."""
    found: list[Mismatch] = []
    for name, exp in expected.arrays.items():
        if name.startswith(AUX):
            continue
        if name in got.rejected:
            found.append(Mismatch(name, f"{name}: {got.rejected[name]}"))
        elif name in got.facts:
            found.append(Mismatch(name, f"{name}: {one_line(got.facts[name])}"))
        elif name not in got.arrays:
            found.append(Mismatch(name, f"{name}: no output"))
        elif (text := array_difference(got.arrays[name], exp, rtol, atol)) is not None:
            found.append(Mismatch(name, f"{name}: {text}"))
    for name, fact in expected.facts.items():
        if name.startswith(AUX):
            continue
        value = got.facts.get(name, _MISSING)
        if not facts_equal(value, fact):
            shown = "no output" if value is _MISSING else _fact(value)
            found.append(Mismatch(name, f"{name}: expected {_fact(fact)}, got {shown}"))
    return found


def _num(x: float) -> str:
    return f"{float(x):.6g}"


def _fact(v: Any) -> str:
    return repr(v) if not isinstance(v, list) else "(" + ", ".join(one_line(x, 80) for x in v) + ")"
