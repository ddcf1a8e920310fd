"""End to end on the local backend: golden reports for every bundled submission, isolation of
checks, and attempts to change a verdict from inside the student's process."""

from __future__ import annotations

import io
import json
import os
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from grader import Grader, GradeReport
from grader.report import render

from .conftest import EMBEDDINGS_RUBRIC, SUBMISSIONS, code_cells, fast_rubric_file, write_notebook

pytestmark = pytest.mark.usefixtures("toy_site")  # two units installed, as in a course: module 11 still grades with no --module

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
        if path.name.startswith(("correct", "unasked")):  # unasked_*: skips only what the course never asks
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


def test_a_hung_method_costs_one_timeout_and_later_checks_say_why(fast_grader: Grader, tmp_path: Path) -> None:
    """Once forward has hung for one check, the checks that call it again stop at once, saying
    which check it hung in; the checks that never call it still pass."""
    path = variant(tmp_path, "hung_forward.ipynb", (
        "def _hang(self, *args, **kwargs):\n    while True:\n        pass\n\n\nEmbedding.forward = _hang\n"))
    started = time.monotonic()
    report = fast_grader.grade(path)
    took = time.monotonic() - started
    got = statuses(report)
    timeout_s = fast_grader.rubric.checks[0].timeout_s
    hung = sum(c.status == "timeout" for c in report.checks)
    # one timeout, then "stopped at once" for the rest: far below a timeout each (with room for load)
    assert hung >= 10 and took < hung * timeout_s / 2 + 1, f"took {took:.1f} s with {timeout_s} s per check"
    calls_forward = ("emb_shape", "emb_lookup", "grad_accumulate", "layer_scale")
    assert {got[c] for c in calls_forward} == {"timeout"}
    blocked = [c for c in report.checks if c.status == "timeout" and "blocked by" in c.message]
    assert len(blocked) >= len(calls_forward) - 2
    assert all("_hang" in c.message for c in blocked)
    assert got["sin_values"] == got["pe_init"] == got["emb_params"] == "passed"


LEAKY_FORWARD = """
_plain_forward = Embedding.forward
_grad_enabled = True


def _checked_forward(self, indices):
    global _grad_enabled
    previous, _grad_enabled = _grad_enabled, False  # no graph while the ids are checked
    ids = np.asarray(getattr(indices, "data", indices))
    if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
        raise IndexError(f"token ids must be in [0, {self.vocab_size})")
    _grad_enabled = previous  # not restored when the check above raised
    out = _plain_forward(self, indices)
    return out if _grad_enabled else Tensor(out.data)


Embedding.forward = _checked_forward
"""


def test_what_one_check_leaves_behind_never_changes_another_checks_verdict(fast_grader: Grader, tmp_path: Path) -> None:
    """A forward that switches gradient tracking off in a module-level flag while it checks the
    ids, and leaves it off when they are out of range: the checks that pass it bad ids fail, and
    each gradient check still gets the verdict it gets in a job of its own (it passes)."""
    path = variant(tmp_path, "leaky_forward.ipynb", LEAKY_FORWARD)
    together = statuses(Grader(fast_grader.rubric, fast_grader.sandbox, reference=fast_grader.reference,
                               parallel=1).grade(path))
    assert together["grad_accumulate"] == together["grad_sparse"] == "passed"
    for spec in fast_grader.rubric.checks:
        single = fast_grader.rubric.model_copy(update={"checks": (spec,)})
        alone = statuses(Grader(single, fast_grader.sandbox, reference=fast_grader.reference).grade(path))
        assert alone == {spec.id: together[spec.id]}


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


