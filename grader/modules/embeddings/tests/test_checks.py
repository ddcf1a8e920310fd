"""The module-11 checks against realistic bugs: every bug notebook in bugs/ fails exactly the
checks its catalog entry names, with a likely cause that names the bug; every correct notebook
passes them all, and the newer-API checks apply exactly to the newer generation; the rubric keeps
its output contract."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.unittesting import Session, code_cells, load_rubric, not_passed, write_notebook

from .bugs.catalog import BUGS, STYLES, SUBMISSIONS, Bug, Style, build

CORRECT = sorted(p for p in SUBMISSIONS.iterdir() if p.name.startswith("correct"))
NEWER_API = ("emb_bad_ids", "pe_start_pos", "layer_start_pos")
RUBRIC = Path(__file__).resolve().parents[1] / "rubric.toml"

ORIGINAL_IDS = {
    "emb_shape", "emb_lookup", "emb_params", "emb_index_error", "emb_xavier", "grad_accumulate", "grad_sparse",
    "grad_batch", "pe_broadcast", "pe_too_long", "pe_grad", "sin_pos0", "sin_values", "layer_modes",
    "layer_sin_values", "layer_scale",
}
CONTRACT_IDS = ORIGINAL_IDS | {
    # added with issue 9 (start_pos, real-bug checks, visible twins); the ids above never change
    "emb_attrs", "emb_bad_ids", "emb_large_ids", "grad_batch_visible", "grad_keeps_weight", "pe_bad_shape",
    "pe_init", "pe_start_pos", "layer_defaults", "layer_sin_values_visible", "layer_sin_too_long", "layer_start_pos",
    # added with the mutants' survivors (issue 9, section 3)
    "layer_attrs", "sin_fixed",
}


@pytest.fixture(scope="module")
def grader_local(grading_session: Session) -> Iterator[Any]:
    """Module 11's grader on the session's local sandbox."""
    yield grading_session.grader(module="embeddings")


def test_the_rubric_has_the_contract_checks_and_100_points() -> None:
    rubric = load_rubric("embeddings")
    assert json.dumps(sorted(c.id for c in rubric.checks)) == json.dumps(sorted(CONTRACT_IDS))
    assert rubric.max_score == 100
    assert {c.visibility for c in rubric.checks} >= {"visible", "hidden"}


@pytest.mark.parametrize("bug", BUGS, ids=[b.name for b in BUGS])
def test_bug_notebook_matches_its_catalog_entry(bug: Bug) -> None:
    """The committed notebook is what the catalog builds (regenerate: python -m grader.modules.embeddings.tests.bugs.catalog)."""
    assert bug.path.read_text(encoding="utf-8") == build(bug)


@pytest.mark.parametrize("bug", BUGS, ids=[b.name for b in BUGS])
def test_each_bug_fails_its_checks_with_a_cause_that_names_it(grader_local: Any, bug: Bug) -> None:
    report = grader_local.grade(bug.path)
    assert not_passed(report) == set(bug.fails)
    checks = {c.id: c for c in report.checks}
    assert bug.cause in checks[bug.fails[0]].message
    for check_id in bug.fails:  # every failure a realistic bug causes carries a tested likely cause
        check = checks[check_id]
        assert "Likely cause: " in check.detail, (check_id, check.detail)
        if "(see " in check.detail or "the defaults are right" in check.detail:  # the hint would mislead
            assert "Hint: " not in check.detail


NEWER_GENERATION = {"correct_newer_generation", "correct_student_backward"}


@pytest.mark.parametrize("path", CORRECT, ids=[p.stem for p in CORRECT])
def test_correct_notebooks_pass_every_check_and_newer_api_checks_apply_only_to_the_newer_one(
        grader_local: Any, path: Path) -> None:
    report = grader_local.grade(path)
    assert not_passed(report) == set() and report.score == report.max_score == 100
    newer = path.stem in NEWER_GENERATION
    for check in report.checks:
        skipped = check.message.startswith("Not applicable: ")
        assert skipped == (check.id in NEWER_API and not newer), check.id


def test_an_older_notebook_with_start_pos_on_one_method_is_graded_on_what_both_generations_ask(
        grader_local: Any, tmp_path: Path) -> None:
    """start_pos on PositionalEncoding.forward alone, beside the older module-05 backward node, is
    mixed evidence: the newer-API checks do not apply and what only one generation asks is a note."""
    cells = code_cells(SUBMISSIONS / "correct_tinytorch.ipynb")
    old, new = "def forward(self, x: Tensor) -> Tensor:", "def forward(self, x: Tensor, start_pos: int = 0) -> Tensor:"
    cells = [c.replace(old, new) for c in cells]
    report = grader_local.grade(write_notebook(tmp_path / "partly_newer.ipynb", cells))
    checks = {c.id: c for c in report.checks}
    assert not_passed(report) == set() and report.score == 100
    for check_id in NEWER_API:
        assert checks[check_id].message.startswith("Not applicable: written partly for each TinyTorch generation"), \
            checks[check_id].message


def test_a_newer_notebook_whose_layer_drops_start_pos_is_still_held_to_the_newer_api(
        grader_local: Any, tmp_path: Path) -> None:
    """Agreeing evidence (start_pos on PositionalEncoding, the student's own EmbeddingFunction with
    backward) keeps the newer checks: a layer that does not take start_pos fails them."""
    cells = code_cells(SUBMISSIONS / "correct_newer_generation.ipynb")
    fixed = ("tokens: Tensor, start_pos: int = 0) -> Tensor:", "tokens: Tensor) -> Tensor:\n        start_pos = 0")
    cells = [c.replace(*fixed) if "class EmbeddingLayer" in c else c for c in cells]
    report = grader_local.grade(write_notebook(tmp_path / "newer_layer_no_start_pos.ipynb", cells))
    checks = {c.id: c for c in report.checks}
    assert "does not accept start_pos (TypeError)" in checks["layer_start_pos"].message, checks["layer_start_pos"].message


def _edit(cells: list[str], old: str, new: str) -> list[str]:
    """Replace `old` by `new` in the one cell that holds it."""
    assert sum(old in c for c in cells) == 1, old
    return [c.replace(old, new) for c in cells]


def test_the_newest_upstream_layout_passes_every_check(grader_local: Any, tmp_path: Path) -> None:
    """The newest official solution (cs249r_book, module 11) moved three things; a notebook written
    that way must still get full marks: the seeded generator sits alone in an unexported cell, the
    layer refuses sizes that are not positive integers, and forward checks start_pos before looking
    at the mode (so the None mode refuses a negative one too)."""
    cells = _edit(code_cells(SUBMISSIONS / "correct_student_backward.ipynb"),
                  "rng = np.random.default_rng(11)\n", "")
    cells.insert(1, "#| exporti\n\n# one generator for every table this module draws\nrng = np.random.default_rng(11)\n")
    cells = _edit(cells, "        builders = {\n", (
        "        sizes = {'vocab_size': vocab_size, 'embed_dim': embed_dim, 'max_seq_len': max_seq_len}\n"
        "        for name, size in sizes.items():\n"
        "            if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:\n"
        "                raise ValueError(f\"{name} must be a positive int, got {size!r}\")\n"
        "        builders = {\n"))
    check = ("        if not isinstance(start_pos, (int, np.integer)) or start_pos < 0:\n"
             "            raise ValueError(f\"start_pos must be a non-negative int, got {start_pos!r}\")\n")
    sinusoidal = "    elif self.pos_encoding_type == 'sinusoidal':\n"
    cells = _edit(cells, sinusoidal + check, sinusoidal)
    first = "    flat = len(tokens.shape) == 1\n"
    cells = _edit(cells, first, check.replace("        ", "    ") + first)  # one indent level less
    report = grader_local.grade(write_notebook(tmp_path / "newest_layout.ipynb", cells))
    assert not_passed(report) == set() and report.score == report.max_score == 100


def test_the_submissions_readme_lists_every_bug_notebook_with_its_checks() -> None:
    readme = (SUBMISSIONS / "README.md").read_text(encoding="utf-8")
    for bug in BUGS:
        assert f"| `{bug.name}.ipynb` |" in readme and ", ".join(f"`{c}`" for c in bug.fails) in readme, bug.name


def test_every_check_added_for_real_bugs_is_failed_by_a_bug_notebook() -> None:
    added = CONTRACT_IDS - ORIGINAL_IDS - {"emb_bad_ids"}  # a 0-point note now: the module never asks for it
    reworked = {"emb_xavier", "emb_index_error"}  # now also catch a checkerboard table and np.all range checks
    failed = {check for bug in BUGS for check in bug.fails}
    assert added | reworked <= failed, sorted((added | reworked) - failed)


@pytest.mark.parametrize("style", STYLES, ids=[s.name for s in STYLES])
def test_style_notebook_matches_its_catalog_entry(style: Style) -> None:
    assert style.path.read_text(encoding="utf-8") == build(style)


@pytest.mark.parametrize("style", STYLES, ids=[s.name for s in STYLES])
def test_correct_work_in_any_style_gets_full_marks(grader_local: Any, style: Style) -> None:
    """A correct implementation loses no point for what only the official solution does: what it
    skips of that is a 0-point note (docs/RUBRIC.md)."""
    report = grader_local.grade(style.path)
    assert not_passed(report) == set(), [(c.id, c.detail) for c in report.checks if c.status != "passed"]
    assert report.score == report.max_score == 100
    if style.note:
        note = next(c.message for c in report.checks if c.id == style.note)
        assert "Beyond what this assignment asks (not scored): the reference also" in note, note


def test_a_course_can_opt_in_to_scoring_what_only_the_official_solution_does(grading_session: Session,
                                                                                tmp_path: Path) -> None:
    """score_unasked = true: clipping out-of-range ids (never asked of the older generation) fails
    emb_index_error with its likely cause, and a check given points scores what it never asked."""
    text = RUBRIC.read_text(encoding="utf-8")
    rubric = tmp_path / "strict.toml"
    rubric.write_text(text.replace("score_unasked = false", "score_unasked = true", 1), encoding="utf-8")
    clipped = next(s for s in STYLES if s.name == "style_older_ids_clipped")
    checks = {c.id: c for c in grading_session.grade(clipped.path, rubric).checks}
    assert checks["emb_index_error"].status == "failed"
    assert "Likely cause: out-of-range ids are clamped into range" in checks["emb_index_error"].message
    assert "Beyond what this assignment asks" not in checks["emb_index_error"].message


def test_the_measure_tells_a_right_cause_from_a_wrong_one_and_from_none() -> None:
    """python -m grader.modules.embeddings.tests.bugs.measure counts a bug right only when its first failing check names it."""
    from types import SimpleNamespace

    from .bugs.measure import bug_verdict

    def check(status: str, message: str) -> SimpleNamespace:
        return SimpleNamespace(status=status, message=message, detail=message)

    fails = ("pe_init", "pe_grad")
    right = {"pe_init": check("failed", "Likely cause: every value is 0"), "pe_grad": check("passed", "")}
    assert bug_verdict(right, fails, "every value is 0") == "right"
    assert bug_verdict(right, fails, "drawn from [0, limit]") == "wrong"
    assert bug_verdict({"pe_init": check("failed", "values differ")}, fails, "every value is 0") == "none"
    assert bug_verdict({"pe_init": check("passed", "")}, fails, "every value is 0") == "missed"
