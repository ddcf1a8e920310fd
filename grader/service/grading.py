"""The one place where the service calls the grading core.

``grade_file`` is the service's only entry into ``grader`` proper (its public ``Grader.grade``):
everything else in the service handles files, rows and messages. Each thread keeps one warm
``Grader`` per (rubric, backend), so a worker pays the sandbox's and the reference worker's
start-up once, not per submission; ``close_graders`` ends them at shutdown.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ..grade import Grader
from ..models import GradeReport
from ..rubric import Rubric

MAX_PER_THREAD = 4  # rubrics x backends kept warm per thread; the least recently used is closed
_local = threading.local()
_all: list[Grader] = []
_all_lock = threading.Lock()


def grade_file(path: Path, rubric: Rubric, *, backend: str = "local", official: bool = True) -> GradeReport:
    """Grade one submission file with ``rubric`` in a sandbox of ``backend`` ("local" or "docker").

    Raises SubmissionError if the file cannot be read, GraderError for faults of the grading side."""
    graders: dict[tuple[str, str, bool], Grader] = _local.__dict__.setdefault("graders", {})
    key = (rubric.sha256, backend, official)
    grader = graders.pop(key, None)
    if grader is None:
        grader = Grader(rubric, backend, official=official)
        with _all_lock:
            _all.append(grader)
    graders[key] = grader  # most recently used last
    while len(graders) > MAX_PER_THREAD:
        _close(graders.pop(next(iter(graders))))
    return grader.grade(path)


def _close(grader: Grader) -> None:
    with _all_lock:
        _all.remove(grader)
    grader.close()


def close_graders() -> None:
    """Close every warm grader of every thread (at worker shutdown)."""
    with _all_lock:
        graders, _all[:] = list(_all), []
    for grader in graders:
        grader.close()
    _local.__dict__.pop("graders", None)
