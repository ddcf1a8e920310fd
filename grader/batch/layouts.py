"""Find the submissions in a batch source: a folder of files, nbgrader's ``submitted/`` tree,
a Gradescope export, a Canvas, Moodle or Blackboard download (grader/batch/lms.py), or a ``.zip``
of any of these. Nothing here reads a notebook's content. Which roster student a download's id
is, and which of a student's submissions counts, is decided next (grader/batch/identify.py).

Identity is matched exactly. A Gradescope submission is filed under each submitter's SID, or,
without one, the submitter's full e-mail address (never its local part: ``bob@evil.example`` is
not ``bob``); two submissions claiming one student stop the batch with an error naming both.
Every name taken from a submission (file names, names, e-mails, timestamps) is stored through
``shown_name``: no control character, bidi override or lone surrogate reaches a log or a file.
A file whose name is not valid UTF-8 is graded; its name is stored and shown with the bytes escaped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from ..errors import SubmissionError
from ..results.names import check_name, is_safe, shown_name
from . import lms
from .archive import extract_zip

SUFFIXES = (".ipynb", ".py")


def preferred_names() -> tuple[str, ...]:
    """The learner file names of the installed course modules, most preferred first."""
    from .. import modules

    return tuple(dict.fromkeys(name for unit in modules.installed().values() for name in unit.file_names))


@dataclass(frozen=True)
class Entry:
    """One student's submission file, with what the source says about the student."""

    student_id: str
    path: Path
    name: str = ""
    email: str = ""
    submitted_at: str = ""
    lms: str = ""  # "canvas", "moodle" or "blackboard" for an LMS download
    lms_id: str = ""  # the LMS's own id of the student: Canvas user id, Moodle participant id, Blackboard username
    attempt: str = ""  # sortable submission time among one student's submissions ("" = the source gives none)
    late: bool = False  # the LMS marked it late (Canvas)
    notes: tuple[str, ...] = ()  # for the student's report: which file of several was graded, and why


