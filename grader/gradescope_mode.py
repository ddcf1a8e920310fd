"""``grader gradescope``: grade the one submission inside Gradescope's ``/autograder`` layout.

    ROOT/source/                     this grader (the uploaded autograder zip)
    ROOT/submission/                 the student's files
    ROOT/submission_metadata.json    submission id, created_at, assignment, users, ...
    ROOT/results/results.json        written here (docs/FORMATS.md, "Gradescope")

ROOT is ``/autograder`` unless ``--root`` (or ``GRADER_AUTOGRADER_ROOT``) says otherwise, so the
whole flow can be tested against a local folder laid out the same way.

A submission that cannot be graded still gets a results.json (score 0 and the reason) so the
student sees why; a fault of the grader also exits 1 so that it shows in Gradescope's logs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import GraderError, SubmissionError
from .sandbox import BACKENDS

if TYPE_CHECKING:  # the rest loads when grading starts: building the command line stays fast
    from .results.record import StoredResult
    from .rubric import Rubric

DEFAULT_ROOT = Path("/autograder")
ROOT_ENV = "GRADER_AUTOGRADER_ROOT"
MAX_FILES = 2000
MAX_METADATA_BYTES = 1024 * 1024
EXIT_OK, EXIT_FAULT, EXIT_USAGE = 0, 1, 2


@dataclass(frozen=True)
class User:
    id: str = ""
    name: str = ""
    email: str = ""


@dataclass(frozen=True)
class SubmissionMetadata:
    """The fields of ``submission_metadata.json`` this grader uses (Gradescope writes more)."""

    id: str = ""
    created_at: str = ""
    users: tuple[User, ...] = ()


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def submission(self) -> Path:
        return self.root / "submission"

    @property
    def metadata(self) -> Path:
        return self.root / "submission_metadata.json"

    @property
    def results(self) -> Path:
        return self.root / "results" / "results.json"


def read_metadata(path: Path) -> tuple[SubmissionMetadata, str]:
    """The metadata, or an empty one and why (grading goes on without it). Unknown fields and
    fields of the wrong type are ignored: this file is Gradescope's, not ours."""
    try:
        with path.open("rb") as f:
            data = json.loads(f.read(MAX_METADATA_BYTES + 1)[:MAX_METADATA_BYTES])
    except FileNotFoundError:
        return SubmissionMetadata(), f"{path.name} not found"
    except (OSError, ValueError) as e:
        return SubmissionMetadata(), f"{path.name} unreadable: {str(e)[:200]}"
    if not isinstance(data, dict):
        return SubmissionMetadata(), f"{path.name} unreadable: not a JSON object"
    users = tuple(User(_text(u.get("id")), _text(u.get("name")), _text(u.get("email")))
                  for u in data.get("users") or [] if isinstance(u, dict))
    return SubmissionMetadata(_text(data.get("id")), _text(data.get("created_at")), users), ""


def _text(value: object) -> str:
    from .models import shown  # deferred like the rest: building the command line stays fast

    return shown(str(value)) if isinstance(value, str | int | float) and not isinstance(value, bool) else ""


def find_notebook(folder: Path) -> Path:
    """The one notebook of a Gradescope submission folder; SubmissionError says what is wrong."""
    from .batch.layouts import preferred_names

    preferred_names_ = preferred_names()

    if not folder.is_dir() or folder.is_symlink():
        raise SubmissionError("no submission folder: upload your notebook to Gradescope")
    candidates = list(_candidates(folder))
    preferred = [f for f in candidates if f.name in preferred_names_]
    if preferred:
        return sorted(preferred, key=lambda f: (preferred_names_.index(f.name), len(f.parts)))[0]
    notebooks = [f for f in candidates if f.suffix == ".ipynb"] or candidates
    if len(notebooks) == 1:
        return notebooks[0]
    if not notebooks:
        raise SubmissionError(f"no notebook found: upload your {preferred_names_[0]} (a .ipynb file)")
    names = ", ".join(sorted(f.name for f in notebooks)[:5])
    raise SubmissionError(f"{len(notebooks)} notebooks ({names}) and none named {preferred_names_[0]}: "
                          "upload only the module's notebook, or give it that name")


def _assignment_module(layout: Layout) -> str | None:
    """The course module the autograder zip is for (``source/module``, make_zip.sh's MODULE=), if any."""
    path = layout.root / "source" / "module"
    if not path.is_file():
        return None
    try:
        return path.read_text(encoding="utf-8").strip()[:100] or None
    except (OSError, UnicodeDecodeError):
        return None


def _candidates(folder: Path) -> Iterator[Path]:
    from .batch.layouts import SUFFIXES

    seen = 0
    for directory, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__MACOSX")
        for name in sorted(files):
            seen += 1
            if seen > MAX_FILES:
                raise SubmissionError(f"more than {MAX_FILES} files in the submission; upload only the notebook")
            path = Path(directory) / name
            if (path.suffix.lower() in SUFFIXES and not name.startswith(".") and "checkpoint" not in name
                    and path.is_file() and not path.is_symlink()):
                yield path


