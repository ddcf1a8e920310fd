"""``ModuleUnit``: what a course-module unit declares (docs/NEW_MODULE.md), and where its parts are.

Units make one with ``from grader.unit import ModuleUnit``; the registry (grader.modules) finds
them. It sits below both, and below the judge and the rubric that read units: standard library
only, every other part of the grader imported when a method needs it.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from .errors import ModuleUnitError

if TYPE_CHECKING:
    from .harness.probes import Probe
    from .judge.rules import JudgeRules


@dataclass(frozen=True)
class ModuleUnit:
    """One course module: where its parts are, by convention inside its own package."""

    name: str  # the course module's name, also the rubric's ``module``
    package: str  # the unit's Python package
    number: int | None = None  # the course's numbering (it may shift between course versions)
    runtime: str = "tinytorch"  # the course runtime package its probes and students import
    runtime_version: str = "1.0"  # the runtime version it was written for: that major, this minor or later
    notebook_names: tuple[str, ...] = ()  # learner files, preferred first; default from number and name
    examples: str | None = None  # golden submissions (correct_*.ipynb ...), relative to the unit's package
    equivalents: str | None = None  # reviewed equivalent mutants (TOML), relative to the unit's package
    # Folders (or files) of the package that only the staff have, relative to it: the student wheel
    # drops them (grader/dist/build.py) and every sandbox hides them. They must cover the reference
    # solution, the golden submissions and the reviewed equivalents (checked when the unit is made).
    staff_only: tuple[str, ...] = ("reference", "examples", "mutants", "tests")

    def __post_init__(self) -> None:
        for what, rel in (("reference", "reference"), ("examples", self.examples), ("equivalents", self.equivalents)):
            if rel is not None and not any(rel == s or rel.startswith(s.rstrip("/") + "/") for s in self.staff_only):
                raise ModuleUnitError(f"module unit {self.name!r}: its {what} ({rel}) must be in staff_only "
                                      f"{self.staff_only}: the student package would ship it")

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
    def probes_package(self) -> str:
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
    def examples_dir(self) -> Path | None:
        return self.root / self.examples if self.examples else None

    @property
    def equivalents_path(self) -> Path | None:
        return self.root / self.equivalents if self.equivalents else None

    @property
    def staff_paths(self) -> tuple[Path, ...]:
        """What no sandbox may show: the rubric, the shipped expected outputs and every staff-only
        folder (those of them that this install has: the student package has none)."""
        candidates = (self.rubric_path, self.expected_dir, *(self.root / rel for rel in self.staff_only))
        return tuple(p for p in candidates if p.exists())

    @property
    def file_names(self) -> tuple[str, ...]:
        """Learner file names, preferred first."""
        if self.notebook_names:
            return self.notebook_names
        stem = f"{self.number:02d}_{self.name}" if self.number is not None else self.name
        return (f"{stem}.ipynb", f"{self.name}.ipynb", f"{self.name}_dev.ipynb", f"{stem}.py")

    def probe_files(self) -> dict[str, str]:
        """The probes package's source files (path inside it → text): what a job carries into the
        sandbox, whose bundle holds no unit (grader/harness/unitfiles.py). Refused when this install's
        course runtime is not a version the unit was written for (grader/runtime.py)."""
        from .runtime import require

        require(self)
        return {f.relative_to(self.probes_dir).as_posix(): f.read_text(encoding="utf-8")
                for f in sorted(self.probes_dir.rglob("*.py")) if "__pycache__" not in f.parts}

    def load_probes(self) -> dict[str, Probe]:
        from .harness.probes import load_probes

        return load_probes(self.probes_package)

    def judge_rules(self) -> JudgeRules:
        from .judge.rules import JudgeRules

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
