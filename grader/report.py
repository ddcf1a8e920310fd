"""Render score reports for people: a rich table per submission, and JSON for machines."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .models import GradeReport, shown
from .visibility import Release


def coverage(shown_score: float, shown_max: float, shown_count: int, unseen_count: int, unseen_points: float,
             final_max: float) -> str:
    """What a total shown to a student covers, in words, when some checks are not shown to them:
    "45/94 is the score on the 24 checks shown here. 4 more checks (6 points) count but are not
    shown to you yet; the gradebook gets the score on all 28 checks, out of 100." """
    return (f"{shown_score:g}/{shown_max:g} is the score on the {shown_count} check{'s' if shown_count != 1 else ''} "
            f"shown here. {unseen_count} more check{'s' if unseen_count != 1 else ''} ({unseen_points:g} points) "
            f"count{'s' if unseen_count == 1 else ''} but {'is' if unseen_count == 1 else 'are'} not shown to you; "
            f"the gradebook gets the score on all {shown_count + unseen_count} checks, out of {final_max:g}.")

STATUS_STYLE = {
    "passed": "[green]✔ passed[/]", "failed": "[red]✘ failed[/]", "error": "[red]✘ error[/]",
    "timeout": "[magenta]⏱ timeout[/]", "crashed": "[red]☠ crashed[/]", "oom": "[magenta]▲ oom[/]",
    "not_gradable": "[yellow]? not gradable[/]",
}


def render(report: GradeReport, console: Console, *, staff: bool = False, release: Release | None = None) -> None:
    """A compact table of checks, then the feedback of each check that did not pass. Without
    ``staff``, only the checks a student may see now (``release``, grader.visibility) are shown,
    and the total is theirs, saying so when other checks count."""
    release = release if release is not None else Release()
    checks = report.checks if staff else tuple(c for c in report.checks if release.shows(c.visibility))
    partial = len(checks) < len(report.checks)
    score = report.score if not partial else sum(c.score for c in checks)
    max_score = report.max_score if not partial else sum(c.max_score for c in checks)
    passed = sum(c.status == "passed" for c in checks)
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
        unseen = [c for c in report.checks if c not in checks]
        words = coverage(score, max_score, len(checks), len(unseen), sum(c.max_score for c in unseen), report.max_score)
        console.print(f"[dim]{words}[/]")
    for c in checks:
        text = c.detail if staff or c.visibility != "visible" else c.message
        if c.status != "passed" and text:
            console.print(f"[bold]{escape(c.id)}[/] {STATUS_STYLE[c.status]}")
            console.print(escape(text), highlight=False)
            console.print()
    for note in _notes(report):
        console.print(f"[dim]note: {escape(shown(note))}[/]", highlight=False)
    if report.backend.label == "practice":
        console.print("[dim]practice run: the official grade comes from the course's Docker sandbox[/]")


def _notes(report: GradeReport) -> list[str]:
    ex = report.extraction
    notes = list(ex.notes)
    notes += [f"cell {e.cell}, line {e.line}: syntax error ({e.message}); this cell was skipped"
              for e in ex.syntax_errors]
    notes += [f"while defining your code: {e}" for e in ex.import_errors]
    skipped = [d for d in ex.dropped if d.kind in ("magic", "shell")]
    if skipped:
        notes.append(f"{len(skipped)} magic/shell line(s) were not run, e.g. cell {skipped[0].cell}: {skipped[0].detail}")
    return notes


def write_json(reports: Sequence[GradeReport], path: Path) -> None:
    """One report as an object, several as a list."""
    data = [r.model_dump(mode="json") for r in reports]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data[0] if len(data) == 1 else data, indent=2) + "\n", encoding="utf-8")
