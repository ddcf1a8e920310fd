"""What every export is built from: a ``Gradebook`` of stored results joined with the roster.

Scores are copied from the stored reports, never recomputed. A student in the roster without a
submission is a row with status ``missing`` and score 0; an ``invalid`` submission is a row with
score 0; a ``failed_to_grade`` one (the grader's fault, not the student's) has a blank score cell
in every format, because an LMS import overwrites a score with whatever the cell holds. Nothing
is dropped: every oddity is listed in ``Gradebook.problems``.

A submission joins a roster student by exact identity: the same student id, or, for a submission
filed under its submitter's e-mail (a Gradescope export without SIDs), the same full e-mail
address (case-insensitive). Never by a local part or a name. Two submissions claiming one roster
student are ``Gradebook.conflicts``: the export command refuses to write a gradebook with any.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Literal, Protocol

from ..models import Visibility, shown
from ..results.record import StoredResult, is_late
from ..results.roster import Roster, RosterEntry, match_roster, split_name
from ..rubric import Rubric
from ..visibility import Release, parse_date

RowStatus = Literal["graded", "invalid", "failed_to_grade", "missing"]


@dataclass(frozen=True)
class ExportFile:
    """One file of an export; ``path`` is relative to the export's destination folder."""

    path: PurePosixPath
    text: str


class Exporter(Protocol):
    """One gradebook format. ``render`` is pure; the command writes the files."""

    name: str
    default_name: str  # file (or, for per-submission formats, folder) name under RESULTS_DIR/exports
    per_submission: bool  # True: ``render`` returns a folder of files; --out names that folder

    def render(self, book: Gradebook) -> list[ExportFile]: ...


@dataclass(frozen=True)
class CheckColumn:
    id: str
    title: str
    points: float
    visibility: Visibility


@dataclass(frozen=True)
class GradeRow:
    student_id: str
    status: RowStatus
    score: float  # the stored score; 0 unless graded
    max_score: float
    roster: RosterEntry | None
    result: StoredResult | None

    @property
    def name(self) -> str:
        return (self.roster.name if self.roster else "") or (self.result.name if self.result else "")

    @property
    def first_last(self) -> tuple[str, str]:
        if self.roster is not None and (self.roster.first_name or self.roster.last_name):
            return self.roster.first_name, self.roster.last_name
        return split_name(self.name) if self.name else ("", "")

    @property
    def email(self) -> str:
        return (self.roster.email if self.roster else "") or (self.result.email if self.result else "")

    @property
    def submitted_at(self) -> str:
        return self.result.submitted_at if self.result else ""

    @property
    def file_name(self) -> str:
        return self.result.file_name if self.result else ""

    @property
    def reason(self) -> str:
        return self.result.reason if self.result else ""

    @property
    def blank(self) -> bool:
        """True when the score cell stays empty: the grader failed, so there is no score to import."""
        return self.status == "failed_to_grade"

    @property
    def status_text(self) -> str:
        """One line: what happened to this student's submission (staff wording)."""
        reason = " ".join(self.reason.split())
        return {
            "graded": "graded",
            "missing": "no submission",
            "invalid": f"invalid submission: {reason}",
            "failed_to_grade": f"could not be graded: {reason}",
        }[self.status]

    def check_scores(self) -> dict[str, float]:
        report = self.result.report if self.result else None
        return {c.id: c.score for c in report.checks} if report else {}


@dataclass(frozen=True)
class Gradebook:
    assignment: str
    max_score: float
    checks: tuple[CheckColumn, ...]
    rows: tuple[GradeRow, ...]
    problems: tuple[str, ...] = ()
    rubric: Rubric | None = None
    canvas_assignment_id: str = ""
    due_date: str = ""
    conflicts: tuple[str, ...] = ()
    with_roster: bool = False
    canvas_ids: Mapping[str, str] = field(default_factory=dict)  # student id -> Canvas user id from the download
    release: Release = field(default_factory=Release)  # what students may see now (student-facing feedback)
    canvas_columns: tuple[tuple[str, str], ...] = ()  # a Canvas roster's assignment columns: (name, id)
    late: frozenset[str] = frozenset()  # student ids handed in after the due date, or flagged late by the LMS

    @property
    def missing(self) -> list[str]:
        """Roster students without a result."""
        return [row.student_id for row in self.rows if row.status == "missing"]

    @property
    def unmatched(self) -> list[str]:
        """Results that no roster student claims (none without a roster)."""
        return [row.student_id for row in self.rows if row.roster is None and self.with_roster]


