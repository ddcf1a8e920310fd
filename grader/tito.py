"""``tito test --module NAME``: the grader as a command of TinyTorch's ``tito`` CLI.

TinyTorch's ``tito`` has no plugin mechanism: its commands are a hard-coded dict built in
``tito.main.TinyTorchCLI.__init__``, each a ``BaseCommand`` (``name``, ``description``,
``add_arguments(parser)``, ``run(args) -> int``). This module supplies

- ``GradeTestCommand``, a ``test`` command with that interface. It wraps upstream's own ``test``
  command: with ``--module``/``--notebook`` it grades, otherwise (``tito test 11``, ``--all`` ...)
  it hands the parsed arguments to upstream's command untouched;
- ``main``: the grading side of ``tito``. TinyTorch's own ``tito`` script reaches it through the
  startup hook (grader/titohook.py), which hands ``tito test --module ...`` to it without
  importing upstream's CLI (upstream's import alone costs more than grading's budget allows, and
  it writes a log file into the working directory) and gives upstream's command table our
  ``test`` otherwise. The same ``main`` is the ``tito-grade`` script and ``python -m grader.tito``:
  there it runs upstream's ``main`` with our ``test`` swapped in for the call, and without
  TinyTorch, ``tito-grade test --module NAME [--notebook PATH]`` still works.

Exit status: 0 iff every graded check passed, 1 if one did not, 2 for usage errors (module not
found, unreadable notebook, unavailable backend).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .cliargs import NOT_IN_STUDENT_PACKAGE, backend, refused
from .deps import dependencies_checked
from .edition import BACKENDS, STUDENT

if TYPE_CHECKING:
    from rich.console import Console

    from .locate import ModuleWork

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
GRADING_FLAGS = ("--module", "--notebook")
PUBLIC_ONLY_SEED = 0  # seeds only the non-visible checks' inputs, which a public-only run does not have
DESCRIPTION = "Run module tests; with --module, grade your module with the course autograder"


class GradeTestCommand:
    """TinyTorch's ``test`` command plus ``--module``; every other use goes to upstream's ``test``.

    Honours tito's ``BaseCommand`` interface by duck typing, and forwards any other attribute tito
    asks of its ``test`` command to the wrapped upstream command.
    """

    name = "test"

    def __init__(self, config: Any = None, upstream: Any = None) -> None:
        self.config = config
        self._upstream = upstream

    def __getattr__(self, attr: str) -> Any:
        upstream = self.__dict__.get("_upstream")
        if upstream is None:
            raise AttributeError(attr)
        return getattr(upstream, attr)

    @property
    def description(self) -> str:
        return str(self._upstream.description) if self._upstream is not None else DESCRIPTION

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        if self._upstream is not None:
            self._upstream.add_arguments(parser)
        else:  # so that `tito test 11` gets a helpful answer rather than "unrecognized arguments"
            parser.add_argument("module", nargs="?", help=argparse.SUPPRESS)
        group = parser.add_argument_group(f"grading ({'tinytorch-grader-student' if STUDENT else 'tinytorch-grader'})")
        options: list[tuple[tuple[str, ...], dict[str, Any]]] = [
            (("--module",), dict(dest="grade_module", metavar="MODULE",
                                 help="grade your work for this module: its number, name, or NN_name")),
            (("--notebook",), dict(dest="grade_notebook", metavar="PATH", type=Path,
                                   help="grade this notebook or .py file instead of the one found in modules/")),
            (("--hidden",), dict(dest="grade_hidden", action="store_true",
                                 help="also run the hidden checks and show their full feedback (staff)")
             if not STUDENT else dict(dest="grade_hidden", nargs=0, action=refused(NOT_IN_STUDENT_PACKAGE["--hidden"]),
                                      default=False, help=argparse.SUPPRESS)),
            (("--backend",), dict(dest="grade_backend", choices=BACKENDS, default="local",
                                  help="local: practice run (default); docker: the official sandbox")
             if not STUDENT else dict(dest="grade_backend", type=backend, default="local", help=argparse.SUPPRESS)),
            (("--rubric",), dict(dest="grade_rubric", metavar="TOML", type=Path,
                                 help="rubric .toml (default: the bundled rubric of the module)")),
            (("--verbose",), dict(dest="grade_verbose", action="store_true",
                                  help="also say where the grader keeps its cache and its daemon's socket")),
        ]
        for flags, kwargs in options:
            try:
                group.add_argument(*flags, **kwargs)
            except argparse.ArgumentError:
                pass  # a future upstream option of the same name wins; `tito test --module` is still routed to us

    def validate_args(self, args: argparse.Namespace) -> None:
        if not _grading(args) and self._upstream is not None:
            self._upstream.validate_args(args)

    def execute(self, args: argparse.Namespace) -> int:
        """What tito's main calls: grading runs here, anything else is upstream's ``execute``."""
        if not _grading(args) and self._upstream is not None:
            return int(self._upstream.execute(args))
        return self.run(args)

    def run(self, args: argparse.Namespace) -> int:
        if _grading(args):
            return grade_command(args)
        if self._upstream is not None:
            return int(self._upstream.run(args))
        _errors().print("[red]error:[/] TinyTorch's tito is not installed here, so only "
                        "[bold]tito test --module NAME[/] is available (e.g. tito test --module NAME)",
                        highlight=False)
        return EXIT_USAGE


def _grading(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "grade_module", None) or getattr(args, "grade_notebook", None))


# ---- grading -----------------------------------------------------------------------------------


def grade_command(args: argparse.Namespace) -> int:
    """Find the module's work, grade it, print tito-style output; 0 iff every graded check passed."""
    from rich.markup import escape

    from .locate import LocateError

    errors = _errors()
    positional = getattr(args, "module", None)
    if positional:
        errors.print(f"[red]error:[/] give the module once: [bold]tito test --module {escape(positional)}[/] grades "
                     f"it, [bold]tito test {escape(positional)}[/] runs TinyTorch's own tests", highlight=False)
        return EXIT_USAGE
    from .client import run_request

    try:
        work, rubric = _resolve(getattr(args, "grade_module", None), getattr(args, "grade_notebook", None),
                                getattr(args, "grade_rubric", None))
    except LocateError as e:
        errors.print(f"[red]error:[/] {escape(str(e))}", highlight=False)
        return EXIT_USAGE
    use_daemon = getattr(args, "grade_use_daemon", True)
    if work.note:  # which of several notebooks is graded, or that it is TinyTorch's own, unchanged
        errors.print(f"[yellow]note:[/] {escape(work.note)}", highlight=False)
    if getattr(args, "grade_verbose", False):
        _say_where(errors, use_daemon)
    return run_request(tito_request(work, rubric, backend=getattr(args, "grade_backend", "local"),
                                    hidden=bool(getattr(args, "grade_hidden", False))),
                       use_daemon=use_daemon)


