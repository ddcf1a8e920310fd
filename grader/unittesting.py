"""The one public module a course-module unit's own tests import (docs/NEW_MODULE.md, step 8).

A unit keeps its tests in its ``tests/`` folder (staff only: the student package leaves it out).
They import this module and ``grader.unit``, nothing else of the grader, so that a course's own
distribution can test its units the same way the grader's two units are tested. Its ``__all__``
is pinned by tests/test_unit_api.py: adding a name is cheap, removing or renaming one breaks
every course's unit tests.

- **Fixtures.** A unit's ``tests/conftest.py`` imports them by name::

      from grader.unittesting import grader_environment, grading_session  # noqa: F401

  ``grader_environment`` (autouse) gives every test a cache of the run's own, a fixed seed secret
  and no standing module (each notebook says which module it is, or the test names it);
  ``grading_session`` is one in-process :class:`~grader.session.Session` per test module.
- **A catalog of notebooks.** :class:`Bug` and :class:`Style` are a correct notebook with a few
  edits; a catalog subclasses them with its ``folder``, and :func:`build_notebook` writes one.
- **Notebooks of a test's own.** :func:`write_notebook` writes a minimal valid notebook of given
  cells; :func:`code_cells` reads a notebook's code cells, to build a variant of it.
- **Front ends.** :func:`tito` runs ``tito test`` as a student would, in a checkout that
  :func:`course_checkout` lays out as TinyTorch's; :func:`load_rubric` is the rubric any front end
  would grade with. ``Session``, ``GradeReport`` and ``Rubric`` are the types they give.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from .models import GradeReport
from .rubric import Rubric
from .session import Session


@dataclass(frozen=True)
class Style:
    """A correct notebook written unusually (or skipping what the assignment never asks): full marks.

    ``base`` is a notebook in ``folder``; each edit (old text, new text) is found exactly once in
    its code cells. ``note`` names a check whose passing message says what beyond the assignment
    the style skips."""

    folder: ClassVar[Path]  # where the catalog's notebooks are: set by the catalog's subclass

    name: str
    base: str
    edits: tuple[tuple[str, str], ...]
    about: str
    note: str = ""

    @property
    def path(self) -> Path:
        return self.folder / f"{self.name}.ipynb"


@dataclass(frozen=True)
class Bug:
    """A realistic bug: a correct notebook with edits, the checks it must fail (in order: the first
    one's message must contain ``cause``) and what it is about."""

    folder: ClassVar[Path]

    name: str
    base: str
    edits: tuple[tuple[str, str], ...]
    fails: tuple[str, ...]
    cause: str
    about: str

    @property
    def path(self) -> Path:
        return self.folder / f"{self.name}.ipynb"


def build_notebook(entry: Bug | Style, bases: Path | None = None) -> str:
    """The entry's notebook as JSON text: its base (in ``bases``, default the entry's folder) with
    its edits, each found exactly once in the base's code cells; edited cells' outputs cleared."""
    nb = json.loads(((bases or entry.folder) / entry.base).read_text(encoding="utf-8"))
    for old, new in entry.edits:
        hits = [c for c in nb["cells"] if c["cell_type"] == "code" and old in "".join(c["source"])]
        source = "".join(hits[0]["source"]) if len(hits) == 1 else ""
        if len(hits) != 1 or source.count(old) != 1:
            raise ValueError(f"{entry.name}: {old!r} is not found exactly once in {entry.base}")
        hits[0]["source"] = source.replace(old, new).splitlines(keepends=True)
        hits[0]["outputs"], hits[0]["execution_count"] = [], None
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def write_notebook(path: Path, cells: Sequence[str | tuple[str, str]], **top: Any) -> Path:
    """A minimal valid v4.5 notebook; a cell is code, or (cell_type, source)."""
    nb_cells = []
    for n, cell in enumerate(cells):
        kind, source = cell if isinstance(cell, tuple) else ("code", cell)
        entry: dict[str, Any] = {"cell_type": kind, "id": f"c{n}", "metadata": {}, "source": source}
        if kind == "code":
            entry.update(execution_count=None, outputs=[])
        nb_cells.append(entry)
    nb = {"cells": nb_cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5, **top}
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def code_cells(notebook: Path) -> list[str]:
    """The code cells of a notebook, for building variants of it."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def not_passed(report: GradeReport) -> set[str]:
    """The ids of the report's checks that did not pass."""
    return {c.id for c in report.checks if c.status != "passed"}


def load_rubric(module: str) -> Rubric:
    """The installed unit's rubric, as every front end loads it."""
    from .rubric import load_rubric as load

    return load(module=module)


def tito(*args: str | Path, cwd: Path, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    """``tito ARGS`` as the grader's console script runs it (the working directory is not on sys.path)."""
    return subprocess.run([sys.executable, "-P", "-m", "grader.tito", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout_s)


def course_checkout(root: Path, notebooks: Mapping[str, Path]) -> Path:
    """``root`` laid out as a TinyTorch checkout: each notebook copied to
    ``modules/<folder>/<folder>.ipynb`` for its key ``NN_name``, beside the course's ``src/``."""
    (root / "src" / "01_tensor").mkdir(parents=True, exist_ok=True)
    for folder, notebook in notebooks.items():
        (root / "modules" / folder).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(notebook, root / "modules" / folder / f"{folder}.ipynb")
    return root


def _isolate(mp: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    cache = tmp_path_factory.getbasetemp() / "unit-grader-cache"  # one for the run: references built once
    cache.mkdir(exist_ok=True)
    mp.setenv("GRADER_CACHE", str(cache))
    # the hidden checks' inputs come from the secret: a catalog's expectations are pinned to this one
    mp.setenv("GRADER_SEED_SECRET", "tests")
    mp.setenv("GRADER_NO_DAEMON", "1")
    mp.delenv("GRADER_MODULE", raising=False)


@pytest.fixture(autouse=True)
def grader_environment(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The run's own cache, a fixed seed secret, in-process grading and no standing module, in this
    process and every process a test starts; the grader's settings are read again around the test."""
    from . import settings

    _isolate(monkeypatch, tmp_path_factory)
    settings.reload()
    yield
    monkeypatch.undo()
    settings.reload()


@pytest.fixture(scope="module")
def grading_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """One in-process grading session for the test module (its sandbox is started once), made in
    the same environment as :func:`grader_environment`'s."""
    from . import settings

    mp = pytest.MonkeyPatch()
    _isolate(mp, tmp_path_factory)
    settings.reload()
    try:
        with Session() as session:
            yield session
    finally:
        mp.undo()
        settings.reload()


__all__ = [
    "Bug",
    "GradeReport",
    "Rubric",
    "Session",
    "Style",
    "build_notebook",
    "code_cells",
    "course_checkout",
    "grader_environment",
    "grading_session",
    "load_rubric",
    "not_passed",
    "tito",
    "write_notebook",
]
