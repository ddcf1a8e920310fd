"""TinyTorch autograder: differential, sandboxed grading of course notebooks."""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import GraderError, RubricError, SandboxError, SandboxUnavailable, SubmissionError  # noqa: E402
from .grade import Grader, grade  # noqa: E402
from .models import CheckResult, GradeReport  # noqa: E402

__all__ = [
    "CheckResult", "GradeReport", "Grader", "GraderError", "RubricError", "SandboxError",
    "SandboxUnavailable", "SubmissionError", "__version__", "grade",
]
