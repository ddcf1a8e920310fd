"""How ``tito test --module`` reaches TinyTorch's own ``tito``: a startup hook, not a console script.

The distribution installs ``tinytorch-grader-tito.pth`` into site-packages. Python runs its one
line at start-up in every interpreter of the environment; the line only compares the script's
name with ``tito`` and, in TinyTorch's ``tito`` process alone, calls ``install()``. That puts a
one-shot finder on ``sys.meta_path`` which waits for TinyTorch's console script to import
``tito.main``:

- ``tito test --module NAME`` (or ``--notebook PATH``): ``tito.main`` is answered with a module
  whose ``main`` is the grader's, so upstream's CLI is never imported (its import costs more than
  the grading budget allows, and writes ``tito-cli.log`` into the working directory);
- anything else: upstream's ``tito.main`` runs as usual, and right after it has executed, its
  ``TinyTorchCLI`` is replaced by a subclass whose command table maps ``test`` to the grader's
  wrapper of upstream's own ``test`` command (grader.tito.grading_test_command). Every other
  command, option, banner and help text is upstream's.

Nothing here owns ``bin/tito``: pip gives that file to TinyTorch alone, so the install order, a
re-run of ``tito setup`` (``pip install -e .``) and ``pip uninstall tinytorch-grader`` (which
removes the ``.pth`` with the package) all leave TinyTorch's ``tito`` exactly as TinyTorch made it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType
from typing import Any

TARGET = "tito.main"
SCRIPT_NAMES = ("tito", "tito.exe", "tito-script.py")
_INSTALLED = "_tinytorch_grader_tito_hook"  # a sys attribute: the .pth may be read twice (lib and lib64)


def is_tito_process(argv: Sequence[str]) -> bool:
    """Whether this interpreter was started as TinyTorch's ``tito`` console script."""
    return bool(argv) and os.path.basename(argv[0]).lower() in SCRIPT_NAMES


def startup() -> None:
    """What the ``.pth`` line calls: cheap, silent, and only ever active in a ``tito`` process."""
    if is_tito_process(sys.argv) and not getattr(sys, _INSTALLED, False):
        install()


def install() -> None:
    setattr(sys, _INSTALLED, True)
    sys.meta_path.insert(0, TitoMainFinder())


class TitoMainFinder:
    """Finds ``tito.main`` once, through the normal path finder, and wraps its loader."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname != TARGET:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)  # one shot: later imports of anything are untouched
        spec = PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return spec  # not TinyTorch's layout: leave the import to fail or succeed on its own
        from .tito import is_grading_call

        grading = is_grading_call(sys.argv[1:])
        # importlib.abc.Loader would cost this start-up 30 ms of imports; the protocol is duck-typed.
        spec.loader = GradingLoader(spec.loader, grading)  # type: ignore[assignment]
        return spec


class GradingLoader:
    """Upstream's loader, plus the grader's ``test`` command once the module has executed."""

    def __init__(self, inner: Any, grading: bool) -> None:
        self._inner, self._grading = inner, grading

    def __getattr__(self, name: str) -> Any:  # get_source, is_package ...: tracebacks stay upstream's
        return getattr(self._inner, name)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None if self._grading else self._inner.create_module(spec)

    def exec_module(self, target: ModuleType) -> None:
        from . import tito

        if self._grading:  # answered by the grader alone: upstream's CLI is not even imported
            setattr(target, "main", tito.main)  # noqa: B010
            return
        self._inner.exec_module(target)
        tito.extend_upstream(target)
