"""Find a student's work for one module in a TinyTorch checkout, and the bundled rubric for it.

A checkout is the nearest directory, at or above the start, whose ``modules/`` or ``src/`` holds
``NN_name`` folders. A module is named by number (``NN``), name or both (``NN_name``). The learner
notebook (``modules/NN_name/*.ipynb``) is preferred over the developer source
(``src/NN_name/NN_name.py``), because that is the file students edit.

Pure path logic and a little TOML: nothing here imports the grading pipeline, so ``tito`` and the
pytest plugin can resolve a module before they pay for the heavy imports.
"""

from __future__ import annotations

import hashlib
import re

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (the student package supports it): the same parser, as tomli
    import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import LocateError as LocateError  # re-exported: it lived here before errors.py

_FOLDER = re.compile(r"^(\d{1,3})_([a-z][a-z0-9_]*)$")
_SPEC = re.compile(r"^(?:(\d{1,3})|([a-z][a-z0-9_]*)|(\d{1,3})_([a-z][a-z0-9_]*))$")
RUBRIC_SELECTOR = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]{0,127})(?:@(?:sha256:)?([0-9a-f]{8,64}))?$")


@dataclass(frozen=True)
class ModuleRef:
    """A module as the user named it: a number, a name, or both."""

    number: int | None
    name: str | None

    def matches(self, number: int, name: str) -> bool:
        return (self.number is None or self.number == number) and (self.name is None or self.name == name)

    def folder_pattern(self) -> str:
        """How a folder of this module is spelled, for error messages: ``NN_name`` with what is known."""
        number = f"{self.number:02d}" if self.number is not None else "NN"
        return f"{number}_{self.name or 'name'}"

    def __str__(self) -> str:
        parts = [f"{self.number:02d}" if self.number is not None else None, self.name]
        return "_".join(p for p in parts if p)


@dataclass(frozen=True)
class ModuleWork:
    """The file to grade, and which module it is."""

    path: Path
    number: int | None
    name: str
    checkout: Path | None = None
    note: str = ""  # which file was graded and why, when there was a choice (shown to the student)

    @property
    def label(self) -> str:
        """``module NN name``: how reports and summaries name the module."""
        return module_label(self.number, self.name)


def module_label(number: int | None, name: str) -> str:
    return f"module {number} {name}" if number is not None else f"module {name}"


def parse_module(spec: str) -> ModuleRef:
    """``NN``, ``name`` or ``NN_name`` (case and ``-`` vs ``_`` do not matter)."""
    text = spec.strip().lower().replace("-", "_")
    m = _SPEC.match(text)
    if m is None:
        raise LocateError(f"invalid module {spec!r}: give its number, its name or both (NN_name)")
    number, name, both_number, both_name = m.groups()
    if number is not None:
        return ModuleRef(int(number), None)
    if name is not None:
        return ModuleRef(None, name)
    return ModuleRef(int(both_number), both_name)


def find_checkout(starts: Iterable[Path]) -> Path | None:
    """The nearest directory at or above one of ``starts`` that looks like a TinyTorch checkout."""
    for start in starts:
        for folder in (start.resolve(), *start.resolve().parents):
            if _module_folders(folder):
                return folder
    return None


