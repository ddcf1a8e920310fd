"""``grader modules``: the installed course modules, where each one's parts are, and copies of their
rubrics for a course to edit (docs/NEW_MODULE.md, "Where a module's parts are").

Only the standard library is imported at first: ``add_modules_parser`` runs every time the
``grader`` command line is built.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import ModuleUnit

EXIT_OK, EXIT_USAGE = 0, 2


def add_modules_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "modules", help="list the installed course modules and where each one's rubric and other parts are",
        description="List the installed course modules (units). With NAME (a name, a number or NN_name): where "
                    "each part of that module is. With --copy-rubrics DIR: write each module's rubric as "
                    "DIR/NN_name.toml, a course's own copy to edit and grade with --rubric DIR/NN_name.toml.")
    p.add_argument("name", nargs="?", metavar="NAME", help="one module: its name, number or NN_name")
    p.add_argument("--copy-rubrics", type=Path, metavar="DIR",
                   help="write the rubric(s) as DIR/NN_name.toml (an existing file is left alone)")
    return p


def rubric_file_name(unit: ModuleUnit) -> str:
    """``NN_name.toml`` (``name.toml`` for a unit without a number): how a course's copy is named."""
    return f"{unit.number:02d}_{unit.name}.toml" if unit.number is not None else f"{unit.name}.toml"


def parts(unit: ModuleUnit) -> dict[str, Path | None]:
    """Every part of the unit, by what it is (None: the unit has none)."""
    found: dict[str, Path | None] = {
        "package": unit.root, "rubric": unit.rubric_path, "probes": unit.probes_dir, "judge": unit.root / "judge",
        "reference": unit.reference_path, "shipped expected outputs": unit.expected_dir,
        "golden submissions": unit.examples_dir, "reviewed equivalent mutants": unit.equivalents_path,
        "the unit's own tests": unit.root / "tests",
    }
    return {what: path if path is not None and path.exists() else None for what, path in found.items()}


def runtime_label(unit: ModuleUnit) -> str:
    """What this install has of the unit's runtime, or why it cannot be used."""
    from ..errors import GraderError
    from ..runtime import require

    try:
        return f"this install has {require(unit).label}"
    except GraderError as e:
        return f"unusable here: {e}"


def modules_command(args: argparse.Namespace) -> int:
    import sys

    from ..errors import GraderError
    from . import installed
    from .choose import find_unit

    try:
        units = [find_unit(args.name)] if args.name else sorted(installed().values(), key=lambda u: (u.number or 0, u.name))
    except GraderError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.copy_rubrics is not None:
        args.copy_rubrics.mkdir(parents=True, exist_ok=True)
        for unit in units:
            target = args.copy_rubrics / rubric_file_name(unit)
            if target.exists():
                print(f"{target}: exists, left as it is")
                continue
            shutil.copyfile(unit.rubric_path, target)
            print(f"{target}: the rubric of {unit.label}; grade with --rubric {target}")
        return EXIT_OK
    for unit in units:
        print(f"{unit.number if unit.number is not None else '-':>3}  {unit.name:<16} {unit.rubric_path}")
        if args.name:
            for what, path in parts(unit).items():
                print(f"     {what + ':':<30} {path if path is not None else '(none)'}")
            print(f"     {'learner files:':<30} {', '.join(unit.file_names)}")
            print(f"     {'staff only:':<30} {', '.join(unit.staff_only)}")
            print(f"     {'course runtime:':<30} {unit.runtime} {unit.runtime_version} or a later "
                  f"{unit.runtime_version.partition('.')[0]}.x ({runtime_label(unit)})")
    return EXIT_OK
