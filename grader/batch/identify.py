"""Whose submission is whose: a download's own ids mapped to the roster, and, when a student
submitted more than once, which submission counts.

An LMS download names students by its own ids, the roster by the course's. Each id is looked up
in the roster column that holds it, by exact value, never by name:

    Canvas      user id           -> the roster's canvas_id      (Canvas's gradebook export has it as "ID")
    Moodle      participant id    -> moodle_participant          (the grading worksheet's "Identifier")
    Blackboard  username          -> sis_login_id, else student_id

A download id that is on no roster row keeps its own id and is reported; one the roster cannot
hold at all (no such column) stops the batch, because then no student could be matched.

Several submissions of one student: the latest counts (Blackboard's attempt time orders them); with
``keep="all"`` the older ones are graded too but do not count. Submissions that cannot be ordered
(two files claiming one student, with no time) are ambiguous: the batch stops naming them.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Literal

from ..errors import RosterError, SubmissionError
from ..results.names import check_name, shown_name
from ..results.roster import Roster, RosterEntry
from .layouts import Discovery, Entry

Keep = Literal["latest", "all"]

COLUMNS: dict[str, tuple[str, ...]] = {
    "canvas": ("canvas_id",), "moodle": ("moodle_participant",), "blackboard": ("sis_login_id", "student_id"),
}
HOW = {
    "canvas": "a Canvas ID column: give Canvas's gradebook export (Grades > Export) as the roster, or add canvas_id",
    "moodle": "an Identifier column: give Moodle's grading worksheet (Download grading worksheet) as the roster, or "
              "add moodle_participant",
    "blackboard": "the students' usernames: give the Grade Center export (with its Username column) as the roster",
}
WHAT = {"canvas": "Canvas user", "moodle": "Moodle participant", "blackboard": "Blackboard user"}


def resolve(found: Discovery, roster: Roster | None, keep: Keep = "latest") -> None:
    """Map ``found``'s download ids to roster ids and keep one submission per student, in place;
    SubmissionError (or RosterError) naming every ambiguous file, before anything is graded."""
    if roster is not None:
        found.entries = _mapped(found, roster)
        # older uploads of one submission (grader/batch/layouts.py) follow their student's mapping
        mapped = {(e.lms, e.lms_id): e for e in found.entries if e.lms}
        found.superseded = [dataclasses.replace(e, student_id=mapped[(e.lms, e.lms_id)].student_id)
                            for e in found.superseded if (e.lms, e.lms_id) in mapped]
    _latest(found, keep)
    if found.ambiguous:
        raise SubmissionError(f"{found.layout}: {len(found.ambiguous)} ambiguous file(s), nothing was graded: "
                              + "; ".join(found.ambiguous))


def _mapped(found: Discovery, roster: Roster) -> list[Entry]:
    index: dict[tuple[str, str], RosterEntry] = {}
    for entry in roster.entries:
        for column in ("canvas_id", "moodle_participant", "sis_login_id", "student_id"):
            value = getattr(entry, column)
            if value:
                index.setdefault((column, value), entry)
    for kind in {e.lms for e in found.entries if e.lms} - {"blackboard"}:  # every roster has Blackboard's column
        if not any(getattr(r, column) for r in roster.entries for column in COLUMNS[kind]):
            raise RosterError(f"roster {roster.source} cannot match a {found.layout}: it needs {HOW[kind]}")
    mapped = []
    for e in found.entries:
        if not e.lms:
            mapped.append(e)
            continue
        student = next((index[(c, e.lms_id)] for c in COLUMNS[e.lms] if e.lms_id and (c, e.lms_id) in index), None)
        if student is None:
            found.problems.append(f"{WHAT[e.lms]} {shown_name(e.lms_id or e.student_id)}"
                                  f"{f' ({shown_name(e.name)})' if e.name else ''} ({shown_name(e.path.name, 120)}) is "
                                  f"on no roster row; stored under {shown_name(e.student_id)}")
            mapped.append(e)
            continue
        reason = check_name(student.student_id, "roster student id")
        if reason is not None:
            found.problems.append(f"{WHAT[e.lms]} {shown_name(e.lms_id)}: {reason}; not graded")
            continue
        mapped.append(dataclasses.replace(e, student_id=student.student_id, name=student.name or e.name,
                                          email=student.email or e.email))
    return mapped


def _latest(found: Discovery, keep: Keep) -> None:
    by_student: dict[str, list[Entry]] = defaultdict(list)
    for e in found.entries:
        by_student[e.student_id].append(e)
    kept = []
    for student, entries in by_student.items():
        if len(entries) == 1:
            kept.append(entries[0])
            continue
        ordered = sorted(entries, key=lambda e: e.attempt)
        latest = ordered[-1]
        if not latest.attempt or ordered[-2].attempt == latest.attempt:
            files = ", ".join(shown_name(e.path.name, 120) for e in ordered if e.attempt == latest.attempt)
            found.ambiguous.append(f"{shown_name(student)}: several submissions ({files}) and nothing says which is "
                                   "the latest; keep one")
            continue
        kept.append(latest)
        found.superseded += ordered[:-1]
        older = "graded too (--keep all), but only the latest counts" if keep == "all" else \
            "not graded (--keep all grades them too)"
        found.problems.append(f"{shown_name(student)}: {len(ordered)} submissions; the latest "
                              f"({shown_name(latest.submitted_at or latest.attempt)}) counts, the older ones are {older}")
    found.entries = kept
