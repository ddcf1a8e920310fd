"""Extract stage: what is kept, what is dropped, and how broken cells are reported."""

from __future__ import annotations

import pytest

from grader.extract import extract
from grader.models import CodeCell, Submission

TARGETS = ("Embedding", "create_sinusoidal_embeddings")


def submission(*cells: str) -> Submission:
    return Submission(file_name="s.ipynb", sha256="0" * 64, format="ipynb",
                      cells=tuple(CodeCell(index=i, source=s) for i, s in enumerate(cells, start=1)))


def kinds(module) -> set[tuple[int, str]]:  # type: ignore[no-untyped-def]
    return {(d.cell, d.kind) for d in module.dropped}


def test_keeps_targets_and_what_they_need_transitively() -> None:
    m = extract(submission(
        "import numpy as np\nimport matplotlib.pyplot as plt",
        "BASE = 10000.0\nunused = 5",
        "def helper(x):\n    return x / BASE\n",
        "def create_sinusoidal_embeddings(n, d):\n    return helper(np.arange(n))\n",
    ), TARGETS)
    assert m.kept == ("np", "BASE", "helper", "create_sinusoidal_embeddings")
    assert {d.detail for d in m.dropped if d.kind == "unused"} == {"import matplotlib.pyplot as plt", "unused = 5"}


def test_local_names_do_not_drag_in_globals_of_the_same_name() -> None:
    m = extract(submission(
        "x = expensive_demo()",
        "def create_sinusoidal_embeddings(n, d):\n    x = n * d\n    return x\n",
    ), TARGETS)
    assert "x" not in m.kept


def test_drops_magics_shell_escapes_calls_loops_prints_and_main_blocks() -> None:
    m = extract(submission(
        "%matplotlib inline\n!pip install evil\nfiles = !ls\nEmbedding?",
        "print('hi')\nfor i in range(3):\n    pass\nrun_analysis()",
        "def create_sinusoidal_embeddings(n, d):\n    return n\n\nif __name__ == '__main__':\n    test_unit()\n",
        "%%bash\nrm -rf /tmp/x",
    ), TARGETS)
    assert {(1, "magic"), (1, "shell"), (2, "print"), (2, "loop"), (2, "call"), (3, "main_block"), (4, "magic")} <= kinds(m)
    assert all("pip" not in c.source and "rm -rf" not in c.source for c in m.chunks)


def test_cell_magics_with_python_bodies_keep_the_body() -> None:
    m = extract(submission("%%time\ndef create_sinusoidal_embeddings(n, d):\n    return n\n"), TARGETS)
    assert m.kept == ("create_sinusoidal_embeddings",)


def test_a_syntax_error_costs_only_its_cell() -> None:
    m = extract(submission(
        "class Embedding:\n    pass\n",
        "def create_sinusoidal_embeddings(n, d)\n    return n\n",
    ), TARGETS)
    assert [(e.cell, e.line) for e in m.syntax_errors] == [(2, 1)]
    assert m.target_cells == {"Embedding": (1,), "create_sinusoidal_embeddings": ()}


def test_a_name_defined_twice_keeps_both_in_notebook_order_with_a_note() -> None:
    first, fixed = "class Embedding:\n    x = 1\n", "class Embedding:\n    x = 2\n"
    m = extract(submission(first, "def create_sinusoidal_embeddings(n, d):\n    return n\n", fixed), TARGETS)
    assert [c.cell for c in m.chunks if "Embedding" in c.defines] == [1, 3]  # run in order: the last one wins
    assert m.notes == ("Embedding is defined more than once (cells 1, 3); as when the notebook runs from top to "
                       "bottom, the last definition (cell 3) is the one graded",)


def test_identical_copies_are_not_noted() -> None:
    same = "class Embedding:\n    pass\n"
    assert extract(submission(same, same), TARGETS).notes == ()


def test_statements_that_complete_a_class_stay_with_it() -> None:
    m = extract(submission(
        "class Embedding:\n    def forward(self, x):\n        return x\n",
        "def _call(self, x):\n    return self.forward(x)\n",
        "def _params(self):\n    return []\n",
        "setattr(Embedding, '__call__', _call)\nEmbedding.parameters = _params\nsetattr(other, 'x', 1)",
    ), TARGETS)
    kept = [c.source for c in m.chunks]
    assert "setattr(Embedding, '__call__', _call)" in kept and "Embedding.parameters = _params" in kept
    assert {"_call", "_params"} <= set(m.kept)
    assert [(d.cell, d.detail) for d in m.dropped if d.kind == "unused"] == [(4, "setattr(other, 'x', 1)")]
    setter = next(c for c in m.chunks if c.source.startswith("setattr"))
    assert setter.modifies == ("Embedding",)  # it changes the class, it does not define a new one


