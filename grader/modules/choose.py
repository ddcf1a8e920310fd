"""Which course module grades a submission: decided here, once, for every front end.

The precedence, first that decides wins:

1. ``explicit``: what this run was told (``--module NAME``; an installed unit's name, number or
   ``NN_name``). A command line is about this one run, so it beats everything below, except that a
   notebook whose ``#| default_exp`` line names another installed module is an error (exit 2),
   never graded as the wrong module.
2. The submission itself, among the installed units, strongest evidence first:
   a. TinyTorch's export line ``#| default_exp package.NAME`` (its last part is a unit's name);
   b. its file name or its folder's: ``NN_name``, ``name``, ``name_dev`` or a unit's learner
      file name (``modules/NN_name/anything.ipynb`` counts);
   c. the names it defines at top level: the unit whose rubric ``targets`` it defines the most of.
   A level that points at one unit decides; one that points at none or ties goes on to the next.
3. ``GRADER_MODULE`` (grader.settings): a standing default of this shell or machine.
4. ``course``: the front end's own course setting (the pytest ini ``grade_module``, a service
   assignment's ``module``).
5. The only installed unit, when there is one: installing nothing new changes nothing.
6. Otherwise the file's own load error if it does not load, else ModuleUnitError (exit 2 on
   every command line), listing the installed modules.

Standing defaults (3, 4) come after the notebook's own word because they apply to every notebook
of a folder or a course, and a notebook that says what it is knows better. A named module that
is not installed is an error at once, never a fallback.
"""

from __future__ import annotations

import re

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (the student package supports it): the same parser, as tomli
    import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import GraderError, ModuleUnitError
from . import ModuleUnit, installed

if TYPE_CHECKING:
    from ..models import Submission

__all__ = ["choose_module", "evidence", "find_unit"]

_EXPORT = re.compile(r"^\s*#\s*\|\s*default_exp\s+([A-Za-z_][\w.]*)", re.MULTILINE)
_DEFINED = re.compile(r"^(?:class|def|async\s+def)\s+([A-Za-z_]\w*)|^([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)", re.MULTILINE)
_NUMBERED = re.compile(r"^(\d{1,3})_([a-z][a-z0-9_]*?)(?:_dev)?$")


def find_unit(spec: str, units: Mapping[str, ModuleUnit] | None = None) -> ModuleUnit:
    """The installed unit ``spec`` names: its name, its number (``NN``) or both (``NN_name``);
    case and ``-`` do not matter. ModuleUnitError lists the installed ones otherwise."""
    units = installed() if units is None else units
    text = spec.strip().lower().replace("-", "_")
    m = re.match(r"^(\d{1,3})(?:_([a-z][a-z0-9_]*))?$", text)
    hits = [u for u in units.values()
            if (m is None and u.name == text)
            or (m is not None and u.number == int(m.group(1)) and m.group(2) in (None, u.name))]
    if len(hits) == 1:
        return hits[0]
    raise ModuleUnitError(f"no course module {spec!r} is installed (installed: {_listed(units)})" if not hits else
                          f"course module {spec!r} is ambiguous ({', '.join(sorted(u.name for u in hits))}): "
                          "give its name")


