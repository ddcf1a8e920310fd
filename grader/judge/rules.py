"""What a course-module unit gives the judge: its comparators, diagnoses and applicability
tests, by name, valid within that unit only (two units may use the same names)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..channel import CheckOutput
from .compare import Diagnosis, Mismatch

Comparator = Callable[[CheckOutput, CheckOutput, dict[str, Any]], list[Mismatch]]
ErrorCause = Callable[[CheckOutput, dict[str, Any]], "str | None"]
Generation = Callable[[Mapping[str, CheckOutput]], "str | None"]
CrashMeaning = Callable[[str, str, dict[str, Any]], "str | None"]
NotApplicable = Callable[[CheckOutput], "str | None"]
SourceGeneration = Callable[[Sequence[str]], "str | None"]
GENERIC_COMPARATOR = "match"  # every output equal to the reference's within the check's tolerances


@dataclass(frozen=True)
class JudgeRules:
    """A course-module unit's judging rules (its ``judge`` package), keyed within that unit only.

    ``comparators``: named comparisons a rubric check may choose instead of ``match``.
    ``diagnoses``: likely-cause finders, by probe name or check id (or a check's ``diagnosis``).
    ``not_applicable``: comparators that first ask whether the check applies to the submission
    at all; one that does not apply passes with a note saying why (every generation of a course
    is graded out of the same total).
    ``error_cause``: a likely cause for any check whose probe raised (outcome ``error``), read from
    the error and the inputs (say, a table of the wrong shape); None when the error does not tell.
    ``generation``: the course generation (one of the rubric's ``generations``) a submission is
    written for, read from every check's outputs; None when they do not tell.
    ``crash_meaning``: what an exception a valid call raised means for this module, read from its
    class, its message and the check's inputs (grader.judge.crash); None to leave it to the core.
    ``source_generation``: the course generation a correct source (the code cells of a golden
    notebook or a solution file) is written for, read from its code; ``grader selftest --mutants``
    tallies its kill rates per generation with it. None: every source is the rubric's first one."""

    comparators: dict[str, Comparator] = field(default_factory=dict)
    diagnoses: dict[str, Diagnosis] = field(default_factory=dict)
    not_applicable: dict[str, NotApplicable] = field(default_factory=dict)
    error_cause: ErrorCause | None = None
    generation: Generation | None = None
    crash_meaning: CrashMeaning | None = None
    source_generation: SourceGeneration | None = None

    def comparator_names(self) -> set[str]:
        return {GENERIC_COMPARATOR, *self.comparators, *self.not_applicable}
