"""What a student may see of a stored result: the one place where feedback is made student-safe.

The renderers (HTML, Markdown, the Moodle feedback, the Gradescope summary) only ever receive a
``StudentView``, so they cannot leak what it does not hold: nothing at all of a hidden check or of
one not released yet (grader.visibility), no reason text for a fault of the grader. Its total is
the points of the checks it shows, and says so when other checks count.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

from ..models import CheckStatus, Figure, Visibility
from ..report import coverage
from ..report import notes as extraction_notes
from ..results.record import ResultStatus, StoredResult
from ..rubric import Rubric
from ..visibility import Release

RELEASE: dict[Literal["after_due_date", "after_published"], str] = {
    "after_due_date": "after the due date",
    "after_published": "when scores are published",
}

STATUS_TEXT: dict[CheckStatus, str] = {
    "passed": "passed", "failed": "failed", "error": "raised an error", "timeout": "timed out",
    "crashed": "crashed", "oom": "ran out of memory", "not_gradable": "not gradable",
}

LATE = "This submission was handed in after the due date."
NOT_GRADED_BY_US = ("Your submission could not be graded because of a problem on the grading side, not in "
                    "your work. Your instructor has been told and will grade it again.")



@dataclass(frozen=True)
class CheckView:
    """One check the student may see now (a hidden or not yet released check has no view at all)."""

    id: str
    title: str
    status: CheckStatus
    score: float
    max_score: float
    visibility: Visibility
    message: str
    figures: tuple[Figure, ...]

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass(frozen=True)
class StudentView:
    student_id: str
    name: str
    file_name: str
    assignment: str
    status: ResultStatus
    status_text: str  # student-safe explanation when not graded, else ""
    score: float | None  # the points of the checks shown (None when nothing could be graded)
    max_score: float  # the points possible of the checks shown
    checks: tuple[CheckView, ...]
    notes: tuple[str, ...]
    practice: bool
    pending: tuple[tuple[Literal["after_due_date", "after_published"], int], ...] = ()  # checks released later: (when, how many)
    partial: bool = False  # some checks are not shown, so the total is not the final score
    unseen: tuple[int, float] = (0, 0.0)  # the checks not shown: how many, and their points
    final_max: float = 0.0  # the points possible of every check: what the gradebook's score is out of
    late: bool = False  # handed in after the due date, or flagged late by the LMS

    @property
    def late_text(self) -> str:
        return LATE if self.late else ""

    @property
    def failed_visible(self) -> tuple[CheckView, ...]:
        """The shown checks the student should fix (none when nothing could be graded)."""
        if self.score is None:
            return ()
        return tuple(c for c in self.checks if not c.passed)


def student_view(result: StoredResult, rubric: Rubric | None, *, name: str = "",
                 release: Release | None = None, late: bool = False) -> StudentView:
    """Project a stored result onto what its student may see now (``release``: the due and
    publish dates; by default only ``visible`` checks are shown; ``late``: handed in late)."""
    release = release if release is not None else Release()
    report = result.report
    assignment = rubric.title if rubric is not None else (report.rubric_id if report else "")
    specs = [(c.id, c.title, c.points, c.visibility) for c in (rubric.checks if rubric is not None else ())]
    if report is not None:
        specs = [(c.id, c.title, c.max_score, c.visibility) for c in report.checks]
    pending = Counter(v for *_, v in specs if v != "hidden" and not release.shows(v))
    partial = any(not release.shows(v) for *_, v in specs)
    unseen_specs = [p for *_, p, v in specs if not release.shows(v)]
    unseen, final_max = (len(unseen_specs), float(sum(unseen_specs))), float(sum(p for *_, p, _v in specs))
    waiting = tuple((v, pending[v]) for v in RELEASE if pending[v])
    if report is None:
        text = (f"Your submission could not be graded: {result.reason}" if result.status == "invalid"
                else NOT_GRADED_BY_US)
        checks = tuple(CheckView(i, t, "not_gradable", 0.0, p, v, "", ()) for i, t, p, v in specs if release.shows(v))
        return StudentView(result.student_id, name or result.name, result.file_name, assignment, result.status, text,
                           None, sum(c.max_score for c in checks), checks, (), False, waiting, partial, unseen, final_max,
                           late)
    shown_checks = tuple(  # a released check shows its full diagnosis, as a visible one does
        CheckView(c.id, c.title, c.status, c.score, c.max_score, c.visibility,
                  c.message if c.visibility == "visible" else c.detail, c.figures)
        for c in report.checks if release.shows(c.visibility))
    return StudentView(result.student_id, name or result.name, result.file_name, assignment, result.status, "",
                       sum(c.score for c in shown_checks), sum(c.max_score for c in shown_checks), shown_checks,
                       tuple(extraction_notes(report)), report.backend.label == "practice", waiting, partial, unseen,
                       final_max, late)


def withheld_sentence(view: StudentView) -> str:
    """e.g. "Not shown yet: 1 check, released after the due date.\"" (hidden checks are not counted)."""
    if not view.pending:
        return ""
    parts = ", ".join(f"{n} check{'s' if n > 1 else ''}, released {RELEASE[v]}" for v, n in view.pending)
    return f"Not shown yet: {parts}."


def total_note(view: StudentView) -> str:
    """What the total covers, when it is not the final score."""
    if not view.partial or view.score is None:
        return ""
    return coverage(view.score, view.max_score, len(view.checks), *view.unseen, view.final_max)


def summary_text(view: StudentView, *, practice_note: bool = True) -> str:
    """One short plain-text paragraph for an LMS comment box (Moodle feedback, Gradescope output)."""
    if view.score is None:
        return " ".join(filter(None, (view.status_text, view.late_text)))
    missed = [c.id for c in view.failed_visible]
    shown = "checks shown" if view.partial else "checks"
    lines = [f"Score on the {shown}: {_pts(view.score)}/{_pts(view.max_score)}."]  # the coverage sentence follows
    lines.append(f"Checks to fix: {', '.join(missed)}." if missed else f"Every one of the {shown} passed.")
    if note := total_note(view):
        lines.append(note)
    if withheld := withheld_sentence(view):
        lines.append(withheld)
    if view.late:
        lines.append(LATE)
    if view.practice and practice_note:
        lines.append("Practice run: not the official sandbox.")
    return " ".join(lines)


def message_parts(message: str, status: CheckStatus = "failed") -> list[tuple[str, str]]:
    """Split a check message into labelled parts: "Input", "Expected vs got" (for a failed check;
    "What happened" otherwise), "Likely cause", "Hint". An indented line continues the part before
    it (a multi-line array in the input)."""
    outcome = "Expected vs got" if status == "failed" else "What happened"
    labels = {"Called: ": "Input", "Likely cause: ": "Likely cause", "Hint: ": "Hint"}
    parts: list[tuple[str, list[str]]] = []
    for line in message.splitlines():
        label = next((name for prefix, name in labels.items() if line.startswith(prefix)), None)
        if label is not None:
            parts.append((label, [line.split(": ", 1)[1]]))
        elif parts and (line[:1].isspace() or parts[-1][0] == outcome):
            parts[-1][1].append(line)
        else:
            parts.append((outcome, [line]))
    return [(label, "\n".join(lines)) for label, lines in parts]


def _pts(x: float) -> str:
    return f"{x:g}"
