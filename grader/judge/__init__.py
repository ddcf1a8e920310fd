"""Judge stage (pure): validated outputs + the reference's → a CheckResult with feedback.

Nothing here runs student code or reads sandbox files; it only compares data that
``grader.channel`` already validated, and explains the difference.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..channel import CheckOutput
from ..models import CheckResult, CheckStatus, Figure, shown
from ..rubric import CheckSpec
from . import embeddings
from .compare import Mismatch, compare

Comparator = Callable[[CheckOutput, CheckOutput, dict[str, Any]], list[Mismatch]]

COMPARATORS: dict[str, Comparator] = {"xavier_bounds": embeddings.xavier_bounds}
DIAGNOSES = embeddings.DIAGNOSES

_OUTCOME_STATUS: dict[str, CheckStatus] = {
    "error": "error", "oom": "oom", "timeout": "timeout", "crashed": "crashed", "missing": "crashed",
}


def judge(spec: CheckSpec, called: str, inputs: dict[str, Any], got: CheckOutput, expected: CheckOutput) -> CheckResult:
    """Compare one check's outputs with the reference's and explain any difference."""
    if got.outcome != "ok":
        status = _OUTCOME_STATUS[got.outcome]
        return _result(spec, status, _outcome_text(spec, got), called, got.duration_ms)
    matcher = COMPARATORS.get(spec.comparator)
    mismatches = (matcher(got, expected, inputs) if matcher
                  else compare(got, expected, spec.rtol, spec.atol))
    if not mismatches:
        return _result(spec, "passed", "", called, got.duration_ms)
    diagnose = DIAGNOSES.get(spec.id)
    cause = diagnose(got, expected, inputs) if diagnose else None
    lines = [m.text for m in mismatches[:4]]
    if len(mismatches) > 4:
        lines.append(f"... and {len(mismatches) - 4} more differences")
    if cause:
        lines.append(f"Likely cause: {cause}.")
    result = _result(spec, "failed", "\n".join(lines), called, got.duration_ms)
    return result.model_copy(update={"figures": _figures(got, expected, mismatches)})


MAX_FIGURE_CELLS = 128 * 128


def _figures(got: CheckOutput, expected: CheckOutput, mismatches: list[Mismatch]) -> tuple[Figure, ...]:
    """Differing 2-D outputs (up to 128 x 128) with the reference's, so reports can draw them."""
    figures = []
    for m in mismatches:
        g, e = got.arrays.get(m.name), expected.arrays.get(m.name)
        if g is not None and e is not None and g.ndim == 2 and g.shape == e.shape and g.size <= MAX_FIGURE_CELLS:
            figures.append(Figure(name=m.name, got=tuple(map(tuple, g.tolist())), expected=tuple(map(tuple, e.tolist()))))
    return tuple(figures)


def not_gradable(spec: CheckSpec, reason: str) -> CheckResult:
    return _result(spec, "not_gradable", reason, "", 0.0)


def _outcome_text(spec: CheckSpec, got: CheckOutput) -> str:
    if got.outcome == "timeout":
        if got.note:  # the host stopped the whole run, e.g. while the module was being imported
            return f"stopped: {got.note} (an endless loop or a very slow computation at the top level?)"
        return (f"did not finish within {spec.timeout_s:g} s: an endless loop, or far too slow "
                "(look for a while loop whose condition never changes)")
    if got.outcome == "oom":
        return "ran out of memory" + (f": {got.error.text()}" if got.error else "")
    if got.outcome == "error" and got.error is not None:
        return f"raised {got.error.text()}"
    return got.note or "no result"


def _result(spec: CheckSpec, status: CheckStatus, text: str, called: str, duration_ms: float) -> CheckResult:
    detail = "\n".join(x for x in (f"Called: {called}" if called and status != "passed" else "", text) if x)
    if status not in ("passed", "not_gradable") and spec.hint:
        detail += f"\nHint: {spec.hint}"
    if spec.public or status in ("passed", "not_gradable"):
        message = detail
    else:
        message = f"This {spec.visibility.replace('_', ' ')} check did not pass ({status}); its details are not shown."
    return CheckResult(
        id=spec.id, title=spec.title, status=status, score=spec.points if status == "passed" else 0.0,
        max_score=spec.points, visibility=spec.visibility, message=shown(message), detail=shown(detail),
        duration_ms=duration_ms,
    )