def _say_where(errors: Console, use_daemon: bool) -> None:
    """Where this grader writes: its cache (sandbox bundle, expected outputs) and the daemon's socket."""
    from . import daemon
    from .paths import cache_root

    socket = daemon.socket_path()
    if not (use_daemon and daemon.enabled()):
        state = "not used (GRADER_NO_DAEMON)"
    elif socket.exists():
        state = "a daemon is listening there"
    else:
        state = "none yet: one starts in the background after this run"
    errors.print(f"grader cache: {cache_root()}", highlight=False, markup=False)
    errors.print(f"grader daemon socket: {socket} ({state})", highlight=False, markup=False)


def _resolve(module: str | None, notebook: Path | None, rubric: Path | None) -> tuple[ModuleWork, Path | None]:
    """The file to grade and the rubric to grade it with (None: the grader's default rubric)."""
    from .locate import LocateError, ModuleRef, ModuleWork, locate, parse_module, rubric_for

    ref = parse_module(module) if module else None
    if notebook is not None:
        if notebook.is_dir():
            raise LocateError(f"--notebook {notebook}: is a directory; give your notebook file")
        if not notebook.is_file():
            raise LocateError(f"--notebook {notebook}: no such file")
        work = ModuleWork(notebook, ref.number if ref else None, (ref.name if ref else None) or "")
    elif ref is not None:
        work = locate(ref, [Path.cwd()], hint="or pass --notebook PATH")
    else:
        raise LocateError("name a module (--module NAME) or a file (--notebook PATH)")
    if rubric is not None:
        return work, rubric
    if work.name:
        lookup = ModuleRef(None, work.name)  # numbers shift between TinyTorch versions; names do not
    elif ref is not None:
        lookup = ref
    else:
        return work, None  # --notebook alone: the grader's default rubric decides the module
    bundled = rubric_for(lookup)
    number = work.number if work.number is not None else bundled.number
    return ModuleWork(work.path, number, bundled.module, work.checkout, work.note), bundled.path


def tito_request(work: ModuleWork, rubric: Path | None, *, backend: str, hidden: bool) -> dict[str, object]:
    """``tito test --module``'s work as a request (plain data: the daemon validates it)."""
    from .client import terminal
    from .locate import module_label

    return {
        "command": "tito", "paths": [str(work.path.resolve())], "rubric": str(rubric.resolve()) if rubric else None,
        "backend": backend, "public_only": not hidden,
        # The public checks' inputs are fixed; with the seed fixed too, their job is the same for every
        # version of the notebook, so after the first run the expected outputs come from the cache.
        "seed": None if hidden else PUBLIC_ONLY_SEED,
        "label": module_label(work.number, work.name) if work.number is not None and work.name else "",
        "display": _display_path(work.path), "module_name": work.name, **terminal(),
    }


def _display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _errors() -> Console:
    from rich.console import Console

    from .terminal import PrintableStream, encoding_of

    # one line per error: the terminal wraps it, greps find it
    return Console(file=PrintableStream(sys.stderr, encoding_of(sys.stderr)), soft_wrap=True)  # type: ignore[arg-type]


# ---- the entry point ----------------------------------------------------------------------------