def test_a_helper_redefined_later_is_kept_in_order() -> None:
    m = extract(submission(
        "def helper(n):\n    return 1\n",
        "def create_sinusoidal_embeddings(n, d):\n    return helper(n)\n",
        "def helper(n):\n    return 2\n",
    ), TARGETS)
    assert [(c.cell, c.defines) for c in m.chunks] == [
        (1, ("helper",)), (2, ("create_sinusoidal_embeddings",)), (3, ("helper",))]
    assert m.notes == ()  # only the graded targets get a note


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        pytest.param("def f(a, a):\n    pass\n", "duplicate argument 'a'", id="symtable-duplicate-argument"),
        pytest.param("x = " + "-" * 100_000 + "1\n", "nested too deeply", id="deep-unary-memoryerror"),
        pytest.param("x = " + "+".join(["1"] * 100_000) + "\n", "nested too deeply", id="long-chain-recursionerror"),
        pytest.param("x = " + "[" * 250 + "]" * 250 + "\n", "too many nested parentheses", id="deep-brackets"),
        pytest.param("return 5\n", "'return' outside function", id="compile-only-error"),
        pytest.param("x = 1\x00\n", "null", id="nul-character"),
    ],
)
def test_a_cell_python_refuses_costs_only_itself(cell: str, message: str) -> None:
    m = extract(submission("class Embedding:\n    pass\n", cell, "def create_sinusoidal_embeddings(n, d):\n"
                           "    return n\n"), TARGETS)
    assert m.kept == ("Embedding", "create_sinusoidal_embeddings")
    assert [e.cell for e in m.syntax_errors] == [2]
    assert message in m.syntax_errors[0].message or message in m.syntax_errors[0].message.lower()


def test_top_level_await_is_a_call_not_an_error() -> None:
    m = extract(submission("await something()\n"), TARGETS)  # IPython runs it; the grader drops the call
    assert m.syntax_errors == () and [d.kind for d in m.dropped] == ["call"]


def test_course_imports_are_kept_even_when_unused() -> None:
    m = extract(submission("import tinytorch.core.autograd\nfrom tinytorch.core.tensor import Tensor"), TARGETS)
    assert m.kept == ("tinytorch", "Tensor")


def test_a_course_import_of_several_names_is_kept_one_name_at_a_time() -> None:
    """A name the grading runtime lacks (module 03's Linear, say) then costs only what uses it."""
    m = extract(submission("import numpy as np\nfrom tinytorch.core.layers import (Layer,\n    Linear as Dense)\n"
                           "from typing import List, Optional\n"
                           "class Embedding(Layer):\n    rows: List[int] = []\n"), TARGETS)
    imports = [(c.cell, c.line, c.source) for c in m.chunks if "tinytorch" in c.source]
    assert imports == [(1, 2, "from tinytorch.core.layers import Layer"),
                       (1, 2, "from tinytorch.core.layers import Linear as Dense")]
    assert [c.defines for c in m.chunks if "typing" in c.source] == [("List", "Optional")]  # not a course import


def test_chunks_keep_their_cell_line_numbers() -> None:
    m = extract(submission("# comment\n\n@decorator\ndef create_sinusoidal_embeddings(n, d):\n    return n\n",
                           "def decorator(f):\n    return f\n"), TARGETS)
    chunk = next(c for c in m.chunks if "create_sinusoidal_embeddings" in c.defines)
    assert (chunk.cell, chunk.line) == (1, 3) and chunk.source.startswith("@decorator")
    assert "decorator" in m.kept


def test_warnings_of_the_students_code_are_not_errors() -> None:
    # filterwarnings = error holds in this test suite, as -W error could for a course
    m = extract(submission('import re\nPAT = re.compile("\\d+")\n'
                           "def create_sinusoidal_embeddings(n, d):\n    return PAT if n is 1 else None\n"), TARGETS)
    assert m.syntax_errors == () and m.kept == ("re", "PAT", "create_sinusoidal_embeddings")


def run(sources: list[str]) -> dict[str, object]:
    namespace: dict[str, object] = {}
    for source in sources:
        exec(compile(source, "<test>", "exec"), namespace)  # our own test code, not a student's
    return namespace


def test_kept_statements_run_in_order_give_what_the_notebook_gives() -> None:
    """Redefinitions between uses: each use sees the definition in force at its point of the notebook."""
    cells = [
        "SCALE = 1\n",
        "def helper():\n    return 'first'\n",
        "class Embedding:\n    scale = SCALE\n    def forward(self):\n        return helper()\n",
        "SCALE = 2\n",
        "def helper():\n    return 'second'\n",
        "def create_sinusoidal_embeddings(n, d):\n    return SCALE\n",
        "Base = Embedding\nclass Embedding(Base):\n    pass\n",
    ]
    m = extract(submission(*cells), TARGETS)
    notebook, kept = run(cells), run([c.source for c in m.chunks])
    for ns in (notebook, kept):
        emb = ns["Embedding"]
        assert (emb.scale, emb().forward(), ns["create_sinusoidal_embeddings"](1, 1)) == (1, "second", 2)  # type: ignore[attr-defined, operator]
        assert emb.__mro__[1] is ns["Base"]  # type: ignore[attr-defined]
