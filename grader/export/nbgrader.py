"""nbgrader-compatible CSV, as ``nbgrader export`` and TinyTorch's ``tito grade export`` write it
(docs/FORMATS.md, "nbgrader"):

    assignment,duedate,timestamp,student_id,last_name,first_name,email,raw_score,
    late_submission_penalty,score,max_score

One row per student. This grader applies no late penalty (0), so ``score = max(0, raw_score -
late_submission_penalty)`` equals the stored score. A missing submission has score 0 and an empty
timestamp; one the grader failed on has blank score cells. Numbers are written as nbgrader writes them (``str(float)``: "82.0").
"""

from __future__ import annotations

from pathlib import PurePosixPath

from .base import ExportFile, Gradebook, csv_text

COLUMNS = ("assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email", "raw_score",
           "late_submission_penalty", "score", "max_score")


class NbgraderExporter:
    name = "nbgrader"
    default_name = "nbgrader.csv"
    per_submission = False

    def render(self, book: Gradebook) -> list[ExportFile]:
        rows: list[list[str]] = [list(COLUMNS)]
        for row in book.rows:
            first, last = row.first_last
            raw, penalty = row.score, 0.0
            scores = ["", "", ""] if row.blank else [str(float(raw)), str(penalty), str(max(0.0, raw - penalty))]
            rows.append([book.assignment, book.due_date, row.submitted_at, row.student_id,
                         last, first, row.email, *scores, str(float(book.max_score))])
        return [ExportFile(PurePosixPath(self.default_name), csv_text(rows))]
