"""Moodle grade import CSV (docs/FORMATS.md, "Moodle"), in the layout of Moodle's own export:

    First name,Surname,ID number,Institution,Department,Email address,
    Assignment: <name> (Real),Feedback: <name>

A submission the grader failed on has a blank grade cell (an import keeps the grade it had).
The teacher maps users by ``Email address`` (kept exactly as in the roster: Moodle compares it
case-sensitively) or ``ID number`` (the roster's ``sis_user_id``, else the student id). The grade
and feedback columns always travel together (a feedback column alone wipes grades). Feedback is
the student-safe summary, HTML-escaped because Moodle renders feedback as HTML.
"""

from __future__ import annotations

from html import escape
from pathlib import PurePosixPath

from ..feedback.view import student_view, summary_text
from .base import ExportFile, Gradebook, GradeRow, csv_text, points


class MoodleExporter:
    name = "moodle"
    default_name = "moodle.csv"
    per_submission = False

    def render(self, book: Gradebook) -> list[ExportFile]:
        name = " ".join(book.assignment.split())
        rows = [["First name", "Surname", "ID number", "Institution", "Department", "Email address",
                 f"Assignment: {name} (Real)", f"Feedback: {name}"]]
        for row in book.rows:
            first, last = row.first_last
            r = row.roster
            rows.append([first, last, (r.sis_user_id if r else "") or row.student_id,
                         r.institution if r else "", r.department if r else "", row.email,
                         "" if row.blank else points(row.score), escape(feedback(row, book), quote=False)])
        return [ExportFile(PurePosixPath(self.default_name), csv_text(rows))]


def feedback(row: GradeRow, book: Gradebook) -> str:
    if row.result is None:
        return "No submission was received."
    return summary_text(student_view(row.result, book.rubric, release=book.release))