def locate(spec: str | ModuleRef, starts: Sequence[Path], *, hint: str = "") -> ModuleWork:
    """The student's work for a module in the checkout around ``starts``; LocateError says where we looked."""
    ref = parse_module(spec) if isinstance(spec, str) else spec
    tail = f"; {hint}" if hint else ""
    checkout = find_checkout(starts)
    if checkout is None:
        where = " or ".join(str(s) for s in dict.fromkeys(p.resolve() for p in starts))
        raise LocateError(f"no TinyTorch checkout at or above {where} (looked for modules/NN_name/ and "
                          f"src/NN_name/ folders): run this inside your TinyTorch folder{tail}")
    folders = _module_folders(checkout)
    hits = sorted({(n, name) for n, name, _ in folders if ref.matches(n, name)})
    if not hits:
        known = ", ".join(sorted({f"{n:02d}_{name}" for n, name, _ in folders}))
        raise LocateError(f"no module {ref} in {checkout}: looked for modules/{ref.folder_pattern()}/*.ipynb "
                          f"and src/{ref.folder_pattern()}/{ref.folder_pattern()}.py; modules there: {known}{tail}")
    if len(hits) > 1:
        names = ", ".join(f"{n:02d}_{name}" for n, name in hits)
        raise LocateError(f"module {ref} is ambiguous in {checkout} ({names}): name it as NN_name{tail}")
    number, name = hits[0]
    folder = f"{number:02d}_{name}"
    notebook_dir, source = checkout / "modules" / folder, checkout / "src" / folder / f"{folder}.py"
    picked = _pick_notebook(notebook_dir, folder, name, tail, checkout)
    if picked is not None:
        return ModuleWork(picked[0], number, name, checkout, picked[1])
    if source.is_file():
        return ModuleWork(source, number, name, checkout)
    raise LocateError(f"no work for module {folder} in {checkout}: looked for modules/{folder}/*.ipynb and "
                      f"src/{folder}/{folder}.py (start the module first, e.g. tito module start {number:02d}){tail}")


def _module_folders(root: Path) -> list[tuple[int, str, Path]]:
    found = []
    for parent in (root / "modules", root / "src"):
        try:
            children = list(parent.iterdir())
        except OSError:  # missing, not a folder, or unreadable: not a checkout layout here
            continue
        for child in children:
            m = _FOLDER.match(child.name)
            if m and child.is_dir():
                found.append((int(m.group(1)), m.group(2), child))
    return found


def _pick_notebook(folder: Path, dirname: str, name: str, tail: str, checkout: Path) -> tuple[Path, str] | None:
    """The student's notebook among every candidate in the module folder: the names the course
    generates, Jupyter's copies (``-Copy1``), ``Untitled*`` notebooks that define classes.

    With git: the one notebook that differs from the checkout (or is new); two or more that do are
    a question for the student (--notebook). Unchanged ones hold TinyTorch's committed code, and
    grading one says so. Without git: a known name, unless a copy of it is newer (the student's
    ``Save as``), else the only notebook. The note says which was graded and which were not."""
    if not folder.is_dir():
        return None
    preferred = [f"{dirname}.ipynb", f"{name}.ipynb", f"{name}_dev.ipynb"]
    notebooks = sorted(p for p in folder.glob("*.ipynb") if p.is_file() and _candidate(p))
    if not notebooks:
        return None
    known = [folder / n for n in preferred if folder / n in notebooks]
    changed = {p: state for p in notebooks if (state := _git_state(checkout, p)) is not None}
    if changed and len(changed) == len(notebooks):
        edited = [p for p in notebooks if changed[p] != "unchanged"]
        if len(edited) > 1:
            listed = ", ".join(p.name for p in edited)
            raise LocateError(f"several notebooks in {folder} were changed since the checkout ({listed}): say which "
                              f"to grade with --notebook PATH{tail}")
        if edited:
            return edited[0], _others_note(edited[0], notebooks, "the one changed since the checkout")
        chosen = known[0] if known else max(notebooks, key=_mtime)
        return chosen, (f"{chosen.name} is TinyTorch's own notebook, unchanged since the checkout: it holds the code "
                        "TinyTorch ships, not yours; if your work is in another file, pass --notebook PATH")
    newest = max(notebooks, key=_mtime)
    if known and (newest == known[0] or _mtime(newest) <= _mtime(known[0]) + 1):
        return known[0], _others_note(known[0], notebooks, "the course's file name")
    if known or len(notebooks) == 1:
        return newest, _others_note(newest, notebooks, "the one you changed last")
    listed = ", ".join(p.name for p in notebooks)
    raise LocateError(f"several notebooks in {folder} ({listed}) and none is named {dirname}.ipynb: "
                      f"name the one to grade explicitly{tail}")


