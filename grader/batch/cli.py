"""The ``grader batch`` command: progress bar, problems, and a one-screen summary."""

from __future__ import annotations

import argparse
import shutil

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ..errors import GraderError
from ..session import Session
from .layouts import Discovery
from .runner import run_batch
from .store import StoredResult

EXIT_OK, EXIT_USAGE = 0, 2


def batch(args: argparse.Namespace, session: Session | None = None) -> int:
    console, errors = Console(), Console(stderr=True)
    failures = 0
    progress = Progress(
        TextColumn("[bold]grading"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[failed]} failed"),
        TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=console, transient=False,
    )
    task = progress.add_task("grading", total=None, failed=0)

    def started(found: Discovery, todo: int) -> None:
        console.print(f"source: [bold]{escape(found.layout)}[/], {len(found.entries)} submissions, "
                      f"{todo} to grade, {len(found.entries) - todo} up to date")
        for problem in found.problems:
            console.print(f"[yellow]problem:[/] {escape(problem)}", highlight=False)
        progress.update(task, total=todo)
        progress.start()

    def done(student: str, result: StoredResult | None) -> None:
        nonlocal failures
        if result is not None and result.status != "graded":
            failures += 1
            progress.console.print(f"[red]{escape(student)}[/]: {result.status}: {escape(result.reason)}",
                                   highlight=False)
        progress.update(task, advance=1, failed=failures)

    if args.roster is not None and not args.roster.is_file():
        errors.print(f"[red]error:[/] roster {escape(str(args.roster))} not found")
        return EXIT_USAGE
    try:
        outcome = run_batch(args.source, args.out, rubric=args.rubric, backend=args.backend, workers=args.workers,
                            force=args.force, on_start=started, on_done=done, session=session)
    except GraderError as e:
        progress.stop()
        errors.print(f"[red]error:[/] {escape(str(e))}", highlight=False)
        return EXIT_USAGE
    finally:
        progress.stop()
    if args.roster is not None:
        shutil.copyfile(args.roster, args.out / "roster.csv")
    from ..feedback import write_feedback

    write_feedback(args.out)
    console.print(f"graded {outcome.graded}, up to date {outcome.skipped}, invalid {outcome.invalid}, "
                  f"could not grade {outcome.failed}; results in {escape(str(args.out))}: feedback/<student>.html|md, "
                  "summary.html, reports/<student>.json; export with `grader export`")
    return EXIT_OK
