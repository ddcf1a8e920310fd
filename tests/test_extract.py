"""Extract stage: what is kept, what is dropped, and how broken cells are reported."""

from __future__ import annotations

from grader.extract import duplicate_definitions, extract
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


def test_duplicates_are_reported_unless_identical() -> None:
    same = "class Embedding:\n    pass\n"
    assert duplicate_definitions(extract(submission(same, same), TARGETS)) == {}
    m = extract(submission(same, "class Embedding:\n    x = 1\n"), TARGETS)
    assert duplicate_definitions(m) == {"Embedding": (1, 2)}


def test_course_imports_are_kept_even_when_unused() -> None:
    m = extract(submission("import tinytorch.core.autograd\nfrom tinytorch.core.tensor import Tensor"), TARGETS)
    assert m.kept == ("tinytorch", "Tensor")


def test_chunks_keep_their_cell_line_numbers() -> None:
    m = extract(submission("# comment\n\n@decorator\ndef create_sinusoidal_embeddings(n, d):\n    return n\n",
                           "def decorator(f):\n    return f\n"), TARGETS)
    chunk = next(c for c in m.chunks if "create_sinusoidal_embeddings" in c.defines)
    assert (chunk.cell, chunk.line) == (1, 3) and chunk.source.startswith("@decorator")
    assert "decorator" in m.kept
