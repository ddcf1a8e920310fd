"""pytest plugin: grade a submission with ``pytest``, one test item per rubric check.

    pytest --grade PATH [--rubric R.toml] [--backend local|docker]
    pytest --module NAME                # inside a TinyTorch checkout (its number, name, or NN_name)

Registered through the ``pytest11`` entry point, so it is loaded into every pytest run of the
environment: unless a submission is named (``--grade``/``--module`` or their ini twins
``grade_path``/``grade_module``) it only adds its options, imports nothing of the grader and leaves
collection alone. When enabled, the submission file becomes the run's only collection argument
(besides any paths given explicitly) and is collected as one item per check, marked with its
visibility (``-m "not hidden"``). The submission is graded once, when the first item runs; each item
then reads its check's result. Points go to each item's ``user_properties`` (``--junitxml``
properties ``points``, ``max_points``, ``status``), to ``-v`` status words and to a summary line.

Whoever runs pytest decides how it scores; the repository it runs in does not. Only the command
line (and ``PYTEST_ADDOPTS``) may give ``--rubric`` a file. An ini file, its ``addopts`` or a
``conftest.py`` setting an option may only select an installed rubric by id (``grade_rubric =
tinytorch-NN-name``, optionally pinned: ``...@sha256:1a2b3c4d``) and only name a submission
inside the ini's own folder; anything else is a usage error that says so. (A course grading a
student's checkout also runs that checkout's ``conftest.py``: use ``--noconftest``, see
docs/COURSE_SETUP.md.)
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .edition import BACKENDS, PRACTICE_NOTE, STUDENT

if TYPE_CHECKING:
    from _pytest._code.code import ExceptionInfo, TerminalRepr
    from _pytest.terminal import TerminalReporter

    from .locate import ModuleWork
    from .models import CheckResult, GradeReport
    from .pipeline import Grader
    from .rubric import CheckSpec, Rubric
    from .session import Session

MARKERS = {
    "visible": "a rubric check whose inputs and feedback students see",
    "hidden": "a rubric check with seeded inputs and withheld feedback",
    "after_due_date": "a rubric check released after the due date",
    "after_published": "a rubric check released when grades are published",
}
# flag, ini twin, dest, help
OPTIONS = (
    ("--grade", "grade_path", "PATH", "grade this notebook (.ipynb) or jupytext .py file: one test per rubric check"),
    ("--module", "grade_module", "MODULE",
     "grade the student's work for this module in the TinyTorch checkout: its number, name, or NN_name"),
    ("--rubric", "grade_rubric", "RUBRIC",
     "rubric to grade with: an installed rubric's id (ID or ID@sha256:HEX), or a .toml file on the command line "
     "only (default: the bundled rubric of the module)"),
    ("--backend", "grade_backend", "NAME", "sandbox: local (practice run, the default)" + ("" if STUDENT else
                                                                                        " or docker (official)")),
)


@dataclass(frozen=True)
class PluginSettings:
    """The plugin's options after merging command line and ini (command line wins)."""

    path: Path | None = None
    module: str | None = None
    rubric: Path | None = None  # a rubric file: only ever from the command line
    rubric_id: str | None = None  # an installed rubric, by id (and hash)
    backend: str = "local"

    @property
    def enabled(self) -> bool:
        return self.path is not None or self.module is not None


