"""End to end on the local backend: golden reports for every bundled submission, isolation of
checks, and attempts to change a verdict from inside the student's process."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader import Grader, GradeReport

from .conftest import SUBMISSIONS, code_cells, fast_rubric_file, write_notebook

GOLDEN = Path(__file__).parent / "golden"
SUBMISSION_FILES = sorted(p for p in SUBMISSIONS.iterdir() if p.suffix in (".ipynb", ".py"))


def normalized(report: GradeReport) -> dict[str, Any]:
    """The report without timings and machine-specific sandbox details."""
    data = report.model_dump(mode="json")
    for check in data["checks"]:
        check.pop("duration_ms")
        check["figures"] = [f"{f['name']}: {len(f['got'])}x{len(f['got'][0])}" for f in check["figures"]]
    data["backend"] = {"name": data["backend"]["name"], "label": data["backend"]["label"]}
    data.pop("grader_version")
    return data


@pytest.mark.parametrize("path", SUBMISSION_FILES, ids=[p.stem for p in SUBMISSION_FILES])
def test_golden_report(grader_local: Grader, path: Path) -> None:
    """Each bundled submission gets exactly the verdicts and feedback recorded in tests/golden.

    Regenerate after an intended change with UPDATE_GOLDEN=1, then review the diff.
    """
    got = normalized(grader_local.grade(path))
    golden = GOLDEN / f"{path.name}.json"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    assert got == json.loads(golden.read_text(encoding="utf-8"))


def test_correct_submissions_get_full_marks_and_each_bug_loses_points(grader_local: Grader) -> None:
    for path in SUBMISSION_FILES:
        report = grader_local.grade(path)
        if path.name.startswith("correct"):
            assert report.score == report.max_score == 100, path.name
        else:
            assert report.score < 100, path.name


def test_same_input_same_report_apart_from_timings(grader_local: Grader) -> None:
    path = SUBMISSIONS / "bug_sin_exponent.ipynb"
    assert normalized(grader_local.grade(path)) == normalized(grader_local.grade(path))


@pytest.fixture(scope="module")
def fast_rubric(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fast_rubric_file(tmp_path_factory.mktemp("rubric"), 1, 5, 120)


@pytest.fixture(scope="module")
def fast_grader(fast_rubric: Path) -> Iterator[Grader]:
    with Grader(fast_rubric, "local") as g:
        yield g


def variant(tmp_path: Path, name: str, extra: str, base: str = "correct_tinytorch.ipynb") -> Path:
    """The base submission plus one more code cell, which runs after all the others."""
    return write_notebook(tmp_path / name, [*code_cells(SUBMISSIONS / base), extra])


def statuses(report: GradeReport) -> dict[str, str]:
    return {c.id: c.status for c in report.checks}


def test_a_hang_in_one_check_does_not_sink_the_others(fast_grader: Grader, tmp_path: Path) -> None:
    path = variant(tmp_path, "hang.ipynb", (
        "def _hang(*args, **kwargs):\n    while True:\n        pass\n"
        "np.sin = _hang\n"))
    got = statuses(fast_grader.grade(path))
    assert got["sin_pos0"] == got["sin_values"] == "timeout"
    assert got["emb_lookup"] == got["grad_accumulate"] == got["pe_grad"] == "passed"


@pytest.mark.parametrize(
    ("attack", "expected"),
    [
        pytest.param("import sys\nEmbedding.forward = lambda self, x: sys.exit(0)", "error", id="sys-exit"),
        pytest.param("import os\nEmbedding.forward = lambda self, x: os._exit(0)", "crashed", id="os-exit"),
        pytest.param("def _boom(self, x):\n    raise KeyboardInterrupt\nEmbedding.forward = _boom", "error",
                     id="keyboard-interrupt"),
        pytest.param("import numpy as np\nnp.allclose = lambda *a, **k: True\nnp.array_equal = lambda *a, **k: True\n"
                     "np.testing.assert_allclose = lambda *a, **k: None\n"
                     "Embedding.forward = lambda self, x: Tensor(np.zeros(x.shape + (self.weight.shape[1],)))",
                     "failed", id="monkeypatched-numpy"),
        pytest.param("class _Eq:\n    shape = (2, 2)\n    data = property(lambda s: s)\n"
                     "    def __eq__(self, o):\n        return True\n"
                     "    def __array__(self, *a, **k):\n        raise TypeError('no')\n"
                     "Embedding.forward = lambda self, x: _Eq()", "error", id="always-equal-object"),
    ],
)
def test_student_process_cannot_change_a_verdict(fast_grader: Grader, tmp_path: Path, attack: str, expected: str) -> None:
    report = fast_grader.grade(variant(tmp_path, "attack.ipynb", attack))
    got = statuses(report)
    assert got["emb_lookup"] == expected
    assert got["sin_values"] == "passed"  # untouched checks still pass
    assert report.score < 100


def test_exit_at_import_time_fails_every_check_clearly(fast_grader: Grader, tmp_path: Path) -> None:
    # ``np.x = ...`` changes a name the targets need, so it is kept and runs at definition time
    report = fast_grader.grade(variant(tmp_path, "exit.ipynb", "import os\nnp.x = os._exit(0)\n"))
    assert report.score == 0
    assert all(c.status == "crashed" for c in report.checks)
    assert "os._exit at top level" in report.checks[0].message


def test_missing_target_is_not_gradable_and_others_still_run(grader_local: Grader, tmp_path: Path) -> None:
    cells = [c for c in code_cells(SUBMISSIONS / "correct_tinytorch.ipynb") if "class PositionalEncoding" not in c]
    report = grader_local.grade(write_notebook(tmp_path / "nope.ipynb", cells))
    got = statuses(report)
    assert got["pe_broadcast"] == got["pe_grad"] == got["pe_too_long"] == "not_gradable"
    assert "PositionalEncoding is not defined" in {c.id: c for c in report.checks}["pe_broadcast"].message
    assert got["emb_lookup"] == got["sin_values"] == "passed"
