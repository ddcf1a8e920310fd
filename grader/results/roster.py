"""The class roster: who is enrolled, and how each LMS knows them.

A roster is a CSV file (UTF-8, with or without a BOM; comma, semicolon or tab separated) with a
header row. Columns, in any order (only ``student_id`` is required):

    student_id     the id submissions are filed under (file name, nbgrader folder, Gradescope SID)
    name           display name, as the LMS shows it (Canvas: "Doe, Jane" or "Jane Doe")
    first_name     } derived from ``name`` when absent ("Doe, Jane" or "Jane Doe"), and
    last_name      } ``name`` from them when it is absent
    email          kept as written (Moodle matches e-mail case-sensitively)
    sis_user_id    Canvas "SIS User ID"; also Moodle's "ID number"
    sis_login_id   Canvas "SIS Login ID"
    section        Canvas "Section"
    canvas_id      Canvas's numeric user "ID"
    moodle_participant  Moodle's "Identifier" of the grading worksheet ("Participant 1234567"): the
                   participant id a Moodle download names each student's folder with
    institution    Moodle "Institution"
    department     Moodle "Department"

A username column (``Username``, ``Login``, ``NetID``) beside a student id column gives
``sis_login_id``: a Blackboard download names its files by username. A Moodle grading worksheet
(``Identifier``, ``Full name``, ``Email address``) works as a roster too: without an id column,
each student is identified by the full e-mail address.

Header spellings are matched case-insensitively after folding spaces and punctuation to ``_``
(``Student ID``, ``E-mail``, ``Email address``, ``SIS User ID``, ``First name``, ``Surname`` ...).
A Canvas gradebook export works as a roster too: its ``Student`` is the name, its ``ID`` the
Canvas id, and the student id is its ``SIS Login ID`` (else ``SIS User ID``) unless the file also
has a ``student_id`` column. Its ``Points Possible`` row is skipped.

A row without a student id but with an e-mail address is identified by the full address, as a
Gradescope export without SIDs files its submissions. Problems never drop a row silently: a row
without a student id and a repeated student id are reported (the later row is ignored), and
repeated e-mails or Canvas ids, ids that cannot match a submission and unknown columns are
reported too.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import RosterError as RosterError  # re-exported: it lived here before errors.py
from .names import is_safe

if TYPE_CHECKING:
    from _csv import Reader

    from .record import StoredResult

FIELDS = ("student_id", "name", "first_name", "last_name", "email", "sis_user_id", "sis_login_id", "section",
          "canvas_id", "moodle_participant", "institution", "department")
LOGIN_NAMES = ("username", "user_name", "login", "netid")

SYNONYMS: dict[str, tuple[str, ...]] = {
    "student_id": ("student_id", "studentid", "student_number", "sid", "username", "user_name", "login", "netid",
                   "id"),
    "name": ("name", "full_name", "fullname", "student_name", "display_name", "student"),
    "first_name": ("first_name", "firstname", "given_name", "first"),
    "last_name": ("last_name", "lastname", "surname", "family_name", "last"),
    "email": ("email", "email_address", "e_mail", "e_mail_address", "mail"),
    "sis_user_id": ("sis_user_id", "sis_id", "id_number"),
    "sis_login_id": ("sis_login_id", "login_id"),
    "section": ("section", "sections"),
    "canvas_id": ("canvas_id", "canvas_user_id"),
    "moodle_participant": ("moodle_participant", "identifier"),
    "institution": ("institution",),
    "department": ("department",),
}

MAX_BYTES = 20 * 1024 * 1024


@dataclass(frozen=True)
class RosterEntry:
    student_id: str
    name: str = ""
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""
    canvas_id: str = ""
    moodle_participant: str = ""
    institution: str = ""
    department: str = ""
    line: int = 0


@dataclass(frozen=True)
class Roster:
    entries: tuple[RosterEntry, ...]
    problems: tuple[str, ...] = ()
    source: str = "roster"
    duplicates: tuple[str, ...] = ()  # "line N: student id 'x' already on line M" (the later row is ignored)
    # a Canvas gradebook export's assignment columns, "<name> (<assignment id>)": (name, id)
    assignments: tuple[tuple[str, str], ...] = ()


def normalize_header(header: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", header.replace("\ufeff", "").strip().lower()).strip("_")


def split_name(name: str) -> tuple[str, str]:
    """("first", "last") from "Last, First" or "First Middle Last"."""
    name = " ".join(name.split())
    if "," in name:
        last, first = (p.strip() for p in name.split(",", 1))
        return first, last
    first, _, last = name.rpartition(" ")
    return (first, last) if first else (name, "")


def read_roster(path: Path) -> Roster:
    """Read and parse a roster file; RosterError if it cannot be used at all."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise RosterError(f"roster {path}: cannot be read ({e.strerror})") from None
    if len(raw) > MAX_BYTES:
        raise RosterError(f"roster {path}: larger than {MAX_BYTES // 2**20} MiB")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise RosterError(f"roster {path}: not UTF-8 (byte {e.start}); save it as 'CSV UTF-8'") from None
    return parse_roster(text, source=str(path))


