"""Course modules as units, discovered through the ``tinytorch_grader.modules`` entry point group.

A unit is one Python package holding everything one course module needs (docs/NEW_MODULE.md):

- ``rubric.toml``: the checks, points, visibility, timeouts, tolerances and hints;
- ``probes/``: sandbox-side code that calls the student's objects and returns plain data. It is
  copied into the sandbox bundle at its own import path, so it may import ``grader.harness.probes``
  and nothing else of the grader;
- ``judge/``: host-side ``COMPARATORS``, ``DIAGNOSES`` and ``NOT_APPLICABLE`` (see grader.judge);
- ``reference/solution.py``: the trusted reference solution (staff only, never in a sandbox);
- ``public_expected/``: the public checks' expected outputs, made from the reference by
  ``python -m grader.dist refresh``, for the student package, which has no reference;
- the course runtime it runs on (``runtime``, a package of ``reference/runtime``), and how to find
  a student's work (``notebook_names``);
- optionally, golden submissions (``examples``).

The core never names a unit. With one unit installed it is the default; with several, the front
ends' ``--module`` chooses. A course ships its own units as a separate distribution that declares
``[project.entry-points."tinytorch_grader.modules"] name = "package:UNIT"``.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..errors import ModuleUnitError

if TYPE_CHECKING:
    from ..harness.probes import Probe
    from ..judge.rules import JudgeRules

GROUP = "tinytorch_grader.modules"


@dataclass(frozen=True)
class ModuleUnit:
    """One course module: where its parts are, by convention inside its own package."""

    name: str  # the course module's name, also the rubric's ``module``
    package: str  # the unit's Python package
    number: int | None = None  # the course's numbering (it may shift between course versions)
    runtime: str = "tinytorch"  # the course runtime package its probes and students import
    notebook_names: tuple[str, ...] = ()  # learner files, preferred first; default from number and name
    examples: str | None = None  # golden submissions, relative to the unit's package

    @property
    def root(self) -> Path:
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise ModuleUnitError(f"module unit {self.name!r}: package {self.package!r} is not importable")
        return Path(next(iter(spec.submodule_search_locations)))

    @property
    def rubric_path(self) -> Path:
        return self.root / "rubric.toml"

    @property
    def reference_path(self) -> Path:
        return self.root / "reference" / "solution.py"

    @property
    def probes_module(self) -> str:
        """The dotted path the harness imports, on the host and inside the sandbox alike."""
        return f"{self.package}.probes"

    @property
    def probes_dir(self) -> Path:
        return self.root / "probes"

    @property
    def expected_dir(self) -> Path:
        """The public checks' expected outputs shipped with the student package (grader/shipped.py)."""
        return self.root / "public_expected"

    @property
    def staff_paths(self) -> tuple[Path, ...]:
        """What no sandbox may show: the rubric, the reference solution, the shipped expected outputs
        (those of them that this install has: the student package has no reference)."""
        return tuple(p for p in (self.rubric_path, self.reference_path.parent, self.expected_dir) if p.exists())

    @property
    def file_names(self) -> tuple[str, ...]:
        """Learner file names, preferred first."""
        if self.notebook_names:
            return self.notebook_names
        stem = f"{self.number:02d}_{self.name}" if self.number is not None else self.name
        return (f"{stem}.ipynb", f"{self.name}.ipynb", f"{self.name}_dev.ipynb", f"{stem}.py")

    def probe_files(self) -> dict[str, str]:
        """The probes package's source files (path inside it → text): what a job carries into the
        sandbox, whose bundle holds no unit (grader/harness/unitfiles.py)."""
        return {f.relative_to(self.probes_dir).as_posix(): f.read_text(encoding="utf-8")
                for f in sorted(self.probes_dir.rglob("*.py")) if "__pycache__" not in f.parts}

    def load_probes(self) -> dict[str, Probe]:
        from ..harness.probes import load_probes

        return load_probes(self.probes_module)

    def judge_rules(self) -> JudgeRules:
        from ..judge.rules import JudgeRules

        judge: ModuleType = importlib.import_module(f"{self.package}.judge")
        return JudgeRules(comparators=dict(getattr(judge, "COMPARATORS", {})),
                          diagnoses=dict(getattr(judge, "DIAGNOSES", {})),
                          not_applicable=dict(getattr(judge, "NOT_APPLICABLE", {})),
                          error_cause=getattr(judge, "ERROR_CAUSE", None),
                          generation=getattr(judge, "GENERATION", None),
                          crash_meaning=getattr(judge, "CRASH_MEANING", None),
                          source_generation=getattr(judge, "SOURCE_GENERATION", None))

    @property
    def label(self) -> str:
        """``module NN name``: how reports and summaries name the module."""
        return f"module {self.number} {self.name}" if self.number is not None else f"module {self.name}"


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
