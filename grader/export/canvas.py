"""Canvas gradebook import CSV (docs/FORMATS.md, "Canvas").

    Student,ID,SIS User ID,SIS Login ID,Section,<Assignment> (<canvas_assignment_id>)
    Points Possible,,,,,100.00
    "Doe, Jane",98765,s1234567,jdoe,CS249r-01,87.5

Identities come from the roster (``canvas_id``, ``sis_user_id``, ``sis_login_id``, ``section``);
``ID`` falls back to the Canvas user id a Canvas download gave the submission. The assignment's
id is ``--canvas-assignment-id``, else the Canvas roster's column of the assignment's name; without
one the header has no ``(id)`` and Canvas creates a new assignment (said as a problem). Canvas
has no status column: an invalid submission holds 0, one the grader failed on holds a blank cell
(Canvas leaves its score alone), and their status is in the command's report and the plain CSV.

Canvas matches a row without an id by its name. With a roster, a submission that no roster
student's id or e-mail claims is left out: its only name is the one the submission itself gives,
so a throw-away account named like a classmate would overwrite that classmate's score.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from .base import ExportFile, Gradebook, GradeRow, csv_text, points

IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


def assignment_column(book: Gradebook) -> tuple[str, str, str | None]:
    """The assignment column's (name, Canvas assignment id, problem). The id is the one given, else
    the one of the Canvas roster's column of the same name (its gradebook export names each
    column "<name> (<id>)"); without an id a literal import makes a new, duplicate column, and the
    problem says so and how to fix it."""
    name = " ".join(book.assignment.split())
    if book.canvas_assignment_id:
        return name, book.canvas_assignment_id, None
    same = [(n, i) for n, i in book.canvas_columns if n.casefold() == name.casefold()]
    if len(same) == 1:
        return same[0][0], same[0][1], None
    if book.canvas_columns:
        listed = "; ".join(f"{n} ({i})" for n, i in book.canvas_columns[:8])
        return name, "", (f"no assignment column of the Canvas roster is named {name!r} (it has: {listed}), so "
                          "Canvas would make a new, duplicate column: pass --canvas-assignment-id with the column's "
                          "id, or --assignment-name with its name")
    return name, "", ("no Canvas assignment id: Canvas would make a new assignment column; pass "
                      "--canvas-assignment-id, or give Canvas's gradebook export as the roster (its columns carry "
                      "the ids)")


def assignment_header(book: Gradebook) -> str:
    name, assignment_id, _problem = assignment_column(book)
    return f"{name} ({assignment_id})" if assignment_id else name


class CanvasExporter:
    name = "canvas"
    default_name = "canvas.csv"
    per_submission = False

    def render(self, book: Gradebook) -> list[ExportFile]:
        rows = [[*IDENTITY, assignment_header(book)], ["Points Possible", "", "", "", "", f"{book.max_score:.2f}"]]
        for row in self.rows(book):
            r = row.roster
            canvas_id = (r.canvas_id if r else "") or book.canvas_ids.get(row.student_id, "")
            rows.append([row.name or row.student_id, canvas_id, r.sis_user_id if r else "",
                         r.sis_login_id if r else "", r.section if r else "", "" if row.blank else points(row.score)])
        return [ExportFile(PurePosixPath(self.default_name), csv_text(rows))]

    @staticmethod
    def rows(book: Gradebook) -> list[GradeRow]:
        """The rows written: every row, but only roster students when there is a roster."""
        return [row for row in book.rows if row.roster is not None or not book.with_roster]

    @staticmethod
    def left_out(book: Gradebook) -> list[str]:
        """Submissions with no roster student, left out of the file (see the module docstring)."""
        return [row.student_id for row in book.rows if row.roster is None and book.with_roster]

    @staticmethod
    def unmatched(book: Gradebook) -> list[str]:
        """Rows Canvas can match only by name (no Canvas id, SIS User ID or SIS Login ID)."""
        return [row.student_id for row in CanvasExporter.rows(book)
                if not (book.canvas_ids.get(row.student_id) or (row.roster is not None and (
                    row.roster.canvas_id or row.roster.sis_user_id or row.roster.sis_login_id)))]
