"""The I/O edge of feedback: read RESULTS_DIR's store, write the student pages and the class summary."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import GraderError, RosterError
from ..results.names import is_safe
from ..results.record import StoredResult, flagged_late, is_late
from ..results.roster import Roster, RosterEntry, match_roster, read_roster
from ..results.store import SQLiteStore
from ..rubric import Rubric
from ..visibility import Release, release_for
from .html import render_html
from .markdown import render_markdown
from .summary import build_summary
from .summary_html import render_summary_html
from .view import student_view

FEEDBACK_DIR = "feedback"
ROSTER_FILE = "roster.csv"


def write_feedback(results_dir: Path) -> None:
    """(Re)build ``feedback/<student>.html`` and ``.md`` for every stored result, and
    ``summary.html`` + ``summary.json`` for the class, from the store in ``results_dir``."""
    store_path = results_dir / SQLiteStore.FILE
    if not store_path.is_file():
        raise GraderError(f"{results_dir}: no {SQLiteStore.FILE}; run 'grader batch SOURCE --out {results_dir}' first")
    with SQLiteStore(results_dir) as store:
        results = list(store.results())
        meta = store.meta()
    rubric_json = meta.get("rubric")
    rubric = Rubric.model_validate_json(rubric_json) if rubric_json else None
    release = stored_release(meta, rubric)
    roster, roster_problem = _roster(results_dir)
    names = _roster_names(results, roster)
    flagged = flagged_late(meta)
    late = {r.student_id: is_late(r, release.due_date, flagged) for r in results}
    folder = results_dir / FEEDBACK_DIR
    folder.mkdir(exist_ok=True)
    skipped = []
    for result in results:
        if not is_safe(result.student_id):  # the batch only stores whitelisted ids; never trust that blindly
            skipped.append(result.student_id)
            continue
        view = student_view(result, rubric, name=names.get(result.student_id, ""), release=release,
                            late=late[result.student_id])
        _write(folder / f"{result.student_id}.html", render_html(view))
        _write(folder / f"{result.student_id}.md", render_markdown(view))
    missing = _missing(results, roster)
    names |= {entry.student_id: entry.name for entry in (roster.entries if roster else ()) if entry.student_id in missing}
    summary = build_summary(results, rubric, missing, names, late)
    if roster_problem:
        summary["warnings"].append(roster_problem)
    if skipped:
        summary["warnings"].append(f"{len(skipped)} stored student id(s) are not safe file names; no feedback "
                                   "page was written for them")
    _write(results_dir / "summary.json", json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    _write(results_dir / "summary.html", render_summary_html(summary))


def stored_release(meta: dict[str, str], rubric: Rubric | None) -> Release:
    """What students may see now: the batch's --due-date/--publish-date, else the rubric's dates."""
    given: dict[str, str] = json.loads(meta.get("release") or "{}")
    return release_for(rubric.due_date if rubric else None, rubric.publish_date if rubric else None,
                       due_date=given.get("due_date"), publish_date=given.get("publish_date"))


def _roster(results_dir: Path) -> tuple[Roster | None, str]:
    path = results_dir / ROSTER_FILE
    if not path.is_file():
        return None, ""
    try:
        return read_roster(path), ""
    except RosterError as e:
        return None, f"roster not used for names and missing students: {e}"


def _claims(results: list[StoredResult], roster: Roster | None) -> list[tuple[RosterEntry, list[StoredResult]]]:
    """Each roster student with the submissions that claim them, joined as the exports join them."""
    return match_roster(roster, {r.student_id: r for r in results}) if roster is not None else []


def _roster_names(results: list[StoredResult], roster: Roster | None) -> dict[str, str]:
    """Submission id -> the roster's name for its student."""
    return {r.student_id: entry.name for entry, claims in _claims(results, roster) for r in claims}


def _missing(results: list[StoredResult], roster: Roster | None) -> list[str]:
    return [entry.student_id for entry, claims in _claims(results, roster) if not claims]


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
