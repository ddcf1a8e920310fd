"""``grader.Grader`` and ``grader.grade``: grading with no session at hand.

A ``pipeline.Grader`` only borrows; this one opens a ``Session`` of its own (grader/session.py, the
one maker and closer of sandboxes and reference workers), borrows from it, and closes it with
itself. The front ends open one session and ask it for graders instead (``Session.grader``)."""

from __future__ import annotations

from pathlib import Path

from . import pipeline
from .load import LoadLimits
from .models import GradeReport
from .reference import Oracle
from .rubric import Rubric, load_rubric
from .sandbox import Sandbox
from .session import Session


class Grader(pipeline.Grader):
    """Grades submissions against one rubric on one sandbox backend (``"local"``, ``"docker"``, or a
    sandbox of the caller's, which stays the caller's to close), in a session of its own."""

    def __init__(
        self,
        rubric: Rubric | str | Path | None = None,
        backend: str | Sandbox = "local",
        *,
        public_only: bool = False,
        seed: int | None = None,
        limits: LoadLimits = LoadLimits(),
        reference: Oracle | None = None,
        official: bool = False,
        parallel: int | None = None,
        seed_secret: bytes | None = None,
    ) -> None:
        self.session = Session(official=official)
        try:
            loaded = rubric if isinstance(rubric, Rubric) else load_rubric(rubric)
            sandbox = self.session.sandbox(backend) if isinstance(backend, str) else backend
            super().__init__(loaded, sandbox, reference or self.session.oracle(loaded.module),
                             public_only=public_only, seed=seed, limits=limits, official=official,
                             parallel=parallel, seed_secret=seed_secret)
        except BaseException:
            self.session.close()
            raise

    def close(self) -> None:
        self.session.close()


def grade(path: str | Path, **options: object) -> GradeReport:
    """Grade one submission: ``grader.grade("student.ipynb")``; without a rubric, with the rubric of
    the course module the file says it is (grader.modules.choose)."""
    if options.get("rubric") is None:
        from .modules.choose import choose_module

        options["rubric"] = load_rubric(module=choose_module(path, options.pop("module", None)).name)  # type: ignore[arg-type]
    with Grader(**options) as grader:  # type: ignore[arg-type]
        return grader.grade(path)
