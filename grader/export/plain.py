"""The plain CSV: one row per student with everything the other formats drop, for staff.

    student_id,name,email,section,status,score,max_score,percent,submitted_at,late,file,reason,<check ids>

``status`` is graded | invalid | failed_to_grade | missing; ``reason`` says why a submission was
not graded. Per-check cells are empty when the submission was not graded, and the score and
percent too when the grader failed (``failed_to_grade``). ``late`` is ``yes`` for a submission handed
in after the due date or flagged late by the LMS, else empty.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from .base import ExportFile, Gradebook, csv_text, points

COLUMNS = ("student_id", "name", "email", "section", "status", "score", "max_score", "percent", "submitted_at",
           "late", "file", "reason")


class PlainCsvExporter:
    name = "csv"
    default_name = "grades.csv"
    per_submission = False

    def render(self, book: Gradebook) -> list[ExportFile]:
        rows = [[*COLUMNS, *(c.id for c in book.checks)]]
        for row in book.rows:
            scores = row.check_scores()
            percent = 100.0 * row.score / row.max_score if row.max_score else 0.0
            rows.append([row.student_id, row.name, row.email,
                         row.roster.section if row.roster else "", row.status, "" if row.blank else points(row.score),
                         points(row.max_score), "" if row.blank else points(round(percent, 2)), row.submitted_at,
                         "yes" if row.student_id in book.late else "", row.file_name, row.reason,
                         *(points(scores[c.id]) if c.id in scores else "" for c in book.checks)])
        return [ExportFile(PurePosixPath(self.default_name), csv_text(rows))]
