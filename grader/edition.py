"""Which of the two distributions this install is: ``staff`` (tinytorch-grader, everything) or
``student`` (tinytorch-grader-student: no reference solutions, no hidden checks, no staff tools;
public checks graded against shipped expected outputs). grader/dist/build.py writes ``student``
here when it builds the student wheel; the source tree is the staff edition."""

from __future__ import annotations

EDITION: str = "staff"
STUDENT = EDITION == "student"
BACKENDS: tuple[str, ...] = ("local",) if STUDENT else ("local", "docker")
# The footer of every practice run, in one place: who gives the official grade.
PRACTICE_NOTE = ("practice run: the public checks, compared with the expected outputs shipped with the student "
                 "package; your official grade comes from the course staff" if STUDENT else
                 "practice run (local backend): your official grade comes from the course staff, who grade in the "
                 "course's Docker sandbox")
STAFF_ONLY = "is part of the staff package (tinytorch-grader), not of the student package"
