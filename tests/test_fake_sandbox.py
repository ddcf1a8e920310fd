"""The in-process fake sandbox grades like the real one, so probe and judge tests may use it."""

from __future__ import annotations

import pytest

from grader import Grader

from .conftest import SUBMISSIONS
from .fakes import InProcessSandbox


@pytest.mark.parametrize("name", ["correct_tinytorch.ipynb", "correct_newer_generation.ipynb",
                                  "bug_backward_overwrite.ipynb", "bug_sin_cos_swapped.ipynb"])
def test_the_fake_sandbox_gives_the_real_sandboxs_verdicts(grader_local: Grader, name: str) -> None:
    with Grader(backend=InProcessSandbox(), seed=3) as fake:
        got = fake.grade(SUBMISSIONS / name)
    real = Grader(grader_local.rubric, grader_local.sandbox, reference=grader_local.reference, seed=3).grade(
        SUBMISSIONS / name)
    assert got.backend.name == "inprocess"
    assert {c.id: (c.status, c.score) for c in got.checks} == {c.id: (c.status, c.score) for c in real.checks}
