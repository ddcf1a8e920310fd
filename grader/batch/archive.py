"""Safe extraction of a submissions ``.zip``: every member is validated before anything is written.

A member that could escape the folder (absolute, ``..``) or a bomb refuses the whole archive. A
symbolic link or another special file is one student's odd upload, not a broken archive: it is
skipped, and the note naming it is returned, so the rest of the class is still graded.
"""

from __future__ import annotations

import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import SubmissionError
from ..results.names import shown_name


@dataclass(frozen=True)
class ArchiveLimits:
    max_members: int = 5000
    max_total_bytes: int = 500 * 1024 * 1024
    max_member_bytes: int = 20 * 1024 * 1024
    max_ratio: int = 200  # a member that inflates more than this is a zip bomb


def extract_zip(archive: Path, dest: Path, limits: ArchiveLimits = ArchiveLimits()) -> list[str]:
    """Extract ``archive`` into ``dest`` or raise SubmissionError naming the first bad member;
    returns a note for each member skipped (symbolic links, special files)."""
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as e:
        raise SubmissionError(f"{archive.name}: not a readable zip file ({e})") from None
    with zf:
        members = zf.infolist()
        if len(members) > limits.max_members:
            raise SubmissionError(f"{archive.name}: {len(members)} members, over the {limits.max_members} limit")
        total = 0
        notes: list[str] = []
        kept: list[zipfile.ZipInfo] = []
        for m in members:
            _validate(archive.name, m, limits)
            skipped = _special(m)
            if skipped:
                notes.append(f"{_member(m)}: {skipped} in {shown_name(archive.name)}; skipped")
                continue
            kept.append(m)
            total += m.file_size
        if total > limits.max_total_bytes:
            raise SubmissionError(f"{archive.name}: unpacks to {total} bytes, over the {limits.max_total_bytes} limit")
        root = dest.resolve()
        for m in kept:
            target = (root / m.filename).resolve()
            if not target.is_relative_to(root):
                raise SubmissionError(f"{archive.name}: member {_member(m)} would land outside the folder")
            if m.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(m) as src, target.open("wb") as out:
                remaining = limits.max_member_bytes + 1
                while chunk := src.read(min(1 << 20, remaining)):
                    out.write(chunk)
                    remaining -= len(chunk)
                if remaining <= 0:
                    raise SubmissionError(f"{archive.name}: member {_member(m)} is larger than it claims")
    return notes


def _member(m: zipfile.ZipInfo) -> str:
    return f"'{shown_name(m.filename, 200)}'"


def _special(m: zipfile.ZipInfo) -> str:
    """Why a member is not extracted ("" for a regular file or folder)."""
    kind = stat.S_IFMT(m.external_attr >> 16)  # 0 when the archiver recorded no Unix type (e.g. on Windows)
    if kind == stat.S_IFLNK:
        return "a symbolic link"
    if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
        return "not a regular file"
    return ""


def _validate(name: str, m: zipfile.ZipInfo, limits: ArchiveLimits) -> None:
    path = PurePosixPath(m.filename.replace("\\", "/"))
    if m.filename.startswith(("/", "\\")) or path.is_absolute() or (path.parts and ":" in path.parts[0]):
        raise SubmissionError(f"{name}: member {_member(m)} has an absolute path")
    if ".." in path.parts:
        raise SubmissionError(f"{name}: member {_member(m)} climbs out with '..'")
    if m.file_size > limits.max_member_bytes:
        raise SubmissionError(f"{name}: member {_member(m)} is {m.file_size} bytes, over the limit")
    if m.compress_size and m.file_size / m.compress_size > limits.max_ratio:
        raise SubmissionError(f"{name}: member {_member(m)} inflates {m.file_size // m.compress_size}x (zip bomb?)")