def _candidate(path: Path) -> bool:
    """A notebook the student may have written the module in (an empty Untitled one is not)."""
    if not path.name.lower().startswith("untitled"):
        return True
    try:
        with path.open("rb") as f:
            return b"class " in f.read(4 << 20)
    except OSError:
        return False


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _others_note(chosen: Path, notebooks: list[Path], why: str) -> str:
    others = [p.name for p in notebooks if p != chosen]
    return f"graded {chosen.name} ({why}); not graded: {', '.join(others)}" if others else ""


def _git_state(checkout: Path, path: Path) -> str | None:
    """"unchanged", "changed" or "new" against the checkout's git index; None without git.

    Only ``git ls-files`` runs (it reads the index; ``git status`` could run a clean filter or an
    fsmonitor command from the repository's own config), and the file's blob hash is computed
    here, from at most 64 MB of it."""
    import subprocess

    try:
        done = subprocess.run(["git", "-c", "core.fsmonitor=false", "-C", str(checkout), "ls-files", "-s", "--",
                               str(path)], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    fields = done.stdout.split()
    if len(fields) < 2:
        return "new"
    try:
        with path.open("rb") as f:
            content = f.read(64 << 20)
    except OSError:
        return None
    header = b"blob %d\0" % len(content)
    blob = (hashlib.sha256(header + content).hexdigest() if len(fields[1]) == 64  # a sha256 repository
            else hashlib.sha1(header + content, usedforsecurity=False).hexdigest())
    return "unchanged" if blob == fields[1] else "changed"


# ---- bundled rubrics --------------------------------------------------------------------------


@dataclass(frozen=True)
class BundledRubric:
    path: Path
    module: str
    number: int | None
    id: str = ""
    sha256: str = ""  # of the file's bytes, as the grade report's rubric_hash


def bundled_rubrics(directory: Path | None = None) -> list[BundledRubric]:
    """The rubrics of the installed course-module units (``directory``: every ``*.toml`` there
    instead), with the module each grades; read as data, validated when used."""
    from . import modules

    units = {unit.rubric_path: unit for unit in modules.installed().values()}
    paths = sorted(directory.glob("*.toml")) if directory is not None else sorted(units)
    found = []
    for path in paths:
        try:
            raw = path.read_bytes()
            data = tomllib.loads(raw.decode("utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue  # a broken rubric is reported by grader.rubric when it is actually used
        module = data.get("module")
        if isinstance(module, str):
            unit = units.get(path) or modules.installed().get(module)
            found.append(BundledRubric(path, module, unit.number if unit else None, str(data.get("id", "")),
                                       hashlib.sha256(raw).hexdigest()))
    return found


def installed_rubric(selector: str, directory: Path | None = None) -> BundledRubric:
    """The installed rubric that ``selector`` names: its id (``tinytorch-NN-name``), optionally
    pinned to its content hash (``tinytorch-NN-name@sha256:1a2b3c4d``, 8 or more hex digits).
    Never a path: this is how a setting from a student's repository may choose a rubric."""
    m = RUBRIC_SELECTOR.match(selector)
    rubrics = bundled_rubrics(directory)
    if m is not None:
        ident, digest = m.group(1), m.group(2) or ""
        for rubric in rubrics:
            if rubric.id == ident and rubric.sha256.startswith(digest):
                return rubric
    known = ", ".join(f"{r.id}@sha256:{r.sha256[:12]}" for r in rubrics) or "none"
    raise LocateError(f"no installed rubric is {selector!r} (installed: {known})")


def rubric_for(ref: ModuleRef, directory: Path | None = None) -> BundledRubric:
    """The bundled rubric that grades a module; LocateError names the modules that have one."""
    rubrics = bundled_rubrics(directory)
    for rubric in rubrics:
        if (ref.name is None or ref.name == rubric.module) and (ref.number is None or ref.number == rubric.number):
            return rubric
    known = ", ".join(module_label(r.number, r.module) for r in rubrics) or "none"
    raise LocateError(f"no bundled rubric grades module {ref} (bundled: {known}); pass --rubric with a rubric .toml")


def module_number(module: str) -> int | None:
    """The course's number for an installed module (None if it has none or is not installed)."""
    from . import modules

    unit = modules.installed().get(module)
    return unit.number if unit else None