def choose_module(source: str | Path | Submission | None = None, explicit: str | None = None, *,
                  course: str | None = None, environ: Mapping[str, str] | None = None) -> ModuleUnit:
    """The unit that grades ``source`` (a file, a loaded submission, or None when there is none
    yet), by the precedence in this module's docstring."""
    units = installed()
    if explicit:
        chosen = find_unit(explicit, units)
        if source is not None and len(units) > 1:  # the notebook's own export line never loses in silence
            said = evidence(source, units.values())[0]
            if len(said) == 1 and said[0].name != chosen.name:
                raise ModuleUnitError(f"{_name(source)} says it is module {said[0].name} (its `#| default_exp` line), "
                                      f"not {chosen.name}: drop --module {explicit}, or give that module's notebook")
        return chosen
    if source is not None:
        for level in evidence(source, units.values()):
            if len(level) == 1:
                return level[0]
    if environ is None:
        from ..settings import settings

        standing = settings().module
    else:
        standing = environ.get("GRADER_MODULE") or None
    for spec in (standing, course):
        if spec:
            return find_unit(spec, units)
    if len(units) == 1:
        return next(iter(units.values()))
    if not units:
        from . import GROUP

        raise ModuleUnitError(f"no course module is installed: install a package that provides the {GROUP} "
                              "entry point (the grader's own distribution provides one)")
    if source is None:
        raise ModuleUnitError(f"several course modules are installed ({_listed(units)}): choose one with --module NAME")
    _raise_load_error(source)  # a file that does not load says so, whichever module it was meant for
    raise ModuleUnitError(f"cannot tell which course module {_name(source)} is: it names none (no `#| default_exp` "
                          "line, no NN_name file or folder) and defines none of their names; installed: "
                          f"{_listed(units)}; choose one with --module NAME")


def evidence(source: str | Path | Submission, units: Iterable[ModuleUnit]) -> list[list[ModuleUnit]]:
    """The units each kind of the submission's own evidence points at, strongest first: its
    ``default_exp``, its file and folder names, the rubric targets it defines (most first)."""
    candidates = list(units)
    path, text = _read(source)
    exports = {m.rsplit(".", 1)[-1].lower() for m in _EXPORT.findall(text)}
    by_export = [u for u in candidates if u.name in exports]
    by_name = [u for u in candidates if path is not None and _names_file(u, path)]
    defined = {a or b for a, b in _DEFINED.findall(text)}
    counts = {u.name: len(defined & _targets(u)) for u in candidates}
    best = max(counts.values(), default=0)
    by_targets = [u for u in candidates if best and counts[u.name] == best]
    return [by_export, by_name, by_targets]


def _names_file(unit: ModuleUnit, path: Path) -> bool:
    learner = {Path(n).stem.lower() for n in unit.file_names}
    for part in (path.stem, path.parent.name):
        part = part.lower().replace("-", "_")
        m = _NUMBERED.match(part)
        if part in learner or part.removesuffix("_dev") == unit.name or (
                m is not None and m.group(2) == unit.name and unit.number in (None, int(m.group(1)))):
            return True
    return False


def _targets(unit: ModuleUnit) -> set[str]:
    try:
        data = tomllib.loads(unit.rubric_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ModuleUnitError):
        return set()  # a broken rubric is reported when it is loaded to grade
    targets = data.get("targets", [])
    return {t for t in targets if isinstance(t, str)} if isinstance(targets, list) else set()


def _read(source: str | Path | Submission) -> tuple[Path | None, str]:
    """The file's path (if it has one) and its code, as one text; unreadable code is no evidence
    (the grading itself says what is wrong with the file)."""
    from ..models import Submission

    if isinstance(source, Submission):
        return Path(source.file_name), "\n".join(c.source for c in source.cells)
    path = Path(source)
    from ..load import load_submission

    try:
        submission = load_submission(path)
    except (GraderError, OSError):
        return path, ""
    return path, "\n".join(c.source for c in submission.cells)


def _raise_load_error(source: str | Path | Submission) -> None:
    """The file's own load error (LoadError and kin), if it has one: what to fix first."""
    from ..models import Submission

    if isinstance(source, Submission):
        return
    from ..load import load_submission

    try:
        load_submission(Path(source))
    except OSError:
        return  # grading it says what is wrong with the path
    except GraderError as e:
        raise e from None


def _name(source: str | Path | Submission | None) -> str:
    from ..models import Submission, shown

    name = source.file_name if isinstance(source, Submission) else Path(str(source)).name
    return shown(name)


def _listed(units: Mapping[str, ModuleUnit] | Sequence[ModuleUnit]) -> str:
    values = units.values() if isinstance(units, Mapping) else units
    return ", ".join(f"{u.name} ({u.number})" if u.number is not None else u.name
                     for u in sorted(values, key=lambda u: u.name)) or "none"
