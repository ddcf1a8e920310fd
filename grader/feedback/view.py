"""What a student may see of a stored result: the one place where feedback is made student-safe.

The renderers (HTML, Markdown, the Gradescope and Moodle exports) only ever receive a
``StudentView``, so they cannot leak what it does not hold: no ``detail``, no figures of a
non-visible check, no reason text for a fault of the grader.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..batch.store import ResultStatus, StoredResult
from ..models import CheckStatus, Figure, Visibility
from ..report import _notes as extraction_notes
from ..rubric import Rubric

RELEASE: dict[Visibility, str] = {
    "visible": "shown now",
    "after_due_date": "released after the due date",
    "after_published": "released when grades are published",
    "hidden": "never released to students",
}

STATUS_TEXT: dict[CheckStatus, str] = {
    "passed": "passed", "failed": "failed", "error": "raised an error", "timeout": "timed out",
    "crashed": "crashed", "oom": "ran out of memory", "not_gradable": "not gradable",
}

NOT_GRADED_BY_US = ("Your submission could not be graded because of a problem on the grading side, not in "
                    "your work. Your instructor has been told and will grade it again.")


@dataclass(frozen=True)
class CheckView:
    """One check as the student sees it; ``figures`` is always empty for a non-visible check."""

    id: str
    title: str
    status: CheckStatus
    score: float
    max_score: float
    visibility: Visibility
    message: str
    figures: tuple[Figure, ...]

    @property
    def visible(self) -> bool:
        return self.visibility == "visible"

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
    score: float | None
    max_score: float
    checks: tuple[CheckView, ...]
    notes: tuple[str, ...]
    practice: bool

    @property
    def withheld(self) -> dict[Visibility, int]:
        """How many checks are not shown in detail, by when they are released."""
        counts = Counter(c.visibility for c in self.checks if not c.visible)
        return {v: counts[v] for v in ("after_due_date", "after_published", "hidden") if counts[v]}

    @property
    def failed_visible(self) -> tuple[CheckView, ...]:
        """The visible checks the student should fix (none when nothing could be graded)."""
        if self.score is None:
            return ()
        return tuple(c for c in self.checks if c.visible and not c.passed)


def student_view(result: StoredResult, rubric: Rubric | None, *, name: str = "") -> StudentView:
    """Project a stored result onto what its student may see."""
    report = result.report
    assignment = rubric.title if rubric is not None else (report.rubric_id if report else "")
    if report is None:
        text = (f"Your submission could not be graded: {result.reason}" if result.status == "invalid"
                else NOT_GRADED_BY_US)
        checks = tuple(CheckView(c.id, c.title, "not_gradable", 0.0, c.points, c.visibility, "", ())
                       for c in (rubric.checks if rubric is not None else ()))
        return StudentView(result.student_id, name or result.name, result.file_name, assignment, result.status,
                           text, None, rubric.max_score if rubric is not None else 0.0, checks, (), False)
    checks = tuple(
        CheckView(c.id, c.title, c.status, c.score, c.max_score, c.visibility, c.message,
                  c.figures if c.visibility == "visible" else ())
        for c in report.checks
    )
    return StudentView(result.student_id, name or result.name, result.file_name, assignment, result.status, "",
                       result.score, report.max_score, checks, tuple(extraction_notes(report)),
                       report.backend.label == "practice")


def withheld_sentence(view: StudentView) -> str:
    """e.g. "2 checks are not shown in detail: 1 released after the due date, 1 never released to students.\""""
    withheld = view.withheld
    total = sum(withheld.values())
    if not total:
        return ""
    parts = ", ".join(f"{n} {RELEASE[v]}" for v, n in withheld.items())
    return f"{total} check{'s are' if total > 1 else ' is'} not shown in detail: {parts}."


def summary_text(view: StudentView, *, practice_note: bool = True) -> str:
    """One short plain-text paragraph for an LMS comment box (Moodle feedback, Gradescope output)."""
    if view.score is None:
        return view.status_text
    missed = [c.id for c in view.failed_visible]
    lines = [f"Score: {_pts(view.score)}/{_pts(view.max_score)}."]
    lines.append(f"Checks to fix: {', '.join(missed)}." if missed else "Every check shown in detail passed.")
    if withheld := withheld_sentence(view):
        lines.append(withheld)
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
