"""Errors raised by the grader itself: faults in input, configuration or infrastructure.

A student's failing code is never an exception: it becomes a ``CheckResult`` with a
non-passing status. Only problems the *user of the grader* must fix raise.

    GraderError
    ├── SubmissionError        the file cannot be graded at all (load stage)
    ├── RubricError            the rubric file is invalid (rubric stage)
    ├── SandboxError           the sandbox could not be started or used (sandbox stage)
    │   └── SandboxUnavailable  the requested backend is not available on this machine
    ├── HarnessProtocolError   the trusted reference run produced unusable output (judge stage)
    └── SelftestError          a self-test's sources or reviewed file are unusable (grader selftest)
"""

from __future__ import annotations


class GraderError(Exception):
    """Base of every error the grader raises on purpose; its message is shown to the user as is."""


class SubmissionError(GraderError, ValueError):
    """The submission file is unreadable, invalid, or over a limit."""


class RubricError(GraderError, ValueError):
    """The rubric is missing, malformed or fails its schema."""


class SandboxError(GraderError, RuntimeError):
    """The sandbox could not run a job."""


class SandboxUnavailable(SandboxError):
    """The requested sandbox backend cannot run on this machine; the message says how to fix it."""


class ModuleUnitError(GraderError, ValueError):
    """A course-module unit is missing, ambiguous, or broken (grader.modules)."""


class HarnessProtocolError(GraderError, RuntimeError):
    """The trusted reference run failed; this is a fault of the grader or rubric, not the student."""


class SelftestError(GraderError, ValueError):
    """A source to mutate or the reviewed equivalents file of ``grader selftest`` is unusable."""