class _CutAfterVisiblePhase:
    """A sandbox whose run was cut once the hidden checks' inputs were inside (a stopped or killed
    supervisor): no complete stream, a deadline, and only the visible phase's frozen files."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def info(self) -> Any:
        return self.inner.info()

    def run(self, job: Any, chunks: Any, workdir: Path, hide: Any = ()) -> Any:
        from grader.sandbox import RunResult

        done = self.inner.run(job, chunks, workdir, hide)
        visible = {c.id for c in job.checks if c.visible} | {"import"}
        frozen = {k: v for k, v in done.outputs.items() if k.split("/")[0].split(".")[0] in visible}
        return RunResult({}, "", "the whole run took longer than 8 s", done.elapsed_s, frozen=frozen)


def test_what_the_hidden_phase_does_never_reaches_visible_feedback(tmp_path: Path) -> None:
    """A run cut after the visible phase (the hidden phase hung, or killed the supervisor) judges
    the visible checks exactly as a run that ended normally; only hidden checks lose."""
    from .fakes import InProcessSandbox

    path = SUBMISSIONS / "correct_tinytorch.ipynb"
    with Grader(EMBEDDINGS_RUBRIC, backend=InProcessSandbox(), seed=3) as normal, \
            Grader(EMBEDDINGS_RUBRIC, backend=_CutAfterVisiblePhase(InProcessSandbox()), seed=3) as cut:
        want, got = normal.grade(path), cut.grade(path)
    hidden = {c.id for c in cut.rubric.checks if not c.public}
    assert hidden and {c.id: c.status for c in got.checks if c.id in hidden} == dict.fromkeys(hidden, "timeout")
    shown = [c.model_dump(exclude={"duration_ms"}) for c in want.checks if c.id not in hidden]
    assert [c.model_dump(exclude={"duration_ms"}) for c in got.checks if c.id not in hidden] == shown


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


# ---- notebooks as students write them: run top to bottom, the last definition wins -------------

CELLS = code_cells(SUBMISSIONS / "correct_tinytorch.ipynb")
EMBEDDING_CELL = next(i for i, c in enumerate(CELLS) if "class Embedding:" in c)
LOOKUP = "rows = self.weight.data[ids.astype(int)]"
BUGGY_EMBEDDING = CELLS[EMBEDDING_CELL].replace(LOOKUP, "rows = self.weight.data[ids.astype(int) * 0]")


def with_cells(tmp_path: Path, name: str, cells: list[str]) -> Path:
    return write_notebook(tmp_path / name, cells)


def test_a_bug_fixed_in_a_later_cell_is_graded_as_fixed_with_a_note(grader_local: Grader, tmp_path: Path) -> None:
    cells = [*CELLS[:EMBEDDING_CELL], BUGGY_EMBEDDING, *CELLS[EMBEDDING_CELL:]]
    report = grader_local.grade(with_cells(tmp_path, "fixed.ipynb", cells))
    assert report.score == 100
    note = (f"Embedding is defined more than once (cells {EMBEDDING_CELL + 1}, {EMBEDDING_CELL + 2}); as when the "
            f"notebook runs from top to bottom, the last definition (cell {EMBEDDING_CELL + 2}) is the one graded")
    assert report.extraction.notes == (note,)
    out = io.StringIO()
    render(report, Console(file=out, width=400))
    assert f"note: {note}" in out.getvalue()  # the student sees it


def test_a_bug_introduced_in_a_later_cell_is_what_gets_graded(grader_local: Grader, tmp_path: Path) -> None:
    cells = [*CELLS[:EMBEDDING_CELL + 1], BUGGY_EMBEDDING, *CELLS[EMBEDDING_CELL + 1:]]
    got = statuses(grader_local.grade(with_cells(tmp_path, "broken_later.ipynb", cells)))
    assert got["emb_lookup"] == "failed" and got["sin_values"] == "passed"


def test_a_definition_that_failed_but_was_replaced_does_not_count(grader_local: Grader, tmp_path: Path) -> None:
    failing = "class Embedding:\n    size = undefined_name\n"  # NameError while the class is created
    cells = [*CELLS[:EMBEDDING_CELL], failing, *CELLS[EMBEDDING_CELL:]]
    report = grader_local.grade(with_cells(tmp_path, "superseded.ipynb", cells))
    assert report.score == 100
    assert any("undefined_name" in e for e in report.extraction.import_errors)  # still reported
    last_fails = grader_local.grade(with_cells(tmp_path, "last_fails.ipynb", [*CELLS, failing]))
    assert statuses(last_fails)["emb_lookup"] == "error"
    assert "defining Embedding failed" in last_fails.checks[0].message


def test_a_definition_that_failed_on_a_failed_import_names_the_import(grader_local: Grader, tmp_path: Path) -> None:
    """A class based on a course name the grading runtime lacks: the feedback points at the import."""
    based = CELLS[EMBEDDING_CELL].replace("class Embedding:", "class Embedding(Module):", 1)
    cells = [*CELLS[:EMBEDDING_CELL], "from tinytorch.core.layers import Layer, Module\n", based,
             *CELLS[EMBEDDING_CELL + 1:]]
    report = grader_local.grade(with_cells(tmp_path, "based.ipynb", cells))
    assert statuses(report)["emb_lookup"] == "error" and statuses(report)["pe_broadcast"] == "passed"
    message = next(c.message for c in report.checks if c.id == "emb_lookup")
    # cells as the student finds them (this notebook was never run: by their first line)
    imports = "the cell starting `from tinytorch.core.layers import Layer,`"  # its first 40 characters
    based_cell = "the cell starting `class Embedding(Module):`"
    assert (f"defining Embedding failed in {based_cell}, because Module is not defined: its own "
            f"statement ({imports}, line 1) failed first, with ImportError") in message
    assert (f"{imports}, line 1: ImportError: cannot import name 'Module' from 'tinytorch.core.layers' "
            f"({imports}, line 1, in <module>)") in report.extraction.import_errors  # no bundle path


def test_statements_that_complete_a_class_are_graded_with_it(grader_local: Grader, tmp_path: Path) -> None:
    embedding = CELLS[EMBEDDING_CELL]
    call = "    def __call__(self, indices: Tensor) -> Tensor:\n        return self.forward(indices)\n"
    assert call in embedding
    start = embedding.index("    def forward(")
    forward = textwrap.dedent(embedding[start:embedding.index(call)])
    stripped = embedding.replace(call, "").replace(embedding[start:embedding.index(call)], "")
    later = (f"{forward}\n"
             "def _call(self, indices):\n    return self.forward(indices)\n\n"
             "Embedding.forward = forward\nsetattr(Embedding, '__call__', _call)\n")
    cells = [*CELLS[:EMBEDDING_CELL], stripped, later, *CELLS[EMBEDDING_CELL + 1:]]
    report = grader_local.grade(with_cells(tmp_path, "completed.ipynb", cells))
    assert report.score == 100, [c.message for c in report.checks if c.status != "passed"]


def test_a_helper_redefined_later_is_the_one_methods_call(grader_local: Grader, tmp_path: Path) -> None:
    uses_helper = CELLS[EMBEDDING_CELL].replace(LOOKUP, "rows = _gather(self.weight.data, ids)")
    cells = [*CELLS[:EMBEDDING_CELL], "def _gather(table, ids):\n    return table[ids.astype(int) * 0]\n",
             uses_helper, "def _gather(table, ids):\n    return table[ids.astype(int)]\n", *CELLS[EMBEDDING_CELL + 1:]]
    assert grader_local.grade(with_cells(tmp_path, "helper.ipynb", cells)).score == 100
    cells[EMBEDDING_CELL], cells[EMBEDDING_CELL + 2] = cells[EMBEDDING_CELL + 2], cells[EMBEDDING_CELL]
    assert statuses(grader_local.grade(with_cells(tmp_path, "helper2.ipynb", cells)))["emb_lookup"] == "failed"


def test_hostile_cells_cost_only_themselves(grader_local: Grader, tmp_path: Path) -> None:
    hostile = [
        "def f(a, a):\n    pass\n",                      # symtable's SyntaxError
        "x = " + "-" * 100_000 + "1\n",                  # MemoryError in the parser
        "y = " + "+".join(["1"] * 100_000) + "\n",       # RecursionError building the AST
        "!echo \ud800 \x1b[2J\n",                         # a lone surrogate and a terminal escape
        "z = 1\x00\n",                                    # a NUL character (valid JSON: \u0000)
    ]
    report = grader_local.grade(with_cells(tmp_path, "hostile.ipynb", [*CELLS, *hostile]))
    assert report.score == 100
    first = len(CELLS) + 1
    assert [e.cell for e in report.extraction.syntax_errors] == [first, first + 1, first + 2, first + 4]
    json.loads(report.model_dump_json())  # every string in it can be stored


def test_one_file_that_breaks_the_grader_does_not_stop_the_others(
        grader_local: Grader, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.intake import read_submission as real

    def read(path: Path, *args: Any, **kwargs: Any) -> Any:
        if Path(path).name == "evil.ipynb":
            raise IndexError("tuple index out of range")  # stands for any bug a crafted file could hit
        return real(path, *args, **kwargs)

    monkeypatch.setattr("grader.pipeline.read_submission", read)
    evil = with_cells(tmp_path, "evil.ipynb", ["x = 1"])
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{")
    paths = [SUBMISSIONS / "correct_tinytorch.ipynb", evil, broken, SUBMISSIONS / "bug_sin_exponent.ipynb"]
    outcomes = [outcome for _, outcome in grader_local.grade_many(paths)]
    assert isinstance(outcomes[0], GradeReport) and isinstance(outcomes[3], GradeReport)
    assert str(outcomes[1]) == "evil.ipynb: internal grader error, please report it: IndexError: tuple index out of range"
    assert str(outcomes[2]).startswith("broken.ipynb: not valid JSON")
