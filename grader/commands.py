"""What ``grader grade`` and ``tito test --module`` do once their command line is parsed.

A front end turns its arguments into a ``GradeRequest`` (absolute paths, every option explicit)
and hands it to ``execute`` with a ``Session``, in its own process or through the daemon, which
keeps one session warm and calls the same function. Output goes to the two consoles given: nothing
here reads the working directory, the environment or the terminal.
"""

from __future__ import annotations

import threading
from functools import cached_property
from typing import TYPE_CHECKING, Literal, TextIO

from .errors import GraderError
from .models import Record

if TYPE_CHECKING:
    from rich.console import Console

    from .session import Session

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class GradeRequest(Record):
    """One grading command, as the daemon receives it."""

    command: Literal["grade", "tito"]
    paths: tuple[str, ...]
    rubric: str | None = None
    module: str | None = None  # an installed course module, when several are installed
    backend: str = "local"
    public_only: bool = False
    seed: int | None = None
    staff: bool = False
    json_out: str | None = None
    due_date: str | None = None  # releases after_due_date checks in the student view (grader.visibility)
    publish_date: str | None = None  # releases after_published checks
    label: str = ""  # tito: "module NN name"
    display: str = ""  # tito: the notebook's path as the student sees it
    module_name: str = ""  # tito: what to type to run it again
    columns: int = 80
    color: bool = False
    encoding: str = "utf-8"  # what the terminal can print: anything else is replaced with plain text


class Consoles:
    """The request's two consoles (output, errors), made on first use: the renderer's imports then
    happen while the submission is graded (``execute`` starts them on a thread), not before."""

    def __init__(self, request: GradeRequest, out: TextIO, err: TextIO) -> None:
        self._request, self._streams = request, (out, err)

    @cached_property
    def out(self) -> Console:
        return self._make(self._streams[0], soft_wrap=False)

    @cached_property
    def err(self) -> Console:
        return self._make(self._streams[1], soft_wrap=True)

    def _make(self, stream: TextIO, soft_wrap: bool) -> Console:
        from rich.console import Console

        from .terminal import PrintableStream

        request = self._request
        return Console(file=PrintableStream(stream, request.encoding), width=request.columns,  # type: ignore[arg-type]
                       force_terminal=request.color, color_system="auto" if request.color else None, soft_wrap=soft_wrap)


def _import_renderer() -> None:
    """What printing a report needs, imported on a thread while the main one waits for the sandbox."""
    import rich.console
    import rich.markup  # noqa: F401

    from . import report  # noqa: F401


def execute(request: GradeRequest, session: Session, out: TextIO, err: TextIO) -> int:
    """Run one request: 0 iff every graded check passed, 1 if one did not, 2 for bad input."""
    renderer = threading.Thread(target=_import_renderer, daemon=True)
    renderer.start()
    try:
        consoles = Consoles(request, out, err)
        if request.command == "tito":
            return _tito(request, session, consoles.out, consoles.err)
        return _grade(request, session, consoles)
    finally:
        renderer.join()


def _error(errors: Console, message: str) -> None:
    from rich.markup import escape

    from .models import shown

    errors.print(f"[red]error:[/] {escape(shown(message))}", highlight=False)


