"""Score stage (pure): sum the points of passed checks."""

from __future__ import annotations

from collections.abc import Sequence

from .models import CheckResult


def total(results: Sequence[CheckResult]) -> tuple[float, float]:
    """(points earned, points possible), rounded to avoid float noise in exports."""
    return round(sum(r.score for r in results), 6), round(sum(r.max_score for r in results), 6)
