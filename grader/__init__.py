"""TinyTorch autograder: differential, sandboxed grading of course notebooks.

Public names are imported lazily, so ``grader.cli`` and the sandbox harness start fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "CheckResult": "models", "GradeReport": "models", "Grader": "standalone", "grade": "standalone",
    "GraderError": "errors", "RubricError": "errors", "SandboxError": "errors",
    "SandboxUnavailable": "errors", "SubmissionError": "errors",
}

__all__ = [
    "CheckResult", "GradeReport", "Grader", "GraderError", "RubricError", "SandboxError",
    "SandboxUnavailable", "SubmissionError", "__version__", "grade",
]

if TYPE_CHECKING:
    from .errors import GraderError, RubricError, SandboxError, SandboxUnavailable, SubmissionError
    from .models import CheckResult, GradeReport
    from .standalone import Grader, grade


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
