"""The one place where the service calls the grading core, through the core's one door.

``grade_file`` is the service's only entry into ``grader`` proper: everything else in the service
handles files, rows and messages. The process keeps one grading ``Session`` per policy (official
or practice): its sandboxes and reference workers start once, not per submission, and are shared
by the worker's threads; ``close_graders`` ends them at shutdown.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ..models import GradeReport
from ..rubric import Rubric
from ..session import Session

_sessions: dict[bool, Session] = {}
_lock = threading.Lock()


def grade_file(path: Path, rubric: Rubric, *, backend: str = "local", official: bool = True,
               seed_secret: bytes | None = None) -> GradeReport:
    """Grade one submission file with ``rubric`` in a sandbox of ``backend`` ("local" or "docker"),
    the hidden checks' inputs drawn from ``seed_secret`` (the course's, grader.secret).

    Raises SubmissionError if the file cannot be read, GraderError for faults of the grading side."""
    with _lock:
        session = _sessions.get(official)
        if session is None:
            session = _sessions[official] = Session(official=official)
    return session.grader(rubric, backend=backend, seed_secret=seed_secret).grade(path)


def close_graders() -> None:
    """Close the sessions (their sandboxes and reference workers) at worker shutdown."""
    with _lock:
        sessions = list(_sessions.values())
        _sessions.clear()
    for session in sessions:
        session.close()