SETTINGS_KEY = pytest.StashKey[PluginSettings]()
SESSION_KEY = pytest.StashKey["GradingSession"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("grade", "grading a TinyTorch submission (tinytorch-grader)")
    for flag, ini, metavar, help_text in OPTIONS:
        group.addoption(flag, dest=ini, metavar=metavar, default=None, help=f"{help_text} (ini: {ini})")
        parser.addini(ini, f"default for {flag}: {help_text}", type="string", default="")


def pytest_configure(config: pytest.Config) -> None:
    settings = resolve_settings(config)
    config.stash[SETTINGS_KEY] = settings
    if not settings.enabled:
        return
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")
    grading = GradingSession.open(config, settings)
    config.stash[SESSION_KEY] = grading
    config.pluginmanager.register(grading, "tinytorch-grader-session")
    # Collect the submission instead of testpaths / the current directory, but keep explicit paths.
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        config.args.append(str(grading.work.path))
    else:
        config.args[:] = [str(grading.work.path)]


@dataclass(frozen=True)
class _Value:
    text: str
    where: str
    base: Path
    trusted: bool  # from the command line of whoever runs pytest, not from the repository


def resolve_settings(config: pytest.Config) -> PluginSettings:
    """One place that reads every option: the flag if given, else its ini twin; paths made absolute.
    A value that the repository supplies (ini, its addopts, a conftest) can choose less."""
    from_cli = _command_line(config)
    ini_base = config.inipath.parent if config.inipath else config.rootpath
    ini_name = str(config.inipath or "the ini file")
    values: dict[str, _Value] = {}
    for flag, ini, _, _ in OPTIONS:
        option = config.getoption(ini)
        if ini in from_cli:
            values[ini] = _Value(from_cli[ini], flag, config.invocation_params.dir, True)
        elif option is not None and str(option) != "":
            values[ini] = _Value(str(option), f"{flag} in the addopts of {ini_name} (or a conftest.py)", ini_base, False)
        elif isinstance(raw := config.getini(ini), str) and raw.strip():
            values[ini] = _Value(raw.strip(), f"{ini} in {ini_name}", ini_base, False)

    backend = "local"
    if "grade_backend" in values:
        backend = _validate_backend(values["grade_backend"].text, values["grade_backend"].where)
    module = values["grade_module"].text if "grade_module" in values else None
    path = _submission_path(values["grade_path"]) if "grade_path" in values else None
    rubric, rubric_id = _rubric_choice(values["grade_rubric"]) if "grade_rubric" in values else (None, None)
    return PluginSettings(path=path, module=module, rubric=rubric, rubric_id=rubric_id, backend=backend)


def _command_line(config: pytest.Config) -> dict[str, str]:
    """The plugin's flags as given on the command line and in PYTEST_ADDOPTS, which pytest reads
    before an ini file's ``addopts`` (those can come from the student's repository)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, fromfile_prefix_chars="@",
                                     exit_on_error=False)
    for flag, ini, _, _ in OPTIONS:
        parser.add_argument(flag, dest=ini)
    args = [*shlex.split(os.environ.get("PYTEST_ADDOPTS", "")), *map(str, config.invocation_params.args)]
    try:
        known, _ = parser.parse_known_args(args)
    except (argparse.ArgumentError, OSError, ValueError):
        return {}  # pytest has already refused such a command line
    return {k: v for k, v in vars(known).items() if v}


def _submission_path(value: _Value) -> Path:
    path = (value.base / value.text).resolve()
    if not value.trusted and not path.is_relative_to(value.base.resolve()):
        raise pytest.UsageError(f"{value.text!r} from {value.where} is outside {value.base}: a repository's settings "
                                "may only name a submission inside it; pass --grade PATH on the command line")
    return path


def _rubric_choice(value: _Value) -> tuple[Path | None, str | None]:
    """(a rubric file, an installed rubric's id): a file only from the command line."""
    from .locate import RUBRIC_SELECTOR

    is_id = RUBRIC_SELECTOR.match(value.text) is not None and not value.text.lower().endswith(".toml")
    if value.trusted:
        file = (value.base / value.text).resolve()
        return (None, value.text) if is_id and not file.exists() else (file, None)
    if not is_id:
        raise pytest.UsageError(
            f"rubric {value.text!r} from {value.where}: settings in the graded repository may only select an "
            "installed rubric by id (e.g. grade_rubric = <rubric id>), never a file; "
            "the course passes a rubric file with --rubric on the command line")
    return None, value.text


def _validate_backend(value: str, where: str) -> str:
    if value not in BACKENDS:
        why = (": the Docker sandbox is the official grading's, part of the staff package (tinytorch-grader)"
               if STUDENT and value == "docker" else "")
        raise pytest.UsageError(f"invalid backend {value!r} from {where}{why}: choose {' or '.join(BACKENDS)}")
    return value


class CheckFailed(Exception):
    """Raised by an item whose check did not pass; rendered as the check's feedback alone."""

    def __init__(self, result: CheckResult) -> None:
        super().__init__(result.id)
        self.result = result


class GradingSession:
    """What one pytest run grades, and the report once graded; registered as a plugin when enabled."""

    def __init__(self, config: pytest.Config, settings: PluginSettings, work: ModuleWork, rubric: Rubric, label: str):
        self.config, self.settings, self.work, self.rubric, self.label = config, settings, work, rubric, label
        self.selected: tuple[str, ...] = ()
        self.report: GradeReport | None = None
        self.error: str | None = None
        self._grader: Grader | None = None
        self._session: Session | None = None

    @classmethod
    def open(cls, config: pytest.Config, settings: PluginSettings) -> GradingSession:
        """Find the submission and load the rubric; any problem is a usage error with one line."""
        from .errors import GraderError
        from .locate import (
            ModuleRef,
            ModuleWork,
            installed_rubric,
            locate,
            module_label,
            module_number,
            parse_module,
            rubric_for,
        )
        from .rubric import load_rubric

        try:
            ref = parse_module(settings.module) if settings.module else None
            if settings.path is not None:
                if not settings.path.is_file():
                    raise pytest.UsageError(f"--grade {settings.path}: no such file")
                work = ModuleWork(settings.path, ref.number if ref else None, (ref.name if ref else None) or "")
            else:
                assert ref is not None  # enabled means a path or a module
                work = locate(ref, [config.invocation_params.dir, config.rootpath], hint="or pass --grade PATH")
            rubric_path = settings.rubric
            if settings.rubric_id is not None:
                rubric_path = installed_rubric(settings.rubric_id).path
            elif rubric_path is None and (work.name or ref is not None):
                rubric_path = rubric_for(ModuleRef(None, work.name) if work.name else ref).path  # type: ignore[arg-type]
            if rubric_path is None:  # --grade PATH alone: the notebook says which module it is
                from .modules.choose import choose_module

                rubric = load_rubric(module=choose_module(work.path).name)
            else:
                rubric = load_rubric(rubric_path)
        except GraderError as e:
            raise pytest.UsageError(str(e)) from None
        number = work.number if work.number is not None else module_number(rubric.module)
        return cls(config, settings, work, rubric, module_label(number, work.name or rubric.module))

    # ---- hooks ---------------------------------------------------------------------------------

    def pytest_report_header(self, config: pytest.Config) -> str:
        kind = "official run" if self.settings.backend == "docker" else "practice run"
        return (f"grading: {self.work.path} as {self.label} with rubric {self.rubric.id}@sha256:"
                f"{self.rubric.sha256[:12]} ({kind}, {self.settings.backend} backend)")

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        if file_path == self.work.path and file_path.suffix != ".py":
            return SubmissionFile.from_parent(parent, path=file_path)
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makemodule(self, module_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        """A ``.py`` submission is graded, never imported as a test module."""
        if module_path == self.work.path:
            return SubmissionFile.from_parent(parent, path=module_path)
        return None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.selected = tuple(item.name for item in session.items if isinstance(item, CheckItem))
        if self.selected and not self.config.option.collectonly:
            self._open_grader()

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> Any:
        if report.when != "call" or not report.nodeid.endswith(tuple(f"::{i}" for i in self.selected)):
            return None
        props = dict(report.user_properties)
        if "points" not in props:
            return None
        word = "PASSED" if report.passed else "FAILED"
        markup = {"green": True} if report.passed else {"red": True}
        return report.outcome, "." if report.passed else "F", (f"{word} {props['points']}/{props['max_points']}", markup)

    def pytest_terminal_summary(self, terminalreporter: TerminalReporter) -> None:
        if self.report is None and self.error is None:
            return
        terminalreporter.write_sep("-", "grade")
        if self.report is None:
            terminalreporter.write_line(f"{self.label}: not graded: {self.error}", red=True, bold=True)
            return
        from .score import total

        by_id = {c.id: c for c in self.report.checks}
        results = [by_id[i] for i in self.selected if i in by_id]
        score, max_score = total(results)
        passed = sum(r.status == "passed" for r in results)
        ok = passed == len(results)
        terminalreporter.write_line(f"{self.label}: {score:g}/{max_score:g} ({passed}/{len(results)} checks)",
                                    bold=True, green=ok, red=not ok)
        if STUDENT or self.report.backend.label == "practice":
            terminalreporter.write_line(PRACTICE_NOTE)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
            self._grader = None

    # ---- grading -------------------------------------------------------------------------------

    def check_readable(self) -> None:
        """Reject an unreadable submission at collection (SubmissionError), before any item runs."""
        from .load import load_submission

        load_submission(self.work.path)

    def result(self, check_id: str) -> CheckResult:
        """The result of one check; the first call grades the submission (once per session)."""
        if self.report is None and self.error is None:
            self._grade()
        if self.report is None:
            pytest.exit(f"{self.label}: not graded: {self.error}", returncode=pytest.ExitCode.INTERNAL_ERROR)
        for check in self.report.checks:
            if check.id == check_id:
                return check
        raise LookupError(f"check {check_id!r} is not in the report of {self.work.path}")

    def _open_grader(self) -> None:
        from .errors import GraderError
        from .session import Session

        self._session = Session()
        try:
            self._grader = self._session.grader(self.rubric, backend=self.settings.backend)
        except GraderError as e:
            raise pytest.UsageError(f"backend {self.settings.backend!r}: {e}") from None

    def _grade(self) -> None:
        from .errors import GraderError

        if self._grader is None:
            self._open_grader()
        assert self._grader is not None
        try:
            self.report = self._grader.grade(self.work.path)
        except GraderError as e:
            self.error = str(e)


class SubmissionFile(pytest.File):
    """The submission, collected as one item per rubric check."""

    def collect(self) -> Iterator[pytest.Item]:
        grading = self.config.stash[SESSION_KEY]
        grading.check_readable()
        for spec in grading.rubric.checks:
            yield CheckItem.from_parent(self, name=spec.id, spec=spec)

    def repr_failure(self, excinfo: ExceptionInfo[BaseException], style: Any = None) -> str | TerminalRepr:
        from .errors import GraderError

        if isinstance(excinfo.value, GraderError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class CheckItem(pytest.Item):
    """One rubric check; passes iff the check passed, fails with the check's feedback."""

    def __init__(self, *, spec: CheckSpec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.add_marker(spec.visibility)

    def runtest(self) -> None:
        result = self.config.stash[SESSION_KEY].result(self.name)
        self.user_properties += [("points", f"{result.score:g}"), ("max_points", f"{result.max_score:g}"),
                                 ("status", result.status)]
        if result.status != "passed":
            raise CheckFailed(result)

    def repr_failure(self, excinfo: ExceptionInfo[BaseException], style: Any = None) -> str | TerminalRepr:
        if isinstance(excinfo.value, CheckFailed):
            r = excinfo.value.result
            head = f"{r.id} {r.status}, {r.score:g}/{r.max_score:g} points: {r.title}"
            return f"{head}\n{r.message}" if r.message else head
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.name}: {self.spec.title}"