def _grade(request: GradeRequest, session: Session, consoles: Consoles) -> int:
    from pathlib import Path

    from .errors import GraderError, os_reason
    from .visibility import release_for

    reports, bad_input = [], False
    for module, paths in _by_module(request):
        if isinstance(module, GraderError):  # which module this file is cannot be told
            _error(consoles.err, str(module))
            bad_input = True
            continue
        try:
            grader = session.grader(request.rubric, module=module, backend=request.backend,
                                    public_only=request.public_only, seed=request.seed)
            release = release_for(grader.rubric.due_date, grader.rubric.publish_date, due_date=request.due_date,
                                  publish_date=request.publish_date)
            for _path, outcome in grader.grade_many(paths):
                if isinstance(outcome, GraderError):
                    _error(consoles.err, str(outcome))
                    bad_input = True
                    continue
                from .report import render

                reports.append(outcome)
                render(outcome, consoles.out, staff=request.staff, release=release, rubric=grader.rubric)
        except GraderError as e:  # the rubric or the sandbox itself: no file can be graded
            _error(consoles.err, str(e))
            bad_input = True
            break
    if request.json_out and reports:  # the reports of the files that were graded, whatever happened to the others
        from .report import write_json

        try:
            write_json(reports, Path(request.json_out))
        except OSError as e:
            _error(consoles.err, f"--json {request.json_out}: cannot be written ({os_reason(e)}); the report(s) above are "
                           "complete, give a writable file path to keep them as JSON")
            bad_input = True
    if bad_input:
        return EXIT_USAGE
    return EXIT_OK if all(r.all_passed for r in reports) else EXIT_FAILED


def _by_module(request: GradeRequest) -> list[tuple[str | GraderError | None, list[str]]]:
    """The request's files in order, in runs of one course module each (grader.modules.choose);
    a file whose module cannot be told is a run of its own, with the error in place of the module.
    A rubric file names its module itself."""
    from .modules.choose import choose_module

    if request.rubric is not None:
        return [(None, list(request.paths))]
    runs: list[tuple[str | GraderError | None, list[str]]] = []
    for path in request.paths:
        try:
            module: str | GraderError = choose_module(path, request.module).name
        except GraderError as e:
            module = e
        if runs and isinstance(module, str) and runs[-1][0] == module:
            runs[-1][1].append(path)
        else:
            runs.append((module, [path]))
    return runs


def _tito(request: GradeRequest, session: Session, console: Console, errors: Console) -> int:
    from rich.markup import escape
    from rich.panel import Panel

    from .errors import GraderError
    from .report import render

    hidden = not request.public_only
    try:
        module = request.module
        if request.rubric is None:  # --notebook alone: the notebook says which module it is
            from .modules.choose import choose_module

            module = choose_module(request.paths[0], request.module).name
        grader = session.grader(request.rubric, module=module, backend=request.backend, public_only=request.public_only,
                                seed=request.seed)
    except GraderError as e:
        _error(errors, str(e))
        return EXIT_USAGE
    from .locate import module_label, module_number

    label = request.label or module_label(module_number(grader.rubric.module), grader.rubric.module)
    from .edition import PRACTICE_NOTE, STUDENT

    run_kind = "official run (docker sandbox)" if request.backend == "docker" else "practice run (local backend)"
    checks = "all checks, with staff feedback" if hidden else "the public checks"
    if STUDENT:
        checks, run_kind = "the public checks", PRACTICE_NOTE.removeprefix("practice run: the public checks, ")
    console.print(Panel(f"🧪 Grading [bold cyan]{escape(label)}[/]: [bold]{escape(request.display)}[/]\n"
                        f"[dim]{checks}; {run_kind}[/]", title="tito test --module", border_style="bright_cyan"))
    try:
        report = grader.grade(request.paths[0])
    except GraderError as e:
        _error(errors, str(e))
        return EXIT_USAGE
    render(report, console, staff=hidden, rubric=grader.rubric)
    passed = sum(c.status == "passed" for c in report.checks)
    total = len(report.checks)
    points = f"{report.score:g}/{report.max_score:g} points"
    kind = "public checks" if all(c.visibility == "visible" for c in report.checks) else "checks"  # not every check
    if report.all_passed:
        console.print(Panel(f"✅ [bold green]All {total} {kind} passed[/] ({points})", border_style="green"))
        return EXIT_OK
    console.print(Panel(f"❌ [bold red]{total - passed} of {total} {kind} did not pass[/] ({points})\n"
                        f"[dim]Read the feedback above, fix your code, and run tito test --module "
                        f"{escape(request.module_name or grader.rubric.module)} again.[/]", border_style="red"))
    return EXIT_FAILED
