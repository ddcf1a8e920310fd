"""The bulk downloads of three LMSs, recognised by the names each gives its files.

Each naming below is taken from the LMS's own source or documentation:

Canvas, "Download Submissions" (canvas-lms ``lib/content_zipper.rb``): one file per attachment,

    <sortable name>[_LATE]_<user id>_<attachment id>_<file name>      e.g. doejane_LATE_4321_99001_homework.ipynb
    [LATE_]anon_<anonymous id>_<attachment id>_<file name>            anonymous grading

where the sortable name ("Doe, Jane") is lower-cased with every non-word character removed and
``_<digits>_`` taken out, so the first ``_<digits>_<digits>_`` is always the ids. Older Canvas wrote
``doe-jane-late_...``; both spellings of the late flag are read. Only the current submission's files
are in the download, so one user's files are the files of one submission.

Moodle, "Download all submissions" (``mod/assign/classes/downloader.php``; ``locallib.php`` before
4.1): a folder per student and plugin, or, with "Download submissions in folders" off, a prefix,

    <Full Name>_<participant id>_assignsubmission_file[_]/<file name>
    <Full Name>_<participant id>_assignsubmission_file_<file name>

``<participant id>`` is the assignment's participant number (``assign_user_mapping``), not the
user id: it is the "Participant <n>" of the grading worksheet's ``Identifier`` column, which is
how a roster maps it. Underscores in the name are written as spaces; blind marking writes
``Participant`` for the name. Only the current submission is in the download.

Blackboard Learn, "Assignment File Download" (Grade Center): every attempt's files and a
``.txt`` receipt per attempt,

    <Assignment>_<username>_attempt_<YYYY-MM-DD-HH-MM-SS>_<file name>
    <Assignment>_<username>_attempt_<YYYY-MM-DD-HH-MM-SS>.txt          "Name: Jane Doe (jdoe)", ...

The receipt's ``Name:`` line gives the username when the assignment name or the username holds
an underscore; otherwise the username is the last ``_`` part before ``_attempt_``.

A folder is one of these layouts when every notebook in it is named that way. A notebook that is
not (in a folder where the others are), or that two layouts could claim, is ambiguous: the batch
stops with an error naming it, rather than guess whose work it is.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..results.names import shown_name

CANVAS = re.compile(r"^(?:(?P<name>.+?)_)??(?:(?P<late>LATE|late)_)?(?P<user>\d+|anon_[A-Za-z0-9]+)_(?P<file_id>\d+)_"
                    r"(?P<file>.+)$")
MOODLE_DIR = re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z]+)_?$")
MOODLE_FILE = re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assignsubmission_file_(?P<file>.+)$")
BLACKBOARD = re.compile(r"^(?P<prefix>.+)_attempt_(?P<date>\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2})"
                        r"(?:_(?P<file>.+)|(?P<ext>\.[A-Za-z0-9]+))$")
RECEIPT_NAME = re.compile(r"^Name:\s*(?P<name>.*?)\s*\((?P<user>[^()\s]+)\)\s*$", re.MULTILINE)

NAMING = {
    "canvas": "a Canvas download: <name>_<user id>_<file id>_<file>",
    "moodle": "a Moodle download: <Full Name>_<participant id>_assignsubmission_file_<file>",
    "blackboard": "a Blackboard download: <Assignment>_<username>_attempt_<date>_<file>",
}
LABEL = {"canvas": "Canvas download", "moodle": "Moodle download", "blackboard": "Blackboard download"}


@dataclass(frozen=True)
class Found:
    """One submission file of an LMS download, with what its name says."""

    lms: str
    lms_id: str  # Canvas user id, Moodle participant id, Blackboard username ("" for Canvas anonymous grading)
    key: str  # whose submission it is in the download (the id, or Canvas's anonymous id)
    path: Path
    original: str  # the file's own name, as the student uploaded it
    name: str = ""
    attempt: str = ""  # sortable submission time ("" when the download holds one submission per student)
    late: bool = False
    upload: int | None = None  # Canvas's attachment id: a later upload of the student's has a larger one


def matchers() -> dict[str, Callable[[str], bool]]:
    return {"canvas": lambda n: CANVAS.match(n) is not None,
            "moodle": lambda n: MOODLE_FILE.match(n) is not None,
            "blackboard": lambda n: (m := BLACKBOARD.match(n)) is not None and m["ext"] != ".txt"}


def moodle_folders(folder: Path, dirs: list[Path]) -> tuple[list[Found], list[str]]:
    """The submissions of a Moodle download in folders, and the notebooks whose name is not Moodle's."""
    found, odd = [], []
    for d in dirs:
        m = MOODLE_DIR.match(d.name)
        if m is None:
            odd += [str(f.relative_to(folder)) for f in _files(d.rglob("*"))]
            continue
        if m["plugin"] != "file":  # online text and the like: nothing to grade
            continue
        found += [Found("moodle", m["id"], m["id"], f, f.name, name=m["name"].strip()) for f in _files(d.rglob("*"))]
    return found, odd


def parse_files(lms: str, files: Iterable[Path], receipts: dict[str, str]) -> list[Found]:
    """The submissions among loose files named the ``lms`` way (every file matches: checked before)."""
    out = []
    for f in files:
        if lms == "canvas":
            m = CANVAS.match(f.name)
            assert m is not None
            name = m["name"] or ""
            late = bool(m["late"]) or name.lower().endswith("-late")
            user = m["user"]
            out.append(Found("canvas", "" if user.startswith("anon_") else user, user, f, m["file"],
                             name=name.removesuffix("-late"), late=late, upload=int(m["file_id"][:18])))
        elif lms == "moodle":
            m = MOODLE_FILE.match(f.name)
            assert m is not None
            out.append(Found("moodle", m["id"], m["id"], f, m["file"], name=m["name"].strip()))
        else:
            m = BLACKBOARD.match(f.name)
            assert m is not None
            user, full_name = _blackboard_user(m["prefix"], receipts.get(f"{m['prefix']}_attempt_{m['date']}", ""))
            out.append(Found("blackboard", user, user, f, m["file"] or f.name, name=full_name, attempt=m["date"]))
    return out


def blackboard_receipts(files: Iterable[Path], read: Callable[[Path], str]) -> dict[str, str]:
    """Each attempt's receipt text, by ``<prefix>_attempt_<date>``."""
    receipts = {}
    for f in files:
        m = BLACKBOARD.match(f.name)
        if m is not None and m["ext"] == ".txt":
            receipts[f.name[:-4]] = read(f)
    return receipts


def _blackboard_user(prefix: str, receipt: str) -> tuple[str, str]:
    """(username, full name): the receipt's ``Name: Full Name (username)`` when it fits the file name."""
    m = RECEIPT_NAME.search(receipt)
    if m is not None and prefix.endswith("_" + m["user"]):
        return m["user"], shown_name(m["name"], 200)
    return prefix.rsplit("_", 1)[-1], ""


def by_submission(found: Iterable[Found]) -> dict[tuple[str, str], list[Found]]:
    """The files of each submission: one student's files of one attempt."""
    groups: dict[tuple[str, str], list[Found]] = defaultdict(list)
    for f in found:
        groups[(f.key, f.attempt)].append(f)
    return groups


def attempt_time(date: str) -> str:
    """Blackboard's 2026-11-30-12-00-00 as 2026-11-30 12:00:00."""
    return f"{date[:10]} {date[11:].replace('-', ':')}" if len(date) == 19 else date


def _files(paths: Iterable[Path]) -> list[Path]:
    return sorted(p for p in paths if p.is_file() and not p.is_symlink() and "__MACOSX" not in p.parts)
