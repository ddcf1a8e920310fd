"""Otter-Grader ``final_grades.csv`` (docs/FORMATS.md, "Otter"), shaped like ``otter grade`` writes it:

    file,<check ids, sorted>,total_points_earned,percent_correct,grading_status
    points-per-question,<each check's points>,<max score>,1.0,--

``percent_correct`` is a fraction rounded to 4 digits, as Otter writes it; ``grading_status`` is
``Completed`` or the error text (every check 0;
every score cell blank when the grader itself failed). ``file`` is the submitted file name, prefixed by
the student id when the name alone does not say whose it is (nbgrader and Gradescope layouts);
a roster student without a submission is a row named by their id with status "no submission".
Rows after the first are sorted by ``file``, as Otter sorts them.
"""

from __future__ import annotations

from pathlib import PurePath, PurePosixPath

from .base import ExportFile, Gradebook, GradeRow, csv_text

POINTS_ROW = "points-per-question"


def file_label(row: GradeRow) -> str:
    if not row.file_name:
        return row.student_id
    return row.file_name if PurePath(row.file_name).stem == row.student_id else f"{row.student_id}/{row.file_name}"


class OtterExporter:
    name = "otter"
    default_name = "final_grades.csv"
    per_submission = False

    def render(self, book: Gradebook) -> list[ExportFile]:
        checks = sorted(book.checks, key=lambda c: c.id)
        header = ["file", *(c.id for c in checks), "total_points_earned", "percent_correct", "grading_status"]
        rows = [header, [POINTS_ROW, *(str(float(c.points)) for c in checks), str(float(book.max_score)), "1.0", "--"]]
        body = []
        for row in book.rows:
            scores = row.check_scores()
            percent = round(row.score / book.max_score, 4) if book.max_score else 0.0
            status = "Completed" if row.status == "graded" else row.status_text
            cells = [""] * (len(checks) + 2) if row.blank else \
                [*(str(float(scores.get(c.id, 0.0))) for c in checks), str(float(row.score)), str(float(percent))]
            body.append([file_label(row), *cells, status])
        rows += sorted(body, key=lambda r: r[0])
        return [ExportFile(PurePosixPath(self.default_name), csv_text(rows))]
