"""Mutation testing of the checks (``grader selftest --mutants``): the generator, the reviewed file, the gate.

The full run (about 1,200 mutants, a few minutes) is left to the command; here a fixed sample
is graded, and the generator and the gate logic are tested without grading.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.errors import SelftestError
from grader.selftest.cli import EQUIVALENTS, default_sources
from grader.selftest.mutants import (
    DEFAULT_GRADING_SEED,
    Outcome,
    grade_mutants,
    load_equivalents,
    summarize,
)
from grader.selftest.mutate import Mutant, Source, generate, load_source, sample
from grader.selftest.operators import OPERATORS

from .conftest import ROOT, write_notebook

TARGETS = ("Embedding", "PositionalEncoding", "create_sinusoidal_embeddings", "EmbeddingLayer")

# Graded in CI, all killed by today's checks unless marked equivalent: at least two per operator
# across the reference and both generations, then one or more per kind of gap the full run once
# found (each comment names the check that now catches it), then reviewed equivalents, which a
# correct grader can never kill.
CI_SAMPLE = (
    "correct_newer_generation/Embedding.__init__@8:26/constant/double",
    "correct_tinytorch/create_sinusoidal_embeddings@16:32/constant/half",
    "correct_tinytorch/Embedding.forward@2:55/compare/GtE-Gt",
    "embeddings/_check_start@4:29/compare/Gt-GtE",
    "correct_newer_generation/Embedding.forward@13:25/boolean/or-and",
    "correct_tinytorch/Embedding.forward@2:25/boolean/or-and",
    "correct_newer_generation/EmbeddingLayer.forward@15:48/slice/upper-minus1",
    "correct_tinytorch/create_sinusoidal_embeddings@21:40/slice/drop-upper",
    "correct_newer_generation/Embedding.forward@18:60/dtype/drop",
    "correct_alt_style/_as_index_array@3:11/dtype/drop",
    "correct_newer_generation/EmbeddingFunction.backward@20:8/delete/stmt",
    "correct_tinytorch/EmbeddingLayer.forward@8:12/delete/stmt",
    "correct_alt_style/Embedding.__init__@2:45/swap_args/0-1",
    "correct_newer_generation/EmbeddingFunction.backward@20:18/swap_args/0-1",
    "correct_newer_generation/PositionalEncoding.__init__@9:42/drop_kwarg/requires_grad",
    "correct_alt_style/Embedding.forward@3:51/drop_kwarg/axis",
    "embeddings/Embedding.forward@6:44/compare/GtE-Gt",
    # the gaps, by kind
    "embeddings/Embedding.forward@11:52/dtype/int16",  # ids wrap at 32768: emb_large_ids
    "embeddings/Embedding.forward@6:11/boolean/any-all",  # one bad id among good ones: emb_index_error
    "embeddings/Embedding.forward@4:43/boolean/any-all",  # a fractional id among whole ones: emb_bad_ids
    "embeddings/Embedding.forward@4:15/boolean/all-any",  # no ids at all rejected: emb_shape
    "embeddings/PositionalEncoding.__init__@4:26/constant/half",  # position table bound: pe_init
    "correct_grad_fn_handoff/PositionalEncoding.forward@6:8/delete/stmt",  # no embed_dim check: pe_bad_shape
    "correct_newer_generation/PositionalEncoding.forward@9:8/delete/stmt",  # numpy's error only: pe_bad_shape
    "correct_newer_generation/EmbeddingLayer.forward@13:12/delete/stmt",  # sinusoid length: layer_sin_too_long
    "correct_alt_style/EmbeddingLayer.__init__@0:75/constant/minus1",  # max_seq_len=511: layer_defaults
    "correct_newer_generation/PositionalEncoding.forward@19:42/slice/drop-lower",  # start_pos ignored: pe_start_pos
    "embeddings/_check_start@2:98/constant/minus1",  # start_pos=-1 accepted: pe_start_pos
    "correct_newer_generation/PositionalEncoding.forward@11:11/boolean/or-and",  # start_pos=-1 accepted
    "correct_student_backward/PositionalEncoding.forward@8:12/delete/stmt",  # start_pos unchecked
    "correct_grad_fn_handoff/EmbeddingLayer.__init__@2:8/delete/stmt",  # no vocab_size: layer_attrs
    "correct_tinytorch/EmbeddingLayer.__init__@18:12/delete/stmt",  # no pos_encoding in None mode: layer_attrs
    "correct_alt_style/create_sinusoidal_embeddings@18:36/constant/flip",  # trainable sinusoids: sin_fixed
    "correct_student_backward/EmbeddingFunction.backward@10:56/dtype/float16",  # float16 gradient: grad_accumulate
    "correct_alt_style/TableLookupBackward.apply@4:49/dtype/float16",  # float16 upstream: grad_accumulate
    # reviewed equivalents
    "correct_newer_generation/EmbeddingFunction.backward@18:71/constant/plus1",  # reshape(n, -2)
    "embeddings/create_sinusoidal_embeddings@8:44/drop_kwarg/requires_grad",  # the default
    "correct_tinytorch/EmbeddingLayer.forward@14:12/delete/stmt",  # as the older course's own solution
)

SNIPPET = '''import numpy as np


class Table:
    """Docstrings are never mutated."""

    def forward(self, ids, start=0):
        if np.any(ids < 0) or not ids.size:
            raise ValueError(f"bad ids {ids!r} after {start + 1}")
        print("debug", 3)
        rows = self.w[ids.astype(int)][start:start + 2]
        return np.zeros((2, 3), dtype=np.float64) + np.take(rows, ids, axis=0)

    def __repr__(self):
        return "Table(1)"


def test_table():
    assert Table().forward(np.array([1])) is not None
'''


def snippet_source(tmp_path: Path, text: str = SNIPPET) -> Source:
    path = tmp_path / "snippet.py"
    path.write_text(text, encoding="utf-8")
    return load_source(path)


@pytest.fixture(scope="module")
def real_sources() -> list[Source]:
    return default_sources("embeddings")


@pytest.fixture(scope="module")
def real_mutants(real_sources: list[Source]) -> list[Mutant]:
    return [m for s in real_sources for m in generate(s, TARGETS)]


# ---- the generator --------------------------------------------------------------------------

@pytest.mark.parametrize(("mutant_id", "after"), [
    pytest.param("snippet/Table.forward@0:33/constant/plus1", "def forward(self, ids, start=1):", id="constant"),
    pytest.param("snippet/Table.forward@1:24/compare/Lt-LtE", "if np.any(ids <= 0) or not ids.size:", id="compare"),
    pytest.param("snippet/Table.forward@1:11/boolean/or-and", "if np.any(ids < 0) and not ids.size:", id="and-or"),
    pytest.param("snippet/Table.forward@1:30/boolean/drop-not", "if np.any(ids < 0) or ids.size:", id="not"),
    pytest.param("snippet/Table.forward@1:11/boolean/any-all", "if np.all(ids < 0) or not ids.size:", id="any-all"),
    pytest.param("snippet/Table.forward@4:45/slice/upper-plus1",
                 "rows = self.w[ids.astype(int)][start:start + 2 + 1]", id="slice"),
    pytest.param("snippet/Table.forward@4:39/slice/drop-lower", "rows = self.w[ids.astype(int)][:start + 2]",
                 id="slice-drop"),
    pytest.param("snippet/Table.forward@4:33/dtype/int16", "rows = self.w[ids.astype(np.int16)][start:start + 2]",
                 id="dtype"),
    pytest.param("snippet/Table.forward@4:22/dtype/drop", "rows = self.w[ids][start:start + 2]", id="dtype-drop"),
    pytest.param("snippet/Table.forward@5:38/dtype/float32",
                 "return np.zeros((2, 3), dtype=np.float32) + np.take(rows, ids, axis=0)", id="dtype-float"),
    pytest.param("snippet/Table.forward@2:12/delete/stmt", "pass", id="delete"),
    pytest.param("snippet/Table.forward@5:60/swap_args/0-1",
                 "return np.zeros((2, 3), dtype=np.float64) + np.take(ids, rows, axis=0)", id="swap"),
    pytest.param("snippet/Table.forward@5:71/drop_kwarg/axis",
                 "return np.zeros((2, 3), dtype=np.float64) + np.take(rows, ids)", id="drop-kwarg"),
])
def test_each_operator_makes_its_one_change(tmp_path: Path, mutant_id: str, after: str) -> None:
    mutants = {m.id: m for m in generate(snippet_source(tmp_path), ["Table"])}
    assert mutant_id in mutants, sorted(mutants)
    assert mutants[mutant_id].after == after


def test_every_mutant_is_a_valid_different_program(tmp_path: Path, real_mutants: list[Mutant]) -> None:
    for m in [*generate(snippet_source(tmp_path), ["Table"]), *real_mutants]:
        original = dict(m.source.cells)[(m.cell or 1) - 1]
        assert ast.dump(ast.parse(m.code)) != ast.dump(ast.parse(original)), m.id
        assert m.before != m.after, m.id


def test_messages_docstrings_prints_repr_and_tests_are_never_mutated(tmp_path: Path) -> None:
    mutants = generate(snippet_source(tmp_path), ["Table"])
    kept = ('"""Docstrings are never mutated."""', 'f"bad ids {ids!r} after {start + 1}"', 'print("debug", 3)',
            'return "Table(1)"', "assert Table().forward(np.array([1])) is not None")
    for m in mutants:
        if m.operator != "delete":  # deleting a statement takes its message with it
            assert all(line in m.code for line in kept), m.id
    assert not [m.id for m in mutants if m.before.startswith("print")]
    assert {m.qualname for m in mutants} == {"Table", "Table.forward"}
    assert {m.operator for m in mutants} == set(OPERATORS)


def test_only_the_graded_definitions_and_the_backward_class_are_mutated(real_mutants: list[Mutant]) -> None:
    roots = {m.id.split("/")[1].split("@")[0].split(".")[0] for m in real_mutants}
    assert set(TARGETS) <= roots
    assert "EmbeddingFunction" in roots and "TableLookupBackward" in roots  # the students' own backward classes
    assert not any(r.startswith(("test_", "analyze")) for r in roots)


def test_ids_are_unique_and_stable_when_other_code_moves(tmp_path: Path) -> None:
    first = [m.id for m in generate(snippet_source(tmp_path), ["Table"])]
    assert len(set(first)) == len(first)
    moved = SNIPPET.replace("import numpy as np\n", "import numpy as np\nimport math\n\nLIMIT = 3\n")
    assert [m.id for m in generate(snippet_source(tmp_path, moved), ["Table"])] == first


def test_notebook_ids_survive_a_cell_inserted_above(tmp_path: Path) -> None:
    body = SNIPPET.split("\n\n\n")[1]
    plain = load_source(write_notebook(tmp_path / "nb.ipynb", ["import numpy as np", body]))
    shifted = load_source(write_notebook(tmp_path / "nb.ipynb", [("markdown", "# hi"), "import numpy as np",
                                                                   "x = 1\ny = 2", body]))
    a, b = generate(plain, ["Table"]), generate(shifted, ["Table"])
    assert [m.id for m in a] == [m.id for m in b] and a
    assert {m.cell for m in a} == {2} and {m.cell for m in b} == {4}


def test_real_sources_cover_every_operator_and_both_generations(real_sources: list[Source],
                                                                real_mutants: list[Mutant]) -> None:
    generation = {s.name: s.generation for s in real_sources}
    assert generation["correct_tinytorch"] == "older" and generation["correct_newer_generation"] == "newer"
    for gen in ("reference", "older", "newer"):
        assert {m.operator for m in real_mutants if m.source.generation == gen} == set(OPERATORS), gen
    ids = [m.id for m in real_mutants]
    assert len(ids) == len(set(ids))


def test_a_source_without_the_targets_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SelftestError, match="defines no Embedding"):
        generate(snippet_source(tmp_path), TARGETS)


def test_sample_is_seeded_and_keeps_source_order(real_mutants: list[Mutant]) -> None:
    a, b = sample(real_mutants, 25, seed=3), sample(real_mutants, 25, seed=3)
    assert [m.id for m in a] == [m.id for m in b] and len(a) == 25
    order = {m.id: i for i, m in enumerate(real_mutants)}
    assert [order[m.id] for m in a] == sorted(order[m.id] for m in a)
    assert [m.id for m in sample(real_mutants, 25, seed=4)] != [m.id for m in a]


# ---- the reviewed file and the gate ----------------------------------------------------------

def test_every_reviewed_equivalent_names_an_existing_mutant() -> None:
    """The file is shared by the installed course modules (11 and 12): every entry names a mutant of
    one of their default sources."""
    from grader import modules
    from grader.rubric import load_rubric

    every = {m.id for name in modules.installed() for s in default_sources(name)
             for m in generate(s, load_rubric(module=name).targets)}
    listed = load_equivalents(ROOT / EQUIVALENTS)
    assert listed, "the reviewed file lists nothing"
    assert sorted(set(listed) - every) == []


@pytest.mark.parametrize(("text", "message"), [
    pytest.param('schema_version = 1\n[[equivalent]]\nid = "a"\n', "reason", id="no-reason"),
    pytest.param('schema_version = 1\n[[equivalent]]\nid = "a"\nreason = "same program here"\n'
                 '[[equivalent]]\nid = "a"\nreason = "same program here"\n', "listed more than once", id="duplicate"),
    pytest.param("schema_version = [", "cannot be read as TOML", id="toml"),
])
def test_a_bad_reviewed_file_is_a_one_line_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "eq.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SelftestError, match=message):
        load_equivalents(path)


def test_the_gate_counts_equivalents_out_and_flags_stale_entries(real_mutants: list[Mutant]) -> None:
    ref = [m for m in real_mutants if m.source.name == "embeddings"][:4]
    outcomes = [Outcome(ref[0], ("emb_lookup",), ("emb_lookup",)), Outcome(ref[1], ("grad_batch",), ()),
                Outcome(ref[2], (), ()), Outcome(ref[3], (), ())]
    listed = {ref[1].id: "x", ref[2].id: "x", "embeddings/gone@1:1/delete/stmt": "x", "other/x@1:1/delete/stmt": "x"}
    summary = summarize(outcomes, listed, real_mutants)
    tally = summary.by_source["embeddings"]
    assert (tally.total, tally.killed, tally.equivalent, tally.hidden_only) == (4, 2, 1, 1)
    assert tally.rate == pytest.approx(2 / 3)
    assert [o.mutant.id for o in summary.survivors] == [ref[3].id]
    assert [o.mutant.id for o in summary.killed_but_listed] == [ref[1].id]
    assert summary.unknown_listed == ["embeddings/gone@1:1/delete/stmt"]  # "other" is not a source of this run
    assert not summary.passed
    clean = summarize(outcomes[:1] + outcomes[2:3], {ref[2].id: "x"}, real_mutants)
    assert clean.passed and clean.by_generation["reference"].rate == 1.0
    # with the default sources a vanished source's entries are stale, not another module's
    every = summarize(outcomes[:1] + outcomes[2:3], {ref[2].id: "x", "other/x@1:1/delete/stmt": "x",
                                                     "attention/y@1:1/delete/stmt": "x"}, real_mutants,
                      every_source=True, foreign=frozenset({"attention"}))
    assert every.unknown_listed == ["other/x@1:1/delete/stmt"]


# ---- grading -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def seeded_grader() -> Iterator[Any]:
    from grader import Grader

    with Grader(backend="local", seed=DEFAULT_GRADING_SEED) as g:
        yield g


def test_the_ci_sample_covers_every_operator_in_every_generation(real_mutants: list[Mutant]) -> None:
    generation = {m.id: m.source.generation for m in real_mutants}
    for gen in ("reference", "older", "newer"):
        assert {i for i in CI_SAMPLE if generation.get(i) == gen}, gen
    assert {i.split("/")[-2] for i in CI_SAMPLE} == set(OPERATORS)
    assert len(set(CI_SAMPLE)) == len(CI_SAMPLE)


def test_the_ci_sample_is_killed_unless_reviewed_equivalent(real_mutants: list[Mutant], seeded_grader: Any) -> None:
    by_id = {m.id: m for m in real_mutants}
    assert not (missing := [i for i in CI_SAMPLE if i not in by_id]), f"mutants no longer generated: {missing}"
    listed = load_equivalents(ROOT / EQUIVALENTS)
    outcomes = grade_mutants([by_id[i] for i in CI_SAMPLE], lambda: seeded_grader)
    wrong = [(o.mutant.id, o.failed) for o in outcomes if o.killed == (o.mutant.id in listed)]
    assert wrong == [], "killed means not equivalent, and the other way round"


def selftest(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader.cli", "selftest", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_command_gate_fails_on_an_unreviewed_survivor_and_passes_once_reviewed(tmp_path: Path) -> None:
    empty = tmp_path / "none.toml"
    empty.write_text("schema_version = 1\n", encoding="utf-8")
    survivor, killed = CI_SAMPLE[-2], CI_SAMPLE[3]  # both mutants of the reference
    run = selftest("--mutants", "--only", survivor, "--only", killed, "--equivalents", empty)
    assert run.returncode == 1, run.stderr
    assert "1 mutant(s) survived" in run.stdout and survivor in run.stdout and "- return Tensor(" in run.stdout
    assert "50.0 %" in run.stdout
    run = selftest("--mutants", "--only", survivor, "--only", killed)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "every non-equivalent mutant was killed" in run.stdout and "100.0 %" in run.stdout


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(("--operator", "nope"), "unknown operator nope", id="operator"),
    pytest.param(("--only", "no/such@1:1/delete/stmt"), "no mutant no/such", id="id"),
    pytest.param(("--jobs", "0"), "--jobs and --sample", id="jobs"),
])
def test_command_bad_input_exits_2_in_one_line(args: tuple[str, ...], message: str) -> None:
    run = selftest("--mutants", *args)
    assert run.returncode == 2 and message in run.stderr and "Traceback" not in run.stderr


def test_command_lists_mutants_without_grading() -> None:
    run = selftest("--mutants", "--list", "--operator", "swap_args", "--sample", "5")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 5 and all("/swap_args/" in line and " → " in line for line in lines)
