"""The ``grader`` command line."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .cliargs import NOT_IN_STUDENT_PACKAGE, backend, refused
from .deps import dependencies_checked
from .edition import BACKENDS, STUDENT

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
# Subcommands whose parsers cost imports: left out of `grader grade`'s command line, but named in
# its usage line all the same.
HEAVY = {"export": "write a gradebook file from RESULTS_DIR", "gradescope": "grade inside Gradescope's autograder",
         "selftest": "test the grader itself", "serve": "run the grading service",
         "modules": "list the installed course modules and where their parts are",
         "worker": "grade the service's queue (scaled-out mode)"}


def natural(text: str) -> int:
    """An argparse type: an integer 0 or more."""
    return _integer(text, 0)


def positive(text: str) -> int:
    """An argparse type: an integer 1 or more."""
    return _integer(text, 1)


def _integer(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{value} is less than {least}")
    return value


def add_release_options(p: argparse.ArgumentParser) -> None:
    """--due-date and --publish-date: when after_due_date and after_published checks reach students."""
    p.add_argument("--due-date", metavar="DATE", help="show students the after_due_date checks from this date on "
                                                      "(ISO 8601; default: the rubric's due_date)")
    p.add_argument("--publish-date", metavar="DATE", help="show students the after_published checks from this date "
                                                          "on (default: the rubric's publish_date)")


def build_parser(grade_only: bool = False) -> argparse.ArgumentParser:
    """The command line; ``grade_only`` leaves out the subcommands whose parsers cost imports."""
    parser = argparse.ArgumentParser(prog="grader", description="Grade TinyTorch notebooks in a sandbox.")
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade", help="grade one or more notebooks and print a table per notebook")
    g.add_argument("paths", nargs="+", type=Path, help=".ipynb notebooks or jupytext percent .py files")
    g.add_argument("--rubric", type=Path, help="rubric .toml (default: the installed course module's)")
    g.add_argument("--module", metavar="NAME", help="the course module to grade (default: the one the notebook says, "
                                                    "else $GRADER_MODULE, else the only one installed)")
    if STUDENT:  # the student package has the public checks alone, and the local sandbox alone
        g.add_argument("--backend", type=backend, default="local", help=argparse.SUPPRESS)
    else:
        g.add_argument("--backend", choices=BACKENDS, default="local",
                       help="local: practice isolation; docker: the official sandbox")
    g.add_argument("--json", type=Path, metavar="FILE", help="also write the score report(s) as JSON")
    g.add_argument("--public-only", action="store_true",
                   help="run only the visible checks" + (" (the student package has no others)" if STUDENT else ""))
    if STUDENT:
        g.set_defaults(seed=None, staff=False, due_date=None, publish_date=None)
        for option in ("--seed", "--staff", "--due-date", "--publish-date"):
            g.add_argument(option, action=refused(NOT_IN_STUDENT_PACKAGE[option]), nargs=0 if option == "--staff" else None,
                           dest=f"refused_{option[2:]}", help=argparse.SUPPRESS)
    else:
        g.add_argument("--seed", type=natural, help="seed for the inputs of non-visible checks (0 or more)")
        g.add_argument("--staff", action="store_true", help="show every check with its full details, hidden ones too")
        add_release_options(g)
    if not STUDENT:  # the staff tools are not in the student package
        b = sub.add_parser("batch", help="grade a whole class: a folder, nbgrader submitted/, a Gradescope export, or a .zip")
        b.add_argument("source", type=Path, help="folder or .zip of submissions")
        b.add_argument("--out", type=Path, required=True, metavar="RESULTS_DIR", help="where results and reports go")
        b.add_argument("--roster", type=Path, help="roster CSV (student ids, names, emails) for the exports")
        b.add_argument("--workers", type=positive, default=None, help="parallel sandboxes, 1 or more (default: number of cores)")
        b.add_argument("--backend", choices=BACKENDS, default="local",
                       help="local: practice isolation; docker: the official sandbox (default: local)")
        b.add_argument("--rubric", type=Path, help="rubric .toml (default: the installed course module's)")
        b.add_argument("--module", metavar="NAME", help="the course module to grade (default: the one the notebooks say, "
                                                        "else the only one installed)")
        b.add_argument("--force", action="store_true", help="regrade even submissions with an up-to-date result")
        b.add_argument("--keep", choices=("latest", "all"), default="latest",
                       help="several submissions of one student: grade only the latest (default), or grade all of them "
                            "(the latest still counts; the others' reports go to reports/attempts/)")
        add_release_options(b)
        image = sub.add_parser("image", help="the Docker image of the official sandbox")
        image_sub = image.add_subparsers(dest="image_command", required=True)
        build = image_sub.add_parser("build", help="build the grading image (once per content hash)")
        how = build.add_mutually_exclusive_group()
        how.add_argument("--offline", action="store_true", help="debootstrap a Debian root filesystem (no registry)")
        how.add_argument("--online", action="store_true", help="FROM python:3.11-slim, for machines that can pull")
        build.add_argument("--force", action="store_true", help="rebuild even if the tag exists")
        clean = sub.add_parser("cleanup", help="remove leftover grading containers")
        clean.add_argument("--images", action="store_true", help="also remove grading images other than the current one")
    d = sub.add_parser("daemon", help="the background grader that makes repeated `grader grade` runs fast")
    d.add_argument("action", choices=["stop"], help="stop: end this configuration's daemon now")
    if grade_only and not STUDENT:
        for name, text in HEAVY.items():
            sub.add_parser(name, help=text, add_help=False)
    elif not STUDENT:
        from .export.cli import add_export_parser
        from .gradescope_mode import add_gradescope_parser
        from .modules.cli import add_modules_parser
        from .selftest.cli import add_selftest_parser
        from .service.cli import add_service_parsers

        add_export_parser(sub)
        add_gradescope_parser(sub)
        add_modules_parser(sub)
        add_selftest_parser(sub)
        add_service_parsers(sub)
    return parser


@dependencies_checked
def main(argv: list[str] | None = None, *, use_daemon: bool = True) -> int:
    # Before numpy loads: the grader's own numpy work is small, and OpenBLAS's idle threads spin
    # on the cores the sandboxes need (the sandboxes themselves get one thread: sandbox/local.py).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(grade_only=argv[:1] == ["grade"]).parse_args(argv)
    try:
        return _run(args, use_daemon)
    except OSError as e:  # a path the command was given cannot be used: too long, unreadable, read-only
        from .models import shown

        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {shown(where + (e.strerror or str(e)), one_line=True)}; check the path and its permissions "
              f"(the command did not finish)", file=sys.stderr)
        return EXIT_USAGE


def _run(args: argparse.Namespace, use_daemon: bool) -> int:
    if args.command == "grade":
        from .client import run_request

        return run_request(grade_request(args), use_daemon=use_daemon)
    if args.command == "batch":
        from .session import Session

        session = Session(official=True)
        session.warm_in_background(args.backend, args.rubric)  # boots while the rest is imported
        from .batch.cli import batch

        return batch(args, session)
    if args.command == "daemon":
        from . import daemon

        print("stopped the grading daemon" if daemon.stop() else "no grading daemon was running")
        return EXIT_OK
    if args.command in ("image", "cleanup"):
        return _docker_admin(args)
    if args.command == "export":
        from .export.cli import export_command

        return export_command(args)
    if args.command in ("serve", "worker"):
        from .service.cli import service_command

        return service_command(args)
    if args.command == "gradescope":
        from .gradescope_mode import gradescope_command

        return gradescope_command(args)
    if args.command == "selftest":
        from .selftest.cli import selftest_command

        return selftest_command(args)
    if args.command == "modules":
        from .modules.cli import modules_command

        return modules_command(args)
    return EXIT_USAGE  # unreachable: argparse requires a known command


def _terminal() -> dict[str, object]:
    from .client import terminal

    return terminal()


def grade_request(args: argparse.Namespace) -> dict[str, object]:
    """``grader grade``'s arguments as a request (plain data: the daemon validates it)."""
    return {
        "command": "grade", "paths": [os.path.abspath(p) for p in args.paths],
        "rubric": os.path.abspath(args.rubric) if args.rubric else None, "module": args.module,
        "backend": args.backend,
        "public_only": args.public_only, "seed": args.seed, "staff": args.staff,
        "json_out": os.path.abspath(args.json) if args.json else None,
        "due_date": args.due_date, "publish_date": args.publish_date, **_terminal(),
    }


def _docker_admin(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from .errors import GraderError

    errors = Console(stderr=True, soft_wrap=True)
    try:
        if args.command == "image":
            from .sandbox.image import build_image

            offline = True if args.offline else (False if args.online else None)
            print(build_image(offline=offline, progress=lambda m: errors.print(m, highlight=False, markup=False),
                              force=args.force))
            return EXIT_OK
        from .sandbox.docker import cleanup

        removed = cleanup()
        print(f"removed {removed} leftover grading container(s)")
        if args.images:
            from .sandbox.image import remove_old_images

            print(f"removed {remove_old_images()} old grading image(s)")
        return EXIT_OK
    except GraderError as e:
        errors.print(f"[red]error:[/] {escape(str(e))}", highlight=False)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
