"""Errors raised by the grader itself: faults in input, configuration or infrastructure.

A student's failing code is never an exception: it becomes a ``CheckResult`` with a
non-passing status. Only problems the *user of the grader* must fix raise.

    GraderError
    ├── SubmissionError        the file cannot be graded at all (load stage)
    ├── LocateError            a module's work or its rubric is not where we looked (tito, pytest plugin)
    ├── RubricError            the rubric file is invalid (rubric stage)
    ├── NoCourseSecret         official grading without a seed secret of the course's own (grader.secret)
    ├── ModuleUnitError        a course-module unit is missing, ambiguous or broken (grader.modules)
    ├── SandboxError           the sandbox could not be started or used (sandbox stage)
    │   └── SandboxUnavailable  the requested backend is not available on this machine
    ├── HarnessProtocolError   the trusted reference run produced unusable output (judge stage)
    ├── RosterError            the class roster cannot be used at all (batch, export, feedback)
    ├── DateError              a release date (rubric, --due-date, --publish-date) cannot be read
    ├── SelftestError          a self-test's sources or reviewed file are unusable (grader selftest)
    ├── StoreUnavailable       the service's database cannot be reached, even after retries
    ├── ServiceError           a service request that cannot be served (its HTTP status)
    │   ├── NotFound           404
    │   ├── Conflict           409
    │   ├── Invalid            422
    │   ├── RateLimited        429
    │   ├── TooLarge           413 (a request body over its route's limit)
    │   ├── Busy               503 (a queue is full: try again after Retry-After)
    │   └── Forbidden          403 (a page this user may not see)
    ├── SignInFirst            no valid session: the browser is sent to the sign-in page
    ├── LaunchRejected         an LTI launch that is refused (shown to the user, logged for staff)
    │   ├── NeedsStaff         a launch that links a new LMS course: course staff sign in first
    │   └── AddressRefused     a URL from outside names an address the tool may not connect to
    └── PassbackError          a score could not be sent to the LMS (retried, shown to staff)

Each also subclasses the builtin it resembles (``ValueError``, ``FileNotFoundError``,
``RuntimeError``), so callers that know nothing of the grader can still catch it.
"""

from __future__ import annotations


class GraderError(Exception):
    """Base of every error the grader raises on purpose; its message is shown to the user as is."""


class SubmissionError(GraderError, ValueError):
    """The submission file is unreadable, invalid, or over a limit."""


class LocateError(GraderError, FileNotFoundError):
    """The module's work (or its rubric) could not be found; the message says where we looked."""


class RubricError(GraderError, ValueError):
    """The rubric is missing, malformed or fails its schema."""


class SandboxError(GraderError, RuntimeError):
    """The sandbox could not run a job."""


class SandboxUnavailable(SandboxError):
    """The requested sandbox backend cannot run on this machine; the message says how to fix it."""


class NoCourseSecret(GraderError):
    """Official grading without a course seed secret of its own (grader.secret)."""


class ModuleUnitError(GraderError, ValueError):
    """A course-module unit is missing, ambiguous, or broken (grader.modules)."""


class HarnessProtocolError(GraderError, RuntimeError):
    """The trusted reference run failed; this is a fault of the grader or rubric, not the student."""


class RosterError(GraderError, ValueError):
    """The roster file cannot be used at all (unreadable, no header, no student id column)."""


class DateError(GraderError, ValueError):
    """A release date that cannot be read (grader.visibility)."""


class SelftestError(GraderError, ValueError):
    """A source to mutate or the reviewed equivalents file of ``grader selftest`` is unusable."""


class StoreUnavailable(GraderError, ConnectionError):
    """The database could not be reached, even after retries."""


class ServiceError(GraderError):
    """A request that cannot be served; ``status`` is its HTTP status."""

    status = 400

    def __init__(self, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class NotFound(ServiceError):
    status = 404


class Conflict(ServiceError):
    status = 409


class Invalid(ServiceError):
    status = 422


class RateLimited(ServiceError):
    status = 429


class TooLarge(ServiceError):
    status = 413


class Busy(ServiceError):
    status = 503


def os_reason(e: OSError) -> str:
    """An operating-system error in a few words, for a one-line message."""
    if isinstance(e, IsADirectoryError):
        return "it is a directory"
    if isinstance(e, NotADirectoryError | FileExistsError):  # FileExistsError: making a folder where a file is
        return "a part of the path is a file, not a folder"
    if isinstance(e, PermissionError):
        return "permission denied"
    return (e.strerror or str(e)).lower()


class Forbidden(ServiceError):
    status = 403


class SignInFirst(GraderError):
    """No valid session: the browser is sent to the sign-in page."""


class LaunchRejected(GraderError):
    """An LTI launch that is refused; the message is shown to the user and logged for staff."""


class AddressRefused(LaunchRejected):
    """A URL from outside (an LMS's registration) names a host whose address this tool may not
    connect to: loopback, link-local or private, unless ``lti.toml`` allows it."""


class NeedsStaff(LaunchRejected):
    """A launch that would link a new LMS course to a grader course, by an instructor whose LMS
    account is not linked to a staff account yet: they sign in with a staff token first, then the
    launch is mapped again (``/lti/staff-link``); ``then`` is where they go afterwards."""

    def __init__(self, message: str, then: str) -> None:
        super().__init__(message)
        self.then = then


class PassbackError(GraderError):
    """A score could not be sent to the LMS; the passback is retried and shown to staff."""