def build_gradebook(results: Iterable[StoredResult], *, rubric: Rubric | None, roster: Roster | None = None,
                    assignment: str = "", canvas_assignment_id: str = "", due_date: str = "",
                    canvas_ids: Mapping[str, str] | None = None, release: Release | None = None,
                    flagged_late: Collection[str] = ()) -> Gradebook:
    """Join stored results with the roster (pure). Rows: roster order, then submissions not in it.
    A row is late when the LMS flagged it (``flagged_late``) or it was handed in after the due date
    (``release``'s, else ``due_date``)."""
    stored = sorted(results, key=lambda r: r.student_id)
    checks = _columns(stored, rubric)
    max_score = (rubric.max_score if rubric is not None
                 else max((r.max_score or 0.0 for r in stored), default=0.0))
    problems = list(roster.problems) if roster is not None else []
    if not stored:
        problems.append("no results are stored yet: run 'grader batch SOURCE --out RESULTS_DIR' first")
    by_id = {r.student_id: r for r in stored}
    rows: list[GradeRow] = []
    conflicts: list[str] = []
    if roster is not None:
        missing = []
        for entry, claims in match_roster(roster, by_id):
            if len(claims) > 1:
                conflicts.append(f"submissions filed as {' and '.join(repr(r.student_id) for r in claims)} both claim "
                                 f"roster student {entry.student_id!r} (line {entry.line}); neither is exported")
            result = claims[0] if len(claims) == 1 else None
            if not claims:
                missing.append(entry.student_id)
            rows.append(_row(entry.student_id, result, entry, max_score))
        if missing:
            problems.append(f"{len(missing)} student(s) in the roster have no submission; exported with 0 and "
                            f"status 'missing': {', '.join(missing)}")
        if by_id:
            problems.append(f"{len(by_id)} submission(s) have no roster entry (unknown id); exported with the "
                            f"identity their submission gives: {', '.join(by_id)}")
    rows += [_row(sid, result, None, max_score) for sid, result in by_id.items()]
    for row in rows:
        if row.status == "invalid":
            problems.append(f"{row.student_id}: exported with 0 because it was not graded ({row.status_text})")
        elif row.blank:
            problems.append(f"{row.student_id}: exported with a blank score, not 0, because the grader failed "
                            f"({row.status_text}); grade it again, then export again")
    if rubric is not None:
        stale = [r.student_id for r in stored if r.report is not None and r.report.rubric_hash != rubric.sha256]
        if stale:
            problems.append(f"{len(stale)} result(s) were graded with another version of the rubric: "
                            f"{', '.join(stale)}; run the batch again to regrade them")
    title = assignment or (rubric.title if rubric is not None else "") or "Assignment"
    release = release or Release()
    due = release.due_date or (parse_date(due_date, "due date") if due_date else None)
    late = frozenset(row.student_id for row in rows if row.result is not None
                     and is_late(row.result, due, flagged_late))
    return Gradebook(title, max_score, checks, tuple(rows), tuple(problems), rubric, canvas_assignment_id, due_date,
                     tuple(conflicts), roster is not None, dict(canvas_ids or {}), release,
                     roster.assignments if roster is not None else (), late)


def _row(student_id: str, result: StoredResult | None, entry: RosterEntry | None, max_score: float) -> GradeRow:
    if result is None:
        return GradeRow(student_id, "missing", 0.0, max_score, entry, None)
    if result.status == "graded" and result.score is not None:
        return GradeRow(student_id, "graded", result.score, result.max_score or max_score, entry, result)
    status: RowStatus = "invalid" if result.status == "invalid" else "failed_to_grade"
    return GradeRow(student_id, status, 0.0, max_score, entry, result)


def _columns(stored: Sequence[StoredResult], rubric: Rubric | None) -> tuple[CheckColumn, ...]:
    if rubric is not None:
        return tuple(CheckColumn(c.id, c.title, c.points, c.visibility) for c in rubric.checks)
    report = next((r.report for r in stored if r.report is not None), None)
    return tuple(CheckColumn(c.id, c.title, c.max_score, c.visibility) for c in report.checks) if report else ()


# ---- helpers shared by the CSV formats --------------------------------------------------------

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def text_cell(value: str) -> str:
    """A cell for a spreadsheet: one line without control characters (``shown``), and never a
    formula (a leading = + - @ gets a quote, unless the cell is a number or a dash placeholder
    such as Otter's "--")."""
    value = shown(" ".join(value.split()), one_line=True)
    if not value.startswith(_FORMULA_START) or value.strip("-") == "" or _is_number(value):
        return value
    return "'" + value


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def points(x: float) -> str:
    """87.5 -> "87.5", 100.0 -> "100", 1/3 -> "0.3333"."""
    text = f"{x:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def csv_text(rows: Iterable[Sequence[str]]) -> str:
    """RFC 4180 CSV: minimal quoting (commas, quotes), CRLF line ends, UTF-8 when written. Every
    cell goes through ``text_cell``: names, ids and error text can come from students."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_MINIMAL, lineterminator="\r\n")
    writer.writerows([text_cell(cell) for cell in row] for row in rows)
    return buffer.getvalue()
