"""Find the submissions in a batch source: a folder of files, nbgrader's ``submitted/`` tree,
a Gradescope export, or a ``.zip`` of any of these. Nothing here reads a notebook's content."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SubmissionError
from .archive import extract_zip
from .names import check_name

SUFFIXES = (".ipynb", ".py")
PREFERRED = ("11_embeddings.ipynb", "embeddings.ipynb", "embeddings_dev.ipynb", "11_embeddings.py")


@dataclass(frozen=True)
class Entry:
    """One student's submission file, with what the source says about the student."""

    student_id: str
    path: Path
    name: str = ""
    email: str = ""
    submitted_at: str = ""


@dataclass
class Discovery:
    layout: str
    entries: list[Entry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def discover(source: Path, scratch: Path) -> Discovery:
    """Detect the layout of ``source`` and list its submissions; problems are reported, not fatal."""
    if source.is_symlink():
        raise SubmissionError(f"{source}: is a symbolic link; give the folder or zip itself")
    if source.is_file() and source.suffix.lower() == ".zip":
        target = scratch / "unzipped"
        target.mkdir(parents=True, exist_ok=True)
        extract_zip(source, target)
        inner = discover(_single_root(target), scratch / "inner")
        inner.layout = f"zip of {inner.layout}"
        return inner
    if not source.is_dir():
        raise SubmissionError(f"{source}: not a folder or .zip of submissions")
    if (source / "submission_metadata.yml").is_file():
        return _gradescope(source)
    if (source / "submitted").is_dir():
        return _nbgrader(source / "submitted")
    if source.name == "submitted" and any(_nbgrader_like(d) for d in _dirs(source)):
        return _nbgrader(source)
    return _flat(source)


def _single_root(folder: Path) -> Path:
    """A zip that wraps everything in one folder is treated as that folder."""
    children = [c for c in folder.iterdir() if c.name != "__MACOSX"]
    return children[0] if len(children) == 1 and children[0].is_dir() and not children[0].is_symlink() else folder


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
            found.problems.append(f"{_shown(f.name)}: symbolic link refused")
            continue
        _add(found, f.stem, f)
    return found


def _nbgrader(submitted: Path) -> Discovery:
    found = Discovery("nbgrader submitted/")
    for student in sorted(submitted.iterdir()):
        if student.is_symlink() or not student.is_dir():
            found.problems.append(f"{_shown(student.name)}: not a student folder (symbolic link or file)")
            continue
        assignments = _dirs(student)
        if len(assignments) > 1:
            preferred = [a for a in assignments if "embedding" in a.name.lower() or a.name.startswith("11")]
            assignments = preferred[:1] or assignments[:1]
        if not assignments:
            found.problems.append(f"{_shown(student.name)}: no assignment folder")
            continue
        notebook = _pick(assignments[0].iterdir(), found, student.name)
        if notebook is not None:
            stamp = assignments[0] / "timestamp.txt"
            when = stamp.read_text(encoding="utf-8", errors="replace").strip()[:64] if stamp.is_file() else ""
            _add(found, student.name, notebook, submitted_at=when)
    return found


def _gradescope(folder: Path) -> Discovery:
    import yaml

    found = Discovery("Gradescope export")
    try:
        meta: dict[str, Any] = yaml.safe_load((folder / "submission_metadata.yml").read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, OSError) as e:
        raise SubmissionError(f"submission_metadata.yml: cannot be read ({str(e)[:120]})") from None
    for key, info in sorted(meta.items()):
        sub_dir = folder / str(key)
        if not isinstance(info, dict):
            found.problems.append(f"{_shown(str(key))}: metadata entry is not a mapping")
            continue
        if sub_dir.is_symlink() or not sub_dir.is_dir():
            found.problems.append(f"{_shown(str(key))}: listed in the metadata but has no folder")
            continue
        submitters = info.get(":submitters") or info.get("submitters") or [{}]
        first = submitters[0] if isinstance(submitters, list) and submitters and isinstance(submitters[0], dict) else {}
        sid = str(first.get(":sid") or first.get("sid") or "").strip()
        email = str(first.get(":email") or first.get("email") or "")
        student = sid or email.split("@")[0] or str(key)
        notebook = _pick(sub_dir.rglob("*"), found, student)
        if notebook is not None:
            _add(found, student, notebook, name=str(first.get(":name") or first.get("name") or ""), email=email,
                 submitted_at=str(info.get(":created_at") or info.get("created_at") or ""))
    return found


def _pick(files: Iterable[Path], found: Discovery, student: str) -> Path | None:
    """The one notebook of a submission folder: a module-11 name, or the only candidate."""
    candidates = []
    for f in files:
        if f.suffix.lower() in SUFFIXES:
            if f.is_symlink():
                found.problems.append(f"{_shown(student)}: {_shown(f.name)} is a symbolic link, refused")
            elif f.is_file() and "checkpoint" not in f.name:
                candidates.append(f)
    by_name = [f for f in candidates if f.name in PREFERRED]
    if by_name:
        return sorted(by_name, key=lambda f: PREFERRED.index(f.name))[0]
    notebooks = [f for f in candidates if f.suffix == ".ipynb"] or candidates
    if len(notebooks) == 1:
        return notebooks[0]
    found.problems.append(f"{_shown(student)}: " + ("no notebook found" if not notebooks else
                          f"{len(notebooks)} notebooks and none named like module 11; skipped"))
    return None


def _add(found: Discovery, student: str, path: Path, **info: str) -> None:
    reason = check_name(student, "student id")
    if reason is not None:
        found.problems.append(reason)
        return
    if any(e.student_id == student for e in found.entries):
        found.problems.append(f"{student}: more than one submission; the first one is graded")
        return
    found.entries.append(Entry(student, path, **info))


def _shown(name: str) -> str:
    return name.encode("unicode_escape").decode("ascii")[:80]