def grade_submission(layout: Layout, rubric: Rubric | None, backend: str = "local",
                     module: str | None = None) -> tuple[StoredResult, SubmissionMetadata]:
    """Grade ROOT/submission; a submission or grader fault becomes the result's status. Without a
    rubric, the notebook's course module (``module`` when it does not say)."""
    from .results.record import ResultStatus, StoredResult, now
    from .secret import file_secret
    from .session import Session

    meta, _ = read_metadata(layout.metadata)
    user = meta.users[0] if meta.users else User()
    status: ResultStatus
    file_name, reason, report = "", "", None
    try:
        notebook = find_notebook(layout.submission)
        file_name = notebook.name
        with Session(official=True, hide=(layout.root / "source", layout.results.parent)) as session:
            # the course's seed secret, from the autograder zip (make_zip.sh) or GRADER_SEED_SECRET
            seed_secret = file_secret(layout.root / "source" / "seed_secret")
            options: dict[str, Any] = {} if rubric is not None else {"module": module}
            report = session.grade(notebook, rubric, backend=backend, seed_secret=seed_secret, **options)
        status = "graded"
    except SubmissionError as e:
        status, reason = "invalid", str(e)
    except GraderError as e:
        status, reason = "failed_to_grade", str(e)
    except Exception as e:  # a grader bug: the student still gets a results.json saying so, never a 0
        status, reason = "failed_to_grade", f"internal grader error, please report it: {type(e).__name__}: {str(e)[:300]}"
    return StoredResult(
        student_id=user.id, cache_key="", sha256=report.sha256 if report else "", file_name=file_name,
        name=user.name, email=user.email, submitted_at=meta.created_at, status=status, reason=reason,
        score=report.score if report else None, max_score=report.max_score if report else None,
        report=report, graded_at=now(),
    ), meta


def run(root: Path, *, rubric: Path | None = None, backend: str = "local", module: str | None = None) -> int:
    """Grade, write ROOT/results/results.json, and return the exit status. Without a rubric, the
    course module is the one the submitted notebook says, else ``module``, else the assignment's
    ``ROOT/source/module`` (grader.modules.choose). When none tells, results.json says why (the
    notebook is graded by no rubric: score 0, no tests)."""
    from .errors import ModuleUnitError
    from .export.gradescope import results_json
    from .models import shown
    from .rubric import load_rubric

    layout = Layout(root)
    course = _assignment_module(layout)
    loaded: Rubric | None
    if rubric is None:
        from .modules.choose import choose_module

        try:
            notebook: Path | None = find_notebook(layout.submission)
        except SubmissionError:  # grading says so in results.json
            notebook = None
        try:
            loaded = load_rubric(module=choose_module(notebook, module, course=course).name)
        except ModuleUnitError:  # results.json still says what is wrong: grading fails the same way
            loaded = None
    else:
        loaded = load_rubric(rubric)
    layout.results.parent.mkdir(parents=True, exist_ok=True)  # before grading, so the sandbox hides it
    result, meta = grade_submission(layout, loaded, backend, module or course)
    try:
        data: dict[str, Any] = results_json(result, loaded, practice_note=False)
    except Exception as e:  # results.json is written whatever failed: the student must see why
        result = dataclasses.replace(result, status="failed_to_grade", score=None, max_score=None, report=None,
                                     reason=f"internal grader error, please report it: {type(e).__name__}: "
                                            f"{str(e)[:300]}")
        data = results_json(result, loaded, practice_note=False)
    if meta.id:
        data["extra_data"]["submission_id"] = meta.id
    tmp = layout.results.with_name("results.json.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(layout.results)
    # stdout is hidden from students (stdout_visibility "hidden"): it is the staff log
    print(f"{result.status}: score {data['score']:g}" + (f" ({shown(result.reason)})" if result.reason else ""))
    for warning in result.report.backend.warnings if result.report else ():
        print(f"sandbox warning: {shown(warning)}")  # e.g. no mount namespace: ROOT/source is not hidden
    return EXIT_FAULT if result.status == "failed_to_grade" else EXIT_OK


def add_gradescope_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``gradescope`` to the ``grader`` command's subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "gradescope", help="grade inside Gradescope's /autograder layout and write results/results.json")
    p.add_argument("--root", type=Path, default=None,
                   help=f"the autograder folder (default: ${ROOT_ENV} or {DEFAULT_ROOT})")
    p.add_argument("--rubric", type=Path, help="rubric .toml (default: ROOT/source/rubric.toml if present, "
                                               "else the installed course module's)")
    p.add_argument("--module", metavar="NAME", help="the course module (default: the one the notebook says, else "
                                                    "ROOT/source/module, else the only one installed)")
    p.add_argument("--backend", choices=BACKENDS, default="local",
                   help="local: the Gradescope container is the outer sandbox")
    return p


def gradescope_command(args: argparse.Namespace) -> int:
    from .settings import settings

    root: Path = args.root or settings().autograder_root or Path(DEFAULT_ROOT)
    rubric: Path | None = args.rubric
    if rubric is None and (root / "source" / "rubric.toml").is_file():
        rubric = root / "source" / "rubric.toml"
    from .errors import os_reason
    from .models import shown

    if not root.is_dir():
        print(f"error: {shown(str(root))}: not a folder; give --root the autograder folder (with submission/ in it)",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        return run(root, rubric=rubric, backend=args.backend, module=args.module)
    except GraderError as e:  # the rubric or the layout itself is broken: staff must fix the autograder
        print(f"error: {shown(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:  # ROOT/results cannot be written
        print(f"error: {shown(str(root))}/results: results.json cannot be written there ({os_reason(e)})",
              file=sys.stderr)
        return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grader")
    add_gradescope_parser(parser.add_subparsers(dest="command", required=True))
    return gradescope_command(parser.parse_args(["gradescope", *(sys.argv[1:] if argv is None else argv)]))


if __name__ == "__main__":
    sys.exit(main())
