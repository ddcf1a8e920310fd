"""Outcomes that are not a comparison: checks that cannot run, targets that could not be
defined, names left undefined by an earlier failure. Like every word a student reads about a
check, they are written here, in the judge, from what the pipeline observed."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..channel import CheckOutput, ChunkError, ImportRecord
from ..models import CheckResult, Chunk, StudentCode
from ..rubric import CheckSpec
from . import not_gradable


def blocked(code: StudentCode, checks: Sequence[CheckSpec]) -> dict[str, CheckResult]:
    """Checks that cannot run because a target they need is not defined anywhere."""
    syntax = (f" (cell {', '.join(str(e.cell) for e in code.syntax_errors)} could not be parsed and may hold it)"
              if code.syntax_errors else "")
    blocked = {}
    for spec in checks:
        for name in spec.needs:
            if not code.target_cells.get(name):
                blocked[spec.id] = not_gradable(spec, f"{name} is not defined in any code cell{syntax}")
                break
    return blocked


def definition_failure(spec: CheckSpec, chunks: Sequence[Chunk], imported: ImportRecord | None,
                       killed: str | None) -> CheckOutput | None:
    """An outcome for checks whose target could not even be defined (``killed``: why the host
    stopped the run, if it did)."""
    if imported is None:
        note = killed or "the sandbox stopped while importing the student's code (sys.exit or os._exit at top level?)"
        return CheckOutput(outcome="timeout" if killed else "crashed", note=note)
    for name in spec.needs:
        err = _final_definition_error(name, chunks, imported)
        if err is not None:
            note = _definition_note(name, err) + _failed_dependency(err, imported)
            return CheckOutput(outcome="error", error=err.error, note=note)
    return None


def _final_definition_error(name: str, chunks: Sequence[Chunk], imported: ImportRecord) -> ChunkError | None:
    """The error that leaves ``name`` broken once every kept statement has run, in notebook order.

    A definition that failed but was replaced by a later one that worked is superseded, as when
    the notebook runs from top to bottom; a failure after the last working one (a statement that
    completes the name, or a last definition that fails) breaks it.
    """
    failed = {(e.cell, e.line): e for e in imported.chunk_errors if name in e.defines}
    last: ChunkError | None = None
    for chunk in chunks:
        if name not in chunk.defines:
            continue
        err = failed.get((chunk.cell, chunk.line))
        if err is not None:
            last = err
        elif last is not None and name not in chunk.modifies:
            last = None  # a later definition that worked replaces the broken one
    return last


def _definition_note(name: str, err: ChunkError) -> str:
    """Our words for a failed definition; the student's own message stays in the error, apart."""
    note = f"defining {name} failed in cell {err.cell}"
    if err.error.type == "NotImplementedError":
        note += " (the starter's raise NotImplementedError() is still there: finish it)"
    return note


def _failed_dependency(err: ChunkError, imported: ImportRecord) -> str:
    """When a definition failed on a NameError for a name whose own statement failed first (a class
    based on ``Layer`` whose import failed, say), that earlier failure is the real cause."""
    if err.error.type != "NameError":
        return ""
    for earlier in imported.chunk_errors:
        for name in earlier.defines:
            if f"'{name}'" in err.error.message and earlier is not err:
                return (f", because {name} is not defined: its own statement (cell {earlier.cell}, line "
                        f"{earlier.line}) failed first, with {earlier.error.type}")
    return ""


def explain_name_error(got: CheckOutput, imported: ImportRecord | None) -> CheckOutput:
    """A NameError for a name whose own definition failed points at that failure instead."""
    if got.outcome != "error" or got.error is None or got.error.type != "NameError" or imported is None:
        return got
    for err in imported.chunk_errors:
        for name in err.defines:
            if f"'{name}'" in got.error.message:
                return got.model_copy(update={"note": f"{name} is not defined, because defining it failed in "
                                                      f"cell {err.cell} ({err.error.type})"})
    return got



# The words above that say a check did not run because a target is not written yet, as the report
# reads them back to say it once per target (grader/report.py); the JSON keeps each check's own.
_STARTER = "the starter's raise NotImplementedError() is still there"
_NOT_STARTED = (
    re.compile(r"defining (?P<name>\w+) failed in (?P<where>.+?) \(the starter's raise NotImplementedError\(\) "
               r"is still there: finish it\)", re.S),
    re.compile(r"(?P<name>\w+) is not defined, because defining it failed in (?P<where>.+?) \(NotImplementedError\)",
               re.S),
    # a function whose body is still the starter's bare raise: the error points at the function itself
    re.compile(r"^raised NotImplementedError \((?P<where>the cell starting `def (?P<name>\w+)\(.*?`), line \d+, in "
               r"(?P=name)\)(?!, with this message)", re.M | re.S),
)
_MISSING = re.compile(r"^(?P<name>\w+) is not defined in any code cell(?: \((?P<why>.+?)\))?$", re.M | re.S)


def not_started(text: str) -> tuple[str, str, str] | None:
    """(target, why, the cell) when a check's feedback says it failed only because ``target`` is not written
    yet: the starter's ``raise NotImplementedError()`` is still there, or nothing defines it."""
    for pattern in _NOT_STARTED:
        if m := pattern.search(text):
            return m.group("name"), f"{_STARTER} in {m.group('where')}", m.group("where")
    if m := _MISSING.search(text):
        return m.group("name"), "no code cell defines it" + (f"; {m.group('why')}" if m.group("why") else ""), ""
    return None
