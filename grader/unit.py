"""The one public module a course-module unit imports on the host side (docs/NEW_MODULE.md).

A unit is a package with two sides, and each side has one face of the grader:

- **host side** (the unit's ``__init__.py``, ``judge/``, tests): ``from grader.unit import ...``,
  nothing else of the grader. It gives the unit's declaration (``ModuleUnit``), what its judge
  reads and returns (``CheckOutput``, ``Mismatch``, ``Cause`` and the callable types), and the
  judge's helpers (tolerances, the uniform-draw test, the shapes in a numpy error message);
- **sandbox side** (``probes/``): ``from grader.harness.probes import ...``, nothing else of the
  grader. The probes run in the sandbox, whose bundle holds the harness and the course runtime
  and no other part of the grader, so ``grader.unit`` cannot be imported there. That face's
  ``__all__`` is pinned too (tests/test_unit_api.py).

A unit's judge may import its own probes package for shared constants (the probe interface it
re-exports here is the same object). Names here are a promise to unit authors: adding one is
cheap, removing or renaming one breaks every course's units.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .moduleunit import ModuleUnit

if TYPE_CHECKING:
    from .channel import CheckOutput
    from .harness.probes import NOT_A_TENSOR, Inputs, Outputs, Probe, ProbeError
    from .judge.compare import Cause, Diagnosis, Mismatch, close
    from .judge.crash import shapes
    from .judge.rules import Comparator, CrashMeaning, ErrorCause, Generation, NotApplicable, SourceGeneration
    from .judge.uniform import judge_draw, ks_threshold, likely_cause

# Everything but ModuleUnit is imported when first used: finding the installed units imports each
# unit's ``__init__`` (which needs only ModuleUnit), and that must stay standard library only (the
# front ends name a missing dependency, pydantic or numpy, with its install command after that).
_WHERE = {
    "CheckOutput": "channel",
    **dict.fromkeys(("NOT_A_TENSOR", "Inputs", "Outputs", "Probe", "ProbeError"), "harness.probes"),
    **dict.fromkeys(("Cause", "Diagnosis", "Mismatch", "close"), "judge.compare"),
    "shapes": "judge.crash",
    **dict.fromkeys(("Comparator", "CrashMeaning", "ErrorCause", "Generation", "NotApplicable", "SourceGeneration"),
                    "judge.rules"),
    **dict.fromkeys(("judge_draw", "ks_threshold", "likely_cause"), "judge.uniform"),
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"grader.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


__all__ = [
    "NOT_A_TENSOR",
    "Cause",
    "CheckOutput",
    "Comparator",
    "CrashMeaning",
    "Diagnosis",
    "ErrorCause",
    "Generation",
    "Inputs",
    "Mismatch",
    "ModuleUnit",
    "NotApplicable",
    "Outputs",
    "Probe",
    "ProbeError",
    "SourceGeneration",
    "close",
    "judge_draw",
    "ks_threshold",
    "likely_cause",
    "shapes",
]
