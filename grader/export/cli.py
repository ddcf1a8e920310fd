"""``grader export``: turn RESULTS_DIR's stored reports into a gradebook file (I/O edge only).

Only the standard library is imported at first: ``add_export_parser`` runs every time the
``grader`` command line is built.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import cliargs
from ..errors import GraderError
from . import FORMATS

if TYPE_CHECKING:
    from .base import ExportFile, Gradebook

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2


def add_export_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``export`` to the ``grader`` command's subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "export", help="write a gradebook file (Gradescope, Canvas, Moodle, nbgrader, Otter, CSV) from RESULTS_DIR",
        description="Build a gradebook export from the reports stored by 'grader batch'; no score is recomputed.")
    p.add_argument("results_dir", type=Path, metavar="RESULTS_DIR", help="the --out folder of 'grader batch'")
    p.add_argument("--format", required=True, choices=FORMATS, help="the gradebook format")
    p.add_argument("--roster", type=Path, help="roster CSV (default: RESULTS_DIR/roster.csv if present); "
                                               "columns are documented in grader/results/roster.py")
    p.add_argument("--out", type=Path, metavar="PATH",
                   help="output file (a folder for gradescope); default: RESULTS_DIR/exports/<format file>")
    p.add_argument("--assignment-name", default="", help="assignment name in headers (default: the rubric title)")
    p.add_argument("--canvas-assignment-id", default="",
                   help="Canvas assignment id: the header becomes 'Name (id)' and updates that assignment")
    p.add_argument("--due-date", default="", type=cliargs.date,
                   help="due date written in the nbgrader 'duedate' column (2026-12-01 or 2026-12-01T23:59:00+00:00)")
    p.add_argument("--strict", action="store_true", help="exit 1 when any roster or export problem is reported")
    p.add_argument("--allow-unmatched", action="store_true",
                   help="write the file even when roster students have no result while some results match no roster "
                        "student (by default that refuses: the ids probably do not match, and the file would zero "
                        "those students)")
    return p


CANVAS_ID = re.compile(r"^[1-9]\d{0,17}$")


def export_command(args: argparse.Namespace) -> int:
    from ..models import shown
    from . import exporters
    from .canvas import CanvasExporter, assignment_column

    if args.canvas_assignment_id and not CANVAS_ID.match(args.canvas_assignment_id):
        print(f"error: --canvas-assignment-id {shown(args.canvas_assignment_id, one_line=True)!r} is not a Canvas "
              "assignment id: give the number in the assignment's URL (/courses/N/assignments/<id>), or leave it out "
              "and give Canvas's gradebook export as the roster", file=sys.stderr)
        return EXIT_USAGE
    try:
        book = load_gradebook(args.results_dir, roster_path=args.roster, assignment=args.assignment_name,
                              canvas_assignment_id=args.canvas_assignment_id, due_date=args.due_date)
        exporter = exporters()[args.format]
        if book.conflicts:
            return _refuse(book.conflicts)
        if book.missing and book.unmatched and not args.allow_unmatched:
            return _refuse_unmatched(book)
        files = exporter.render(book)
        target = write_export(files, _destination(args, exporter.default_name, exporter.per_submission),
                              per_submission=exporter.per_submission)
    except GraderError as e:
        print(f"error: {shown(str(e), one_line=True)}", file=sys.stderr)
        return EXIT_USAGE
    problems = list(book.problems)
    if args.format == "canvas" and (column := assignment_column(book)[2]):
        problems.append(column)
    if args.format == "canvas" and (left_out := CanvasExporter.left_out(book)):
        problems.append(f"{len(left_out)} submission(s) match no roster student by id or e-mail and were left out "
                        f"of the Canvas file (Canvas would match them by the name they give): {', '.join(left_out)}")
    if args.format == "canvas" and (unmatched := CanvasExporter.unmatched(book)):
        problems.append(f"{len(unmatched)} row(s) have no Canvas ID, SIS User ID or SIS Login ID, so Canvas can "
                        f"match them only by name; give a roster with those columns: {', '.join(unmatched)}")
    if args.format == "gradescope" and (absent := [r.student_id for r in book.rows if r.result is None or r.blank]):
        problems.append(f"{len(absent)} student(s) have no submission or could not be graded, so no results.json: "
                        f"{', '.join(absent)}")
    for problem in problems:
        print(f"warning: {shown(problem, one_line=True)}", file=sys.stderr)
    counts = {s: sum(r.status == s for r in book.rows) for s in ("graded", "invalid", "failed_to_grade", "missing")}
    print(f"wrote {args.format} export to {target}: {len(book.rows)} students ({counts['graded']} graded, "
          f"{counts['invalid']} invalid, {counts['failed_to_grade']} could not be graded, "
          f"{counts['missing']} missing)")
    return EXIT_PROBLEMS if args.strict and problems else EXIT_OK


def load_gradebook(results_dir: Path, *, roster_path: Path | None = None, assignment: str = "",
                   canvas_assignment_id: str = "", due_date: str = "") -> Gradebook:
    """The gradebook of RESULTS_DIR: its stored results, its rubric and the roster."""
    import json

    from ..feedback.write import stored_release
    from ..results.record import flagged_late
    from ..results.roster import Roster, read_roster
    from ..results.store import SQLiteStore
    from ..rubric import Rubric
    from .base import build_gradebook

    if not (results_dir / SQLiteStore.FILE).is_file():
        raise GraderError(f"{results_dir}: no {SQLiteStore.FILE}; run 'grader batch SOURCE --out {results_dir}' first")
    import os

    with SQLiteStore(results_dir, readonly=not os.access(results_dir, os.W_OK | os.X_OK)) as store:
        results = list(store.results())
        meta = store.meta()
    rubric_json = meta.get("rubric")
    rubric = Rubric.model_validate_json(rubric_json) if rubric_json else None
    downloaded: dict[str, dict[str, object]] = json.loads(meta.get("lms_ids") or "{}")
    canvas_ids = {sid: str(info["id"]) for sid, info in downloaded.items() if info.get("lms") == "canvas" and info.get("id")}
    roster: Roster | None = None
    if roster_path is not None:
        roster = read_roster(roster_path)
    elif (results_dir / "roster.csv").is_file():
        roster = read_roster(results_dir / "roster.csv")
    return build_gradebook(results, rubric=rubric, roster=roster, assignment=assignment,
                           canvas_assignment_id=canvas_assignment_id, due_date=due_date, canvas_ids=canvas_ids,
                           release=stored_release(meta, rubric), flagged_late=flagged_late(meta))


def write_export(files: list[ExportFile], target: Path, *, per_submission: bool) -> Path:
    """Write the files: into folder ``target`` (per submission), or the one file to ``target``."""
    from ..results.names import is_safe

    if not per_submission:
        (only,) = files
        _write(target, only.text)
        return target
    for f in files:
        if not all(is_safe(part) for part in f.path.parts):  # student ids make these paths
            raise GraderError(f"refusing to write export file {str(f.path)!r}: not a safe path")
        _write(target.joinpath(*f.path.parts), f.text)
    target.mkdir(parents=True, exist_ok=True)
    return target


def _destination(args: argparse.Namespace, default_name: str, per_submission: bool) -> Path:
    out: Path | None = args.out
    results_dir: Path = args.results_dir
    if out is None:
        return results_dir / "exports" / default_name
    if not per_submission and out.is_dir():
        return out / default_name
    return out


def _write(path: Path, text: str) -> None:
    from ..errors import os_reason

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8", newline="")
        tmp.replace(path)
    except OSError as e:
        raise GraderError(f"{path}: cannot be written ({os_reason(e)}); give --out a file or folder you can write "
                          "to") from None


def _refuse_unmatched(book: Gradebook) -> int:
    """Nothing is written when roster students have no result while results match no roster
    student: the ids probably do not match (an LMS download graded without its roster, say), and
    importing the file would zero every one of them."""
    from ..models import shown

    missing, unmatched = book.missing, book.unmatched
    print(f"error: {len(missing)} roster student(s) have no result: {shown(', '.join(missing), one_line=True)}",
          file=sys.stderr)
    print(f"error: while {len(unmatched)} result(s) match no roster student: "
          f"{shown(', '.join(unmatched), one_line=True)}", file=sys.stderr)
    print("error: no gradebook written, since importing it would give those students 0; fix the roster (or run "
          "'grader batch' again with --roster) and export again, or pass --allow-unmatched", file=sys.stderr)
    return EXIT_PROBLEMS


def _refuse(conflicts: tuple[str, ...]) -> int:
    """Nothing is written when two submissions claim one student: either score would be a guess."""
    from ..models import shown

    for conflict in conflicts:
        print(f"error: {shown(conflict, one_line=True)}", file=sys.stderr)
    print("error: no gradebook written; keep one submission per student (or fix the roster) and export again",
          file=sys.stderr)
    return EXIT_PROBLEMS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grader")
    add_export_parser(parser.add_subparsers(dest="command", required=True))
    return export_command(parser.parse_args(argv))
