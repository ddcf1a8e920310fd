"""Render score reports for people: a rich table per submission, and JSON for machines."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .models import CheckResult, GradeReport, Visibility, shown
from .visibility import Release

if TYPE_CHECKING:
    from .rubric import Rubric

# How a check a practice run does not show is named: "1 hidden check", "2 checks released after the due date".
_KINDS: dict[Visibility, tuple[str, str]] = {"hidden": ("hidden ", ""), "after_due_date": ("", " released after the due date"),
                                      "after_published": ("", " released once scores are published")}


def coverage(shown_score: float, shown_max: float, shown_count: int, unseen_count: int, unseen_points: float,
             final_max: float, *, practice: Sequence[Visibility] | None = None, ran: bool = False,
             public: bool = True) -> str:
    """What a total shown to a student covers, in words, when some checks are not shown to them.

    A result of the official grading (the gradebook's): "45/94 is the score on the 24 checks shown
    here. 4 more checks (6 points) count but are not shown to you; the gradebook gets the score on
    all 28 checks, out of 100."

    A practice run (``practice``: the visibility of each check not shown; ``ran``: they ran here
    but are not shown; ``public``: every check shown is a visible one): "94/94 on the public
    checks; 1 hidden check and 1 check released after the due date (6 points) run only in the
    official grading"."""
    if practice is not None:
        kinds = Counter(practice)
        parts = []
        for kind, (before, after) in _KINDS.items():
            if n := kinds[kind]:
                parts.append(f"{n} {before}check{'s' if n != 1 else ''}{after}")
        named = " and ".join(parts) if len(parts) < 3 else f"{', '.join(parts[:-1])} and {parts[-1]}"
        verb = ("count" if ran else "run") + ("s" if unseen_count == 1 else "")
        return (f"{shown_score:g}/{shown_max:g} on the {'public' if public else 'released'} checks; {named} "
                f"({unseen_points:g} point{'s' if unseen_points != 1 else ''}) {verb} only in the official grading")
    return (f"{shown_score:g}/{shown_max:g} is the score on the {shown_count} check{'s' if shown_count != 1 else ''} "
            f"shown here. {unseen_count} more check{'s' if unseen_count != 1 else ''} ({unseen_points:g} points) "
            f"count{'s' if unseen_count == 1 else ''} but {'is' if unseen_count == 1 else 'are'} not shown to you; "
            f"the gradebook gets the score on all {shown_count + unseen_count} checks, out of {final_max:g}.")

STATUS_STYLE = {
    "passed": "[green]✔ passed[/]", "failed": "[red]✘ failed[/]", "error": "[red]✘ error[/]",
    "timeout": "[magenta]⏱ timeout[/]", "crashed": "[red]☠ crashed[/]", "oom": "[magenta]▲ oom[/]",
    "not_gradable": "[yellow]? not gradable[/]",
}


def render(report: GradeReport, console: Console, *, staff: bool = False, release: Release | None = None,
           rubric: Rubric | None = None) -> None:
    """What stops the notebook from running (cells skipped, code that could not be defined, parts
    not started), then a compact table of checks, then the feedback of each other check that did
    not pass. Without ``staff``, only the checks a student may see now (``release``,
    grader.visibility) are shown, and the total is theirs, saying so when other checks count:
    those of the report not shown, and those of ``rubric`` this run did not grade."""
    release = release if release is not None else Release()
    checks = report.checks if staff else tuple(c for c in report.checks if release.shows(c.visibility))
    not_shown = [(c.visibility, c.max_score) for c in report.checks if c not in checks]
    not_run = _not_run(report, rubric)
    partial = bool(not_shown or not_run)
    score = report.score if not partial else sum(c.score for c in checks)
    max_score = report.max_score if not partial else sum(c.max_score for c in checks)
    passed = sum(c.status == "passed" for c in checks)
    not_started = _not_started(checks, staff)
    for line in _stoppers(report, not_started):
        console.print(line, highlight=False)
    title = (f"[bold]{escape(shown(report.submission))}[/]: [bold]{score:g}/{max_score:g}[/] "
             f"({passed} of {len(checks)} checks passed) [dim]{report.backend.label} run, "
             f"{report.backend.name} backend[/]")
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("points", justify="right", no_wrap=True)
    table.add_column("what it checks", overflow="fold")
    for c in checks:
        table.add_row(escape(c.id), STATUS_STYLE[c.status], f"{c.score:g}/{c.max_score:g}", escape(c.title))
    console.print(table)
    if partial:
        unseen = [*not_shown, *not_run]
        practice = report.backend.label == "practice" or bool(not_run)  # not the score the gradebook gets
        words = coverage(score, max_score, len(checks), len(unseen), sum(p for _v, p in unseen), report.max_score +
                         sum(p for _v, p in not_run), practice=[v for v, _p in unseen] if practice else None,
                         ran=not not_run, public=all(c.visibility == "visible" for c in checks))
        console.print(f"[dim]{escape(words)}[/]", highlight=False)
    grouped = {i for *_why, ids in not_started.values() for i in ids}
    for c in checks:
        text = _text(c, staff)
        if c.status != "passed" and text and c.id not in grouped:
            console.print(f"[bold]{escape(c.id)}[/] {STATUS_STYLE[c.status]}")
            console.print(escape(text), highlight=False)
            console.print()
    for note in _other_notes(report):
        console.print(f"[dim]note: {escape(shown(note))}[/]", highlight=False)
    if report.backend.label == "practice":
        from .edition import PRACTICE_NOTE

        console.print(f"[dim]{escape(PRACTICE_NOTE)}[/]", highlight=False)


def _text(check: CheckResult, staff: bool) -> str:
    return check.detail if staff or check.visibility != "visible" else check.message


def _not_run(report: GradeReport, rubric: Rubric | None) -> list[tuple[Visibility, float]]:
    """The checks of the course's rubric that this report does not hold (a public-only run), with
    those the student package's copy of the rubric leaves out."""
    if rubric is None:
        return []
    graded = {c.id for c in report.checks}
    return [*((c.visibility, c.points) for c in rubric.checks if c.id not in graded),
            *((w.visibility, w.points) for w in rubric.withheld)]


def _not_started(checks: Sequence[CheckResult], staff: bool) -> dict[str, tuple[str, str, list[str]]]:
    """Target -> (why, its cell, the failed checks it blocks), for the targets not written yet: the starter's
    raise NotImplementedError() still there, or no definition at all."""
    from .judge.outcomes import not_started

    groups: dict[str, tuple[str, str, list[str]]] = {}
    for c in checks:
        if c.status == "passed" or (found := not_started(_text(c, staff))) is None:
            continue
        name, why, where = found
        groups.setdefault(name, (why, where, []))[2].append(c.id)
    return groups


def _stoppers(report: GradeReport, not_started: dict[str, tuple[str, str, list[str]]]) -> list[str]:
    """What stops (part of) the notebook from running, first: cells that could not be parsed, code
    that failed while being defined, the parts not started and the checks each one blocks."""
    ex = report.extraction
    lines = [f"[bold red]Not run:[/] cell {e.cell}, line {e.line}: syntax error ({escape(shown(e.message))}); "
             "this cell was skipped" for e in ex.syntax_errors]
    cells = [where for _why, where, _ids in not_started.values() if where]
    lines += [f"[bold red]Failed while defining your code:[/] {escape(shown(e))}" for e in ex.import_errors
              if not (": NotImplementedError" in e and e.startswith(tuple(cells)))]  # said once, below
    for name, (why, where, ids) in not_started.items():
        label = "Not started yet" if where else "Not defined"
        lines.append(f"[bold red]{label}:[/] [bold]{escape(name)}[/] ({escape(why)}). It blocks {len(ids)} "
                     f"check{'s' if len(ids) != 1 else ''}: {escape(', '.join(ids))}")
    if lines:
        lines.append("")
    return lines


def _other_notes(report: GradeReport) -> list[str]:
    """The notes that do not stop anything: how the notebook was read, lines not run."""
    ex = report.extraction
    notes = list(ex.notes)
    skipped = [d for d in ex.dropped if d.kind in ("magic", "shell")]
    if skipped:
        notes.append(f"{len(skipped)} magic/shell line(s) were not run, e.g. cell {skipped[0].cell}: {skipped[0].detail}")
    return notes


def notes(report: GradeReport) -> list[str]:
    """Every note on how the notebook was read and run, for the feedback pages (grader.feedback.view)."""
    ex = report.extraction
    lines = list(ex.notes)
    lines += [f"cell {e.cell}, line {e.line}: syntax error ({e.message}); this cell was skipped"
              for e in ex.syntax_errors]
    lines += [f"while defining your code: {e}" for e in ex.import_errors]
    return lines + _other_notes(report)[len(ex.notes):]


def write_json(reports: Sequence[GradeReport], path: Path) -> None:
    """One report as an object, several as a list."""
    data = [r.model_dump(mode="json") for r in reports]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data[0] if len(data) == 1 else data, indent=2) + "\n", encoding="utf-8")
