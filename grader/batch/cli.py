"""The ``grader batch`` command: progress bar, problems, and a one-screen summary."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ..errors import GraderError, RosterError, os_reason
from ..results.record import StoredResult
from ..results.roster import Roster
from ..session import Session
from .layouts import Discovery
from .runner import run_batch

EXIT_OK, EXIT_USAGE = 0, 2


def batch(args: argparse.Namespace, session: Session | None = None) -> int:
    """``grader batch``; ``session``: one the caller made and started warming early (closed here)."""
    console, errors = Console(), Console(stderr=True, soft_wrap=True)  # an error is one line, however long
    counts = {"failed checks": 0, "could not be graded": 0}
    progress = Progress(
        TextColumn("[bold]grading"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[failed]} failed checks, {task.fields[broken]} could not be graded"),
        TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=console, transient=False,
    )
    task = progress.add_task("grading", total=None, failed=0, broken=0)

    planned = [0]  # a mixed class starts once per course module: the bar counts them all

    def started(found: Discovery, todo: int) -> None:
        console.print(f"source: [bold]{escape(found.layout)}[/], {len(found.entries)} submissions, "
                      f"{todo} to grade, {len(found.entries) - todo} up to date", soft_wrap=True)
        for problem in found.problems:
            console.print(f"[yellow]problem:[/] {escape(problem)}", highlight=False, soft_wrap=True)
        planned[0] += todo
        progress.update(task, total=planned[0])
        progress.start()

    def done(student: str, result: StoredResult | None) -> None:
        if result is not None and result.status != "graded":
            counts["could not be graded"] += 1
            progress.console.print(f"[red]{escape(student)}[/]: {result.status}: {escape(result.reason)}",
                                   highlight=False, soft_wrap=True)
        elif result is not None and result.report is not None and not result.report.all_passed:
            counts["failed checks"] += 1
        progress.update(task, advance=1, failed=counts["failed checks"], broken=counts["could not be graded"])

    def error(message: str) -> int:
        progress.stop()
        errors.print(f"[red]error:[/] {escape(message)}", highlight=False)
        return EXIT_USAGE

    try:
        roster = check_roster(args.roster)
        release = _release(args)
        outcome = run_batch(args.source, args.out, rubric=args.rubric, module=args.module, backend=args.backend,
                            workers=args.workers, force=args.force, roster=roster, keep=args.keep, release=release,
                            on_start=started, on_done=done, session=session)
    except GraderError as e:
        return error(str(e))
    finally:
        progress.stop()
        if session is not None:  # run_batch closed it, unless the roster or the dates stopped us first
            session.close()
    try:
        from ..feedback import write_feedback

        for folder in outcome.folders or [args.out]:  # a mixed class: one results folder per course module
            if args.roster is not None:
                shutil.copyfile(args.roster, folder / "roster.csv")
            write_feedback(folder)
    except OSError as e:  # the grading is stored: only the pages are missing
        return error(f"{args.out}: feedback pages cannot be written ({os_reason(e)}); the results are stored, run the "
                     "batch again once the folder is writable")
    except GraderError as e:
        return error(str(e))
    console.print(f"graded {outcome.graded} ({counts['failed checks']} with failed checks), up to date "
                  f"{outcome.skipped}, invalid {outcome.invalid}, could not grade {outcome.failed}; results in "
                  f"{escape(', '.join(str(f) for f in outcome.folders or [args.out]))}: feedback/<student>.html|md, "
                  "summary.html, reports/<student>.json; "
                  "export with `grader export`", soft_wrap=True)
    return EXIT_OK


def check_roster(path: Path | None) -> Roster | None:
    """The roster, validated now rather than at export time: RosterError for an unreadable,
    empty or non-UTF-8 file, a missing id column, or a student id given twice."""
    if path is None:
        return None
    if path.is_dir():
        raise RosterError(f"roster {path}: is a directory; give the roster's .csv file")
    if not path.is_file():
        raise RosterError(f"roster {path}: not found")
    from ..results.roster import read_roster

    roster = read_roster(path)
    if roster.duplicates:
        raise RosterError(f"roster {path}: {'; '.join(roster.duplicates)}; each student id must be on one row only")
    return roster


def _release(args: argparse.Namespace) -> dict[str, str]:
    """The command line's release dates, checked now (the rubric's are read from the stored rubric)."""
    from ..visibility import parse_date

    dates = {"due_date": args.due_date, "publish_date": args.publish_date}
    return {k: parse_date(v, k.replace("_", " ")).isoformat() for k, v in dates.items() if v}