def standalone_parser() -> argparse.ArgumentParser:
    """The parser used when TinyTorch's tito is absent, and for the ``tito test --module`` fast path."""
    parser = argparse.ArgumentParser(prog="tito", description="Grade TinyTorch modules: tito test --module NAME. "
                                     "(TinyTorch's own tito adds its other commands when it is installed.)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    command = GradeTestCommand()
    command.add_arguments(sub.add_parser("test", help=command.description, description=command.description))
    return parser


@dependencies_checked
def main(argv: Sequence[str] | None = None, *, use_daemon: bool = True) -> int:
    """The ``tito`` console script: upstream's tito with ``tito test --module``; see the module docstring."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if is_grading_call(args):
            parsed = standalone_parser().parse_args(args)
            parsed.grade_use_daemon = use_daemon
            return GradeTestCommand().execute(parsed)
        upstream = _upstream_main()
        if upstream is not None:
            return _run_upstream(upstream, args)
        if args and not args[0].startswith("-") and args[0] != "test":
            _errors().print(f"[red]error:[/] tito {args[0]}: TinyTorch's tito is not installed here (run "
                            "[bold]pip install -e .[/] in your TinyTorch checkout); this tito only provides "
                            "[bold]tito test --module NAME[/]", highlight=False)
            return EXIT_USAGE
        parsed = standalone_parser().parse_args(args)
        if parsed.command is None:
            standalone_parser().print_help()
            return EXIT_USAGE
        return GradeTestCommand().execute(parsed)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def is_grading_call(args: Sequence[str]) -> bool:
    """``test`` first, a grading flag after it, and no help request: the one shape we answer directly."""
    if not args or args[0] != "test" or any(a in ("-h", "--help") for a in args):
        return False
    return any(a in GRADING_FLAGS or a.startswith(tuple(f + "=" for f in GRADING_FLAGS)) for a in args[1:])


def _upstream_main() -> ModuleType | None:
    """TinyTorch's ``tito.main`` if importable (installed, or the checkout's own ``tito/`` as
    upstream's ``bin/tito`` would use it); None if absent or if ``tito`` is another project."""
    if importlib.util.find_spec("tito") is None:
        from .locate import find_checkout

        checkout = find_checkout([Path.cwd()])
        if checkout is None or not (checkout / "tito" / "main.py").is_file():
            return None
        sys.path.insert(0, str(checkout))
        importlib.invalidate_caches()
    try:
        tito_main = importlib.import_module("tito.main")
    except ModuleNotFoundError as e:
        if e.name in ("tito", "tito.main"):  # e.g. the RPM release tool, also called tito
            return None
        raise  # TinyTorch's tito is there but broken: fail exactly as upstream would
    return tito_main if callable(getattr(tito_main, "main", None)) else None


def _run_upstream(tito_main: Any, args: list[str]) -> int:
    """Run upstream's own ``main`` with our ``test`` command in its command table."""
    cli_class = getattr(tito_main, "TinyTorchCLI", None)
    saved_argv = sys.argv
    sys.argv = [saved_argv[0] if saved_argv else "tito", *args]
    try:
        if isinstance(cli_class, type):
            tito_main.TinyTorchCLI = _with_grading(cli_class)
        return int(tito_main.main() or 0)
    finally:
        sys.argv = saved_argv
        if cli_class is not None:
            tito_main.TinyTorchCLI = cli_class


def extend_upstream(tito_main: ModuleType) -> None:
    """Give upstream's ``tito.main`` our ``test`` command for good (the startup hook, grader/titohook.py)."""
    cli_class = getattr(tito_main, "TinyTorchCLI", None)
    if isinstance(cli_class, type):
        tito_main.TinyTorchCLI = _with_grading(cli_class)  # type: ignore[attr-defined]


def _with_grading(cli_class: type) -> type:
    """A subclass of upstream's CLI whose command table has our ``test`` wrapping upstream's."""

    if getattr(cli_class, "_tinytorch_grader", False):
        return cli_class  # extended already (the startup hook, then tito-grade in the same process)

    class TinyTorchCLIWithGrading(cli_class):  # type: ignore[misc]
        _tinytorch_grader = True

        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            commands = getattr(self, "commands", None)
            # If upstream's table ever changes shape, leave it alone: `tito test --module` is still
            # answered by main() before upstream is imported.
            if isinstance(commands, dict):
                commands["test"] = grading_test_command(commands.get("test"))

    TinyTorchCLIWithGrading.__qualname__ = TinyTorchCLIWithGrading.__name__ = cli_class.__name__
    return TinyTorchCLIWithGrading


def grading_test_command(upstream_class: Any = None) -> type:
    """A command class for tito's table (``command_class(config)``) wrapping upstream's ``test`` class.

    A course that maintains its own TinyTorch fork can register it directly:
    ``"test": grading_test_command(TestCommand)`` in ``TinyTorchCLI``'s command dict.
    """

    class TestCommand(GradeTestCommand):
        def __init__(self, config: Any = None) -> None:
            super().__init__(config, upstream_class(config) if upstream_class is not None else None)

    return TestCommand


if __name__ == "__main__":
    sys.exit(main())
