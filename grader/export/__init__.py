"""Gradebook exports, built only from the stored score reports (no score is recomputed).

    base.py        Gradebook (stored results joined with the roster), the Exporter protocol, CSV helpers
    gradescope.py  results.json per submission        canvas.py   Canvas gradebook import CSV
    moodle.py      Moodle grade import CSV             nbgrader.py nbgrader / tito export CSV
    otter.py       Otter-Grader final_grades.csv        plain.py    plain CSV with status and reasons
    cli.py         ``grader export`` (the I/O edge)

The roster names come from ``grader/results/roster.py`` (the roster CSV: columns, header spellings,
problems). Names are imported lazily, so that building the ``grader`` command line stays fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

FORMATS = ("gradescope", "canvas", "moodle", "nbgrader", "otter", "csv")

_EXPORTS = {
    "ExportFile": ".base", "Exporter": ".base", "GradeRow": ".base", "Gradebook": ".base", "build_gradebook": ".base",
    "Roster": "..results.roster", "RosterEntry": "..results.roster", "RosterError": "..results.roster",
    "parse_roster": "..results.roster", "read_roster": "..results.roster",
}

__all__ = [
    "EXPORTERS", "FORMATS", "ExportFile", "Exporter", "GradeRow", "Gradebook", "Roster", "RosterEntry", "RosterError",
    "build_gradebook", "exporters", "parse_roster", "read_roster",
]

if TYPE_CHECKING:
    from ..results.roster import Roster, RosterEntry, RosterError, parse_roster, read_roster
    from .base import Exporter, ExportFile, Gradebook, GradeRow, build_gradebook

    EXPORTERS: dict[str, Exporter]


def exporters() -> dict[str, Exporter]:
    """One exporter per format name, in FORMATS order."""
    from .canvas import CanvasExporter
    from .gradescope import GradescopeExporter
    from .moodle import MoodleExporter
    from .nbgrader import NbgraderExporter
    from .otter import OtterExporter
    from .plain import PlainCsvExporter

    found: list[Exporter] = [GradescopeExporter(), CanvasExporter(), MoodleExporter(), NbgraderExporter(),
                             OtterExporter(), PlainCsvExporter()]
    return {e.name: e for e in sorted(found, key=lambda e: FORMATS.index(e.name))}


def __getattr__(name: str) -> Any:
    if name == "EXPORTERS":
        return exporters()
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