@dataclass
class Discovery:
    layout: str
    entries: list[Entry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    ambiguous: list[str] = field(default_factory=list)  # files whose owner cannot be told: the batch stops
    superseded: list[Entry] = field(default_factory=list)  # older submissions of a student (grader/batch/identify.py)


def discover(source: Path, scratch: Path) -> Discovery:
    """Detect the layout of ``source`` and list its submissions; problems are reported, not fatal."""
    if source.is_symlink():
        raise SubmissionError(f"{source}: is a symbolic link; give the folder or zip itself")
    if source.is_file() and source.suffix.lower() == ".zip":
        target = scratch / "unzipped"
        target.mkdir(parents=True, exist_ok=True)
        notes = extract_zip(source, target)
        inner = discover(_single_root(target), scratch / "inner")
        inner.layout = f"zip of {inner.layout}"
        inner.problems[:0] = notes
        return inner
    if not source.is_dir():
        raise SubmissionError(f"{source}: not a folder or .zip of submissions")
    if not os.access(source, os.R_OK | os.X_OK):
        raise SubmissionError(f"{source}: this user may not read that folder; fix its permissions, or run the batch "
                              "as a user who can read the submissions")
    if (source / "submission_metadata.yml").is_file():
        return _gradescope(source)
    if (source / "submitted").is_dir():
        return _nbgrader(source / "submitted")
    if source.name == "submitted" and any(_nbgrader_like(d) for d in _dirs(source)):
        return _nbgrader(source)
    return _lms_download(source) or _flat(source)


def _lms_download(folder: Path) -> Discovery | None:
    """A Canvas, Moodle or Blackboard download, when the names of its notebooks say so."""
    dirs = [d for d in _dirs(folder) if d.name != "__MACOSX"]
    loose = sorted(f for f in folder.iterdir() if f.suffix.lower() in SUFFIXES and (f.is_file() or f.is_symlink()))
    if any(lms.MOODLE_DIR.match(d.name) for d in dirs):
        found = Discovery("Moodle download (a folder per student)")
        files, odd = lms.moodle_folders(folder, dirs)
        notebooks = [f for f in files if f.path.suffix.lower() in SUFFIXES]
        odd = [o for o in odd if PurePath(o).suffix.lower() in SUFFIXES] + [f.name for f in loose]
        found.ambiguous += [_odd(o, "moodle") for o in odd]
        return _lms_entries(found, notebooks)
    matches = {name: [f for f in loose if matcher(f.name)] for name, matcher in lms.matchers().items()}
    best = max(matches, key=lambda name: len(matches[name]))
    if not matches[best]:
        return None
    found = Discovery(lms.LABEL[best])
    complete = [name for name, files in matches.items() if len(files) == len(loose)]
    if len(complete) > 1:
        found.ambiguous.append(f"{shown_name(loose[0].name)}: named like {' and like '.join(lms.NAMING[n] for n in complete)}"
                               "; every file is, so the layout cannot be told")
        return found
    found.ambiguous += [_odd(f.name, best) for f in loose if f not in matches[best]]
    kept = []
    for f in matches[best]:
        if f.is_symlink():
            found.problems.append(f"{shown_name(f.name)}: symbolic link refused")
        else:
            kept.append(f)
    receipts = lms.blackboard_receipts(folder.iterdir(), _receipt) if best == "blackboard" else {}
    return _lms_entries(found, lms.parse_files(best, kept, receipts))


def _odd(name: str, layout: str) -> str:
    return (f"{shown_name(name, 200)}: not named like the rest of this {lms.LABEL[layout]} "
            f"({lms.NAMING[layout]}), so whose work it is cannot be told; remove it or give it its student's "
            "name the same way")


def _receipt(path: Path) -> str:
    """The head of a Blackboard receipt (its Name: line is near the top)."""
    if path.is_symlink() or not path.is_file():
        return ""
    with path.open("rb") as f:
        return f.read(4096).decode("utf-8", errors="replace")


def _lms_entries(found: Discovery, files: list[lms.Found]) -> Discovery:
    for (_key, _attempt), group in sorted(lms.by_submission(files).items()):
        first = group[0]
        originals = {f.path: f.original for f in group}
        uploads = {f.path: f.upload for f in group}
        who = f"{first.key} ({first.name})" if first.name else first.key
        picked = _pick([f.path for f in group], found, who, original=originals.__getitem__, upload=uploads.get)
        if picked is not None:
            notebook, older, notes = picked
            info: dict[str, Any] = dict(name=first.name, submitted_at=lms.attempt_time(first.attempt), lms=first.lms,
                                        lms_id=first.lms_id, late=first.late)
            _add(found, first.key, notebook, attempt=first.attempt, notes=notes, **info)
            found.superseded += [Entry(first.key, path, attempt=_attempt_name(path), **info) for path in older]
    return found


def _single_root(folder: Path) -> Path:
    """A zip that wraps everything in one folder is treated as that folder (unless that folder is
    a Moodle download's only student)."""
    children = [c for c in folder.iterdir() if c.name != "__MACOSX"]
    if len(children) != 1 or not children[0].is_dir() or children[0].is_symlink():
        return folder
    return folder if lms.MOODLE_DIR.match(children[0].name) else children[0]


def _dirs(folder: Path) -> list[Path]:
    return sorted(d for d in folder.iterdir() if d.is_dir() and not d.is_symlink())


def _nbgrader_like(student_dir: Path) -> bool:
    return any(any(f.suffix == ".ipynb" for f in a.iterdir()) for a in _dirs(student_dir))


def _flat(folder: Path) -> Discovery:
    found = Discovery("folder of files")
    for f in sorted(folder.iterdir()):
        if f.suffix.lower() not in SUFFIXES:
            continue
        if f.is_symlink():
            found.problems.append(f"{shown_name(f.name)}: symbolic link refused")
            continue
        _add(found, f.stem, f)
    return found


def _nbgrader(submitted: Path) -> Discovery:
    found = Discovery("nbgrader submitted/")
    for student in sorted(submitted.iterdir()):
        if student.is_symlink() or not student.is_dir():
            found.problems.append(f"{shown_name(student.name)}: not a student folder (symbolic link or file)")
            continue
        assignments = _dirs(student)
        if len(assignments) > 1:
            preferred = [a for a in assignments if _names_a_unit(a.name)]
            assignments = preferred[:1] or assignments[:1]
        if not assignments:
            found.problems.append(f"{shown_name(student.name)}: no assignment folder")
            continue
        picked = _pick(assignments[0].iterdir(), found, student.name)
        if picked is not None:
            _add(found, student.name, picked[0], submitted_at=_timestamp(assignments[0] / "timestamp.txt"),
                 notes=picked[2])
    return found


def _names_a_unit(folder: str) -> bool:
    """An nbgrader assignment folder named like an installed course module (its name in it, or
    its number first: ``NN_name``, ``NN``)."""
    from .. import modules

    text = folder.lower().replace("-", "_")
    number = re.match(r"^(\d{1,3})(?!\d)", text)
    return any(unit.name in text or (number is not None and unit.number == int(number.group(1)))
               for unit in modules.installed().values())


def _timestamp(stamp: Path) -> str:
    """nbgrader's ``timestamp.txt``: its first line, at most 64 characters, shown safely."""
    if stamp.is_symlink() or not stamp.is_file():
        return ""
    with stamp.open("rb") as f:
        head = f.read(256).decode("utf-8", errors="replace")
    return shown_name(head.strip().split("\n")[0], 64)


def _gradescope(folder: Path) -> Discovery:
    import yaml

    found = Discovery("Gradescope export")
    try:
        meta: dict[str, Any] = yaml.safe_load((folder / "submission_metadata.yml").read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as e:
        raise SubmissionError(f"submission_metadata.yml: cannot be read ({shown_name(str(e), 120)})") from None
    if not isinstance(meta, dict):
        raise SubmissionError("submission_metadata.yml: not a mapping of submissions; give Gradescope's export as is")
    claims: dict[str, str] = {}  # identity (folded) -> the submission that claims it
    for key, info in sorted(meta.items(), key=lambda kv: str(kv[0])):
        key = str(key)
        sub_dir = folder / key
        if not isinstance(info, dict):
            found.problems.append(f"{shown_name(key)}: metadata entry is not a mapping")
            continue
        if not is_safe(key) or sub_dir.is_symlink() or not sub_dir.is_dir():
            found.problems.append(f"{shown_name(key)}: listed in the metadata but has no folder")
            continue
        submitters = _submitters(info, key)
        for who in submitters:
            other = claims.setdefault(_folded(who.student_id), key)
            if other != key:
                raise SubmissionError(
                    f"Gradescope export: submissions {shown_name(other)} and {shown_name(key)} both claim student "
                    f"'{shown_name(who.student_id)}'; nothing was graded. Keep one of them (fix "
                    "submission_metadata.yml or remove a folder) and run the batch again")
        picked = _pick(sub_dir.rglob("*"), found, key)
        if picked is None:
            continue
        notebook = picked[0]
        when = shown_name(str(info.get(":created_at") or info.get("created_at") or ""), 64)
        for who in submitters:
            _add(found, who.student_id, notebook, name=who.name, email=who.email, submitted_at=when)
    return found


@dataclass(frozen=True)
class _Submitter:
    student_id: str
    name: str
    email: str


def _submitters(info: dict[str, Any], key: str) -> list[_Submitter]:
    """Everyone a submission is filed under (a group submission counts for each member): the SID,
    else the full e-mail; a submission that names nobody is filed under its own key."""
    raw = info.get(":submitters") or info.get("submitters") or []
    found: dict[str, _Submitter] = {}
    for person in raw if isinstance(raw, list) else []:
        if not isinstance(person, dict):
            continue
        sid = _field(person, "sid")
        email = _field(person, "email")
        ident = sid or email
        if ident and _folded(ident) not in {_folded(i) for i in found}:
            found[ident] = _Submitter(ident, shown_name(_field(person, "name"), 200), shown_name(email, 200))
    return list(found.values()) or [_Submitter(key, "", "")]


def _field(person: dict[str, Any], name: str) -> str:
    value = person.get(f":{name}", person.get(name))
    return "" if value is None or isinstance(value, dict | list) else str(value).strip()


def _folded(identity: str) -> str:
    """E-mail addresses are one identity whatever their case; SIDs are compared as written."""
    return identity.casefold() if "@" in identity else identity


Picked = tuple[Path, list[Path], tuple[str, ...]]  # the notebook, the older uploads left out, notes on the choice


def _pick(files: Iterable[Path], found: Discovery, student: str, original: Callable[[Path], str] = lambda f: f.name,
          upload: Callable[[Path], int | None] = lambda f: None) -> Picked | None:
    """The one notebook of a submission: the course module's learner file name (``original``: the
    name the student gave it, for downloads that rename files), or the only candidate. Several
    candidates and no such name: ambiguous, named in ``found.ambiguous``.

    Several uploads of the learner file (Canvas renames a re-upload ``name-1.ipynb``, ``name-2``)
    are ordered by what the layout says: the LMS's upload id, then the ``-N`` suffix, then, as a
    last resort, the file times. The newest is graded; the others are returned as older attempts,
    and the notes say which was graded and which were left out."""
    candidates = []
    for f in files:
        if f.suffix.lower() in SUFFIXES:
            if f.is_symlink():
                found.problems.append(f"{shown_name(student)}: {shown_name(f.name)} is a symbolic link, refused")
            elif f.is_file() and "checkpoint" not in f.name:
                candidates.append(f)
    preferred = preferred_names()
    by_name = [f for f in candidates if _learner_name(original(f)) in preferred]
    if by_name:
        best = min(preferred.index(_learner_name(original(f))) for f in by_name)
        same = [f for f in by_name if preferred.index(_learner_name(original(f))) == best]
        return _newest(same, found, student, original, upload)
    notebooks = [f for f in candidates if f.suffix == ".ipynb"] or candidates
    if len(notebooks) == 1:
        return notebooks[0], [], ()
    if not notebooks:
        found.problems.append(f"{shown_name(student)}: no notebook found")
    else:
        found.ambiguous.append(f"{shown_name(student)}: {len(notebooks)} notebooks in one submission and none named "
                               f"like the course module ({', '.join(shown_name(f.name, 120) for f in notebooks)}); "
                               "keep the one to grade")
    return None


def _newest(files: list[Path], found: Discovery, student: str, original: Callable[[Path], str],
            upload: Callable[[Path], int | None]) -> Picked | None:
    if len(files) == 1:
        return files[0], [], ()
    orders: tuple[tuple[str, Callable[[Path], int | None]], ...] = (
        ("the LMS's upload ids", upload), ("the -N suffixes the LMS gives re-uploads", _suffix),
        ("the file times (nothing else orders them)", lambda f: f.stat().st_mtime_ns))
    for how, key in orders:
        values = [v for f in files if (v := key(f)) is not None]
        if len(values) == len(files) and len(set(values)) == len(values):
            ordered = [f for _, f in sorted(zip(values, files, strict=True))]
            newest, older = ordered[-1], ordered[:-1]
            left_out = ", ".join(shown_name(original(f), 120) for f in older)
            note = (f"{len(files)} uploads of the notebook: graded {shown_name(original(newest), 120)}, the newest by "
                    f"{how}; left out {left_out}")
            found.problems.append(f"{shown_name(student)}: {note}")
            return newest, older, (note,)
    found.ambiguous.append(f"{shown_name(student)}: {len(files)} uploads of the notebook "
                           f"({', '.join(shown_name(original(f), 120) for f in files)}) and nothing says which is the "
                           "newest; keep one")
    return None


def _suffix(path: Path) -> int:
    """Canvas's re-upload number: 0 for ``name.ipynb``, N for ``name-N.ipynb``."""
    m = re.search(r"-(\d{1,9})$", path.stem)
    return int(m[1]) if m else 0


def _attempt_name(path: Path) -> str:
    """An older upload's name in reports/attempts/: its file stem, safe as a file name."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", path.stem)[:100] or "attempt"


def _learner_name(name: str) -> str:
    """A file name without the "-1", "-2" an LMS appends to a re-uploaded file of the same name."""
    stem, dot, suffix = name.rpartition(".")
    return re.sub(r"-\d+$", "", stem) + dot + suffix if dot else name


def _add(found: Discovery, student: str, path: Path, **info: Any) -> None:
    reason = check_name(student, "student id")
    if reason is not None:
        found.problems.append(reason)
        return
    found.entries.append(Entry(student, path, **info))
