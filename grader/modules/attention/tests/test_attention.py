"""Module 12 (Attention) end to end: every bug notebook of catalog.py fails exactly the checks its
entry names, each with a tested likely cause; every correct notebook, ours and the official older
solution, gets full marks with no --module; ``tito test --module attention`` grades module 12 in a
TinyTorch checkout. (The grader's own suite grades a class that mixes modules: tests/test_units.py.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from grader.unittesting import Session, course_checkout, load_rubric, not_passed, tito

from .catalog import BUGS, ENTRIES, FOLDER, STYLES, Bug, Style, build
from .catalog import NEWER as NEWER_BASE

CORRECT = sorted(FOLDER.glob("correct_*.ipynb"))
NEWER = {"correct_newer"} | {s.name for s in STYLES if s.base == NEWER_BASE}  # the newer course's given helpers
OLDER_NOTES = {"sdpa_mask_refusal", "mha_divisible"}  # what the older course never asks for
MORE_NOTES = {"correct_weights_then_biases": {"mha_config"}}  # the order of parameters(): newer only
MIRROR = Path(os.environ.get("TINYTORCH_GIT", "/work/.mirror/MLSysBook+TinyTorch/repo"))


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_notebook_matches_its_catalog_entry(entry: Bug | Style) -> None:
    """The committed notebook is what the catalog builds (regenerate: python -m grader.modules.attention.tests.catalog)."""
    assert entry.path.read_text(encoding="utf-8") == build(entry)


@pytest.mark.parametrize("bug", BUGS, ids=[b.name for b in BUGS])
def test_each_bug_fails_its_checks_with_a_cause_that_names_it(grading_session: Session, bug: Bug) -> None:
    report = grading_session.grade(bug.path)
    assert report.rubric_id == "tinytorch-12-attention"
    assert not_passed(report) == set(bug.fails)
    checks = {c.id: c for c in report.checks}
    assert bug.cause in checks[bug.fails[0]].message, checks[bug.fails[0]].message
    for check_id in bug.fails:  # every failure a realistic bug causes carries a tested likely cause
        detail = checks[check_id].detail
        assert "Likely cause: " in detail, (check_id, detail)
        if "(see " in detail:  # another check explains it: this check's hint would mislead
            assert "Hint: " not in detail, (check_id, detail)


@pytest.mark.parametrize("path", CORRECT, ids=[p.stem for p in CORRECT])
def test_correct_notebooks_get_full_marks_and_older_ones_notes_on_what_only_the_newer_asks(
        grading_session: Session, path: Path) -> None:
    report = grading_session.grade(path)
    assert report.rubric_id == "tinytorch-12-attention"
    assert not_passed(report) == set() and report.score == report.max_score == 100
    noted = {c.id for c in report.checks if "Beyond what this assignment asks" in c.message}
    assert noted == (set() if path.stem in NEWER else OLDER_NOTES) | MORE_NOTES.get(path.stem, set()), noted


def _official_older(tmp_path: Path, source: str, name: str) -> Path:
    if not (MIRROR / "HEAD").exists():
        pytest.skip(f"no TinyTorch mirror at {MIRROR} (set TINYTORCH_GIT)")
    jupytext = pytest.importorskip("jupytext")
    text = subprocess.run(["git", f"--git-dir={MIRROR}", "show", f"HEAD:{source}"], capture_output=True, text=True,
                          check=True).stdout
    path = tmp_path / name
    jupytext.write(jupytext.reads(text, fmt="py:percent"), str(path))
    return path


def test_the_official_older_solution_gets_full_marks_without_module(
        grading_session: Session, tmp_path: Path) -> None:
    """MLSysBook/TinyTorch 02364f8's developer source, handed in as a student would (as a notebook):
    chosen as module 12 by itself. (That snapshot's modules/12_attention/attention.ipynb is a stale
    explicit-loop export whose MultiHeadAttention mixes 0.0001 * (Q + K + V) / 3 into its output
    to keep a gradient path: it is not attention, and it fails the value and gradient checks.)"""
    report = grading_session.grade(_official_older(tmp_path, "src/12_attention/12_attention.py", "12_attention.ipynb"))
    assert report.rubric_id == "tinytorch-12-attention"
    assert not_passed(report) == set() and report.score == report.max_score == 100


def test_tito_test_module_attention_grades_module_12(tmp_path: Path) -> None:
    checkout = course_checkout(tmp_path, {"12_attention": FOLDER / "correct_newer.ipynb"})
    run = tito("test", "--module", "attention", cwd=checkout)
    assert run.returncode == 0, run.stderr
    out = " ".join(run.stdout.split())
    assert "Grading module 12 attention: modules/12_attention/12_attention.ipynb" in out
    assert "All 12 public checks passed (94/94 points)" in out and "mha_values ✔" not in out

    shutil.copyfile(FOLDER / "bug_mask_inverted.ipynb", checkout / "modules" / "12_attention" / "12_attention.ipynb")
    run = tito("test", "--module", "12", cwd=checkout)
    assert run.returncode == 1, run.stderr
    out = " ".join(run.stdout.split())
    assert "sdpa_mask ✘ failed 0/12" in out and "the mask was read the wrong way round" in out


def test_the_submissions_readme_lists_every_notebook_with_its_checks() -> None:
    readme = (FOLDER / "README.md").read_text(encoding="utf-8")
    for bug in BUGS:
        assert f"| `{bug.name}.ipynb` |" in readme and ", ".join(f"`{c}`" for c in bug.fails) in readme, bug.name
    for path in CORRECT:
        assert f"| `{path.name}` |" in readme, path.name


def test_the_rubric_scores_100_and_names_both_generations_everywhere() -> None:
    rubric = load_rubric("attention")
    assert sum(c.points for c in rubric.checks) == 100
    assert json.dumps(sorted(c.id for c in rubric.checks)) == json.dumps(sorted(
        ["sdpa_shapes", "sdpa_values", "sdpa_heads", "sdpa_mask", "sdpa_mask_refusal", "sdpa_grad", "mha_config",
         "mha_divisible", "mha_shapes", "mha_values_visible", "mha_values", "mha_mask", "mha_grad"]))
