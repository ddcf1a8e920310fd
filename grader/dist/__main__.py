"""``python -m grader.dist``: see grader/dist/__init__.py."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REFRESH_HINT = "python -m grader.dist refresh"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.dist", description="Build the student and staff packages.")
    sub = parser.add_subparsers(dest="command", required=True)
    refresh = sub.add_parser("refresh", help="recompute the public checks' expected outputs the student package ships")
    refresh.add_argument("--check", action="store_true", help="only say whether they are current (exit 1 if stale)")
    for name, what in (("student", "the student wheel: no reference solutions, no hidden checks, no staff tools"),
                       ("staff", "the staff wheel: everything")):
        p = sub.add_parser(name, help=what)
        p.add_argument("--out", type=Path, default=Path("dist"), help="where the wheel goes (default: dist)")
    args = parser.parse_args(argv)
    from . import expected

    if args.command == "refresh":
        problems = [f"{m}: {why}" for m in expected.staff_modules() if (why := expected.stale(m))]
        if args.check:
            for line in problems:
                print(f"stale: {line}; run {REFRESH_HINT}", file=sys.stderr)
            return 1 if problems else 0
        for module in expected.staff_modules():
            print(f"{module}: wrote {expected.refresh(module)}")
        return 0
    from .build import build_staff_wheel, build_student_wheel

    if args.command == "student":
        problems = [f"{m}: {why}" for m in expected.staff_modules() if (why := expected.stale(m))]
        if problems:
            print(f"error: the shipped expected outputs are stale ({'; '.join(problems)}); run {REFRESH_HINT}",
                  file=sys.stderr)
            return 2
        print(build_student_wheel(args.out))
        return 0
    print(build_staff_wheel(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