def parse_roster(text: str, source: str = "roster") -> Roster:
    """Parse roster CSV text (pure); problems are collected, not raised."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise RosterError(f"roster {source}: empty, or no header row in its first line")
    reader = csv.reader(io.StringIO(text), delimiter=_delimiter(lines[0]), strict=True)
    try:
        return _parse(reader, source)
    except csv.Error as e:
        raise RosterError(f"roster {source}, line {reader.line_num}: not valid CSV ({e})") from None


def _parse(reader: Reader, source: str) -> Roster:
    header = next(reader)
    columns, problems = _map_columns([normalize_header(h) for h in header], header)
    if not {"student_id", "email"} & {name for _, name in columns}:
        raise RosterError(f"roster {source}: no student id column; name one of {', '.join(SYNONYMS['student_id'][:4])} "
                          f"(or give an e-mail column) (found: {', '.join(h.strip() for h in header)})")
    entries: list[RosterEntry] = []
    duplicates: list[str] = []
    seen: dict[str, int] = {}
    emails: dict[str, tuple[str, int]] = {}
    canvas_ids: dict[str, tuple[str, int]] = {}
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) > len(header):
            problems.append(f"line {line}: {len(row)} cells but {len(header)} columns; the extra cells are ignored")
        values = {f: "" for f in FIELDS}
        for index, name in columns:
            if index < len(row):
                values[name] = " ".join(row[index].split())
        values["moodle_participant"] = re.sub(r"^\D+", "", values["moodle_participant"])  # "Participant 1234567"
        if values["name"].lower() == "points possible" and not values["student_id"]:
            continue  # the second header row of a Canvas gradebook export, not a student
        if not values["student_id"]:
            values["student_id"] = values["email"]  # e.g. a Gradescope roster without SIDs: the full e-mail
        if not values["student_id"]:
            problems.append(f"line {line}: no student id; row ignored ({values['name'] or 'no name'})")
            continue
        sid = values["student_id"]
        if sid in seen:
            duplicates.append(f"line {line}: student id {sid!r} already on line {seen[sid]}")
            problems.append(f"{duplicates[-1]}; this row is ignored")
            continue
        seen[sid] = line
        if not is_safe(sid):
            problems.append(f"line {line}: student id {sid!r} is not a safe submission name, so no submission can "
                            "match it; it is exported as missing")
        entries.append(_entry(values, line))
        _check_unique(emails, values["email"].casefold(), sid, line, "e-mail", problems)
        _check_unique(canvas_ids, values["canvas_id"], sid, line, "Canvas id", problems)
    if not entries:
        raise RosterError(f"roster {source}: a header but no students; export the class list with its rows")
    return Roster(tuple(entries), tuple(problems), source, tuple(duplicates), canvas_assignments(header))


CANVAS_ASSIGNMENT = re.compile(r"^(?P<name>.*\S)\s*\((?P<id>\d{1,18})\)$")  # "Module 3: Layers (123456)"


def canvas_assignments(header: list[str]) -> tuple[tuple[str, str], ...]:
    """The assignment columns of a Canvas gradebook export: (name, Canvas assignment id)."""
    return tuple((m["name"], m["id"]) for h in header if (m := CANVAS_ASSIGNMENT.match(" ".join(h.split()))))


def _delimiter(header_line: str) -> str:
    counts = {d: header_line.count(d) for d in (",", ";", "\t")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


def _map_columns(normalized: list[str], header: list[str]) -> tuple[list[tuple[int, str]], list[str]]:
    """(column index, field) pairs. Exact field names win over synonyms; Canvas exports are recognised."""
    canvas = {"student", "id"} <= set(normalized) and bool({"sis_user_id", "sis_login_id"} & set(normalized))
    chosen: dict[str, int] = {}
    used: set[int] = set()
    problems: list[str] = []
    for exact in (True, False):
        for index, norm in enumerate(normalized):
            target = (norm if norm in FIELDS else None) if exact else _target(norm, canvas)
            if target == "student_id" and "student_id" in chosen and norm in LOGIN_NAMES:
                target = "sis_login_id"  # "Student ID" and "Username" both: the username is the login
            if index in used or target is None:
                continue
            used.add(index)
            if target in chosen:
                problems.append(f"columns {header[chosen[target]].strip()!r} and {header[index].strip()!r} both "
                                f"give {target}; using {header[chosen[target]].strip()!r}")
            else:
                chosen[target] = index
    if canvas and "student_id" not in chosen:
        fallback = next((f for f in ("sis_login_id", "sis_user_id") if f in chosen), None)
        if fallback is not None:
            chosen["student_id"] = chosen[fallback]
    unknown = [h.strip() for i, h in enumerate(header) if i not in used and h.strip()
               and not (canvas and CANVAS_ASSIGNMENT.match(h.strip()))]
    if unknown:
        problems.append(f"columns not used: {', '.join(unknown)}")
    return [(index, name) for name, index in chosen.items()], problems


def _target(norm: str, canvas: bool) -> str | None:
    if canvas and norm == "id":
        return "canvas_id"
    if canvas and norm == "student":
        return "name"
    return next((f for f, names in SYNONYMS.items() if norm in names), None)


def _entry(values: dict[str, str], line: int) -> RosterEntry:
    first, last = values["first_name"], values["last_name"]
    name = values["name"]
    if not (first or last) and name:
        first, last = split_name(name)
    if not name:
        name = " ".join(p for p in (first, last) if p)
    return RosterEntry(**{**values, "name": name, "first_name": first, "last_name": last}, line=line)


def _check_unique(seen: dict[str, tuple[str, int]], key: str, sid: str, line: int, what: str,
                  problems: list[str]) -> None:
    if not key:
        return
    if key in seen:
        other, other_line = seen[key]
        problems.append(f"line {line}: {what} of {sid!r} is also given to {other!r} (line {other_line})")
    else:
        seen[key] = (sid, line)


def match_roster(roster: Roster, unclaimed: dict[str, StoredResult]) -> list[tuple[RosterEntry, list[StoredResult]]]:
    """Each roster entry with the submissions that claim it, taken out of ``unclaimed``: the one
    filed under its student id, and any filed under its full e-mail address."""
    by_email: dict[str, list[str]] = {}
    for sid, result in unclaimed.items():
        if result.email and result.student_id == result.email:  # filed by e-mail: no SID was given
            by_email.setdefault(result.email.casefold(), []).append(sid)
    matched = []
    for entry in roster.entries:
        ids = [entry.student_id] if entry.student_id in unclaimed else []
        if entry.email:
            ids += [sid for sid in by_email.get(entry.email.casefold(), []) if sid not in ids and sid in unclaimed]
        matched.append((entry, [unclaimed.pop(sid) for sid in ids]))
    return matched
