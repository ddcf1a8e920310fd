"""Course modules as units, discovered through the ``tinytorch_grader.modules`` entry point group.

A unit is one Python package holding everything one course module needs (docs/NEW_MODULE.md):

- ``rubric.toml``: the checks, points, visibility, timeouts, tolerances and hints;
- ``probes/``: sandbox-side code that calls the student's objects and returns plain data. It
  travels with each job into the sandbox and is imported there at its own import path
  (grader/harness/unitfiles.py), so it may import ``grader.harness.probes`` and nothing else of
  the grader;
- ``judge/``: host-side ``COMPARATORS``, ``DIAGNOSES``, ``NOT_APPLICABLE`` and the optional hooks
  (grader.judge.rules); the host side imports ``grader.unit`` and nothing else of the grader;
- ``reference/solution.py``: the trusted reference solution (staff only, never in a sandbox);
- ``public_expected/``: the public checks' expected outputs, made from the reference by
  ``python -m grader.dist refresh``, for the student package, which has no reference;
- the course runtime it runs on (``runtime``, a package of ``reference/runtime``), and how to find
  a student's work (``notebook_names``);
- optionally, golden submissions (``examples``) and the reviewed equivalent mutants
  (``equivalents``) that ``grader selftest --mutants`` reads;
- which of its folders only the staff have (``staff_only``): the student package leaves them out
  and no sandbox can read them.

The core never names a unit. Which unit grades a submission is decided in one place
(grader.modules.choose); ``grader modules`` lists them and where their parts are.
A course ships its own units as a separate distribution that declares
``[project.entry-points."tinytorch_grader.modules"] name = "package:UNIT"``.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from ..errors import ModuleUnitError
from ..moduleunit import ModuleUnit

__all__ = ["GROUP", "ModuleUnit", "default", "get", "installed", "staff_paths"]
GROUP = "tinytorch_grader.modules"


def _candidates() -> list[tuple[str, str]]:
    """(name, ``package:UNIT``) of every unit: the entry points, and the packages in this folder
    (the grader's own units, also found when it runs from a source tree that is not installed)."""
    found = [(point.name, point.value) for point in entry_points(group=GROUP)]
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg:
            found.append((info.name, f"{__name__}.{info.name}:UNIT"))
    return sorted(set(found))


@lru_cache(maxsize=1)
def installed() -> dict[str, ModuleUnit]:
    """Every unit installed in this environment, by name."""
    units: dict[str, ModuleUnit] = {}
    for name, value in _candidates():
        package, _, attr = value.partition(":")
        try:
            unit: Any = getattr(importlib.import_module(package), attr or "UNIT")
        except Exception as e:  # a broken third-party unit must not hide the others
            raise ModuleUnitError(f"module unit {name!r} ({value}) does not load: {type(e).__name__}: {e}") from e
        if not isinstance(unit, ModuleUnit):
            raise ModuleUnitError(f"entry point {name!r} of {GROUP} ({value}) is not a ModuleUnit")
        if unit.name in units and units[unit.name] != unit:
            raise ModuleUnitError(f"two installed module units are called {unit.name!r}: {units[unit.name].package} "
                                  f"and {unit.package}; uninstall one")
        units[unit.name] = unit
    return units


def get(name: str) -> ModuleUnit:
    """The installed unit called ``name``; ModuleUnitError names the installed ones otherwise."""
    units = installed()
    if name in units:
        return units[name]
    known = ", ".join(sorted(units)) or "none"
    raise ModuleUnitError(f"no course module {name!r} is installed (installed: {known})")


def default() -> ModuleUnit:
    """The only installed unit; with several, the caller must choose (``--module``)."""
    units = installed()
    if len(units) == 1:
        return next(iter(units.values()))
    if not units:
        raise ModuleUnitError(f"no course module is installed: install a package that provides the {GROUP} "
                              "entry point (the grader's own distribution provides one)")
    raise ModuleUnitError(f"several course modules are installed ({', '.join(sorted(units))}): "
                          "choose one with --module NAME or --rubric FILE")


def staff_paths() -> tuple[Path, ...]:
    """Every installed unit's staff files (rubric, reference solution), for sandboxes to hide."""
    return tuple(p for unit in installed().values() for p in unit.staff_paths)
