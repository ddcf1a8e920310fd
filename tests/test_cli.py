"""The ``grader`` command: tables, JSON, and exit codes 0 / 1 / 2 with one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import SUBMISSIONS

pytestmark = pytest.mark.usefixtures("toy_site")  # two units installed, as in a course: module 11 still grades with no --module


def grader(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_all_passed_exits_0_and_prints_the_table(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    run = grader("grade", SUBMISSIONS / "correct_tinytorch.ipynb", "--json", out, "--staff")
    assert run.returncode == 0, run.stderr
    assert "100/100" in run.stdout and "practice run" in run.stdout
    report = json.loads(out.read_text())
    assert report["score"] == 100 and report["backend"]["label"] == "practice"
    assert {c["id"] for c in report["checks"]} >= {"emb_lookup", "grad_accumulate", "sin_pos0"}


def test_a_failed_check_exits_1_with_feedback() -> None:
    run = grader("grade", SUBMISSIONS / "bug_backward_overwrite.ipynb")
    assert run.returncode == 1
    assert "row 0 received 1x the gradient instead of 2x" in run.stdout


def test_bad_input_exits_2_with_a_one_line_error_and_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "broken.ipynb"
    bad.write_text("{oops")
    run = grader("grade", bad, SUBMISSIONS / "correct_tinytorch.ipynb")
    assert run.returncode == 2
    assert "broken.ipynb: not valid JSON" in run.stderr and "Traceback" not in run.stderr
    assert "94/94 (28 of 28 checks passed)" in run.stdout  # the good file is still graded


def test_bad_rubric_exits_2(tmp_path: Path) -> None:
    rubric = tmp_path / "r.toml"
    rubric.write_text("schema_version = 9\n")
    run = grader("grade", SUBMISSIONS / "correct_tinytorch.ipynb", "--rubric", rubric)
    assert run.returncode == 2 and "newer than this grader" in run.stderr and "Traceback" not in run.stderr


def test_public_only_runs_only_visible_checks(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    run = grader("grade", SUBMISSIONS / "correct_tinytorch.ipynb", "--public-only", "--json", out)
    assert run.returncode == 0
    checks = json.loads(out.read_text())["checks"]
    assert checks and all(c["visibility"] == "visible" for c in checks)


def test_several_files_write_a_json_list(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    grader("grade", SUBMISSIONS / "correct_tinytorch.ipynb", SUBMISSIONS / "bug_sin_cos_swapped.ipynb", "--json", out)
    reports = json.loads(out.read_text())
    assert [r["submission"] for r in reports] == ["correct_tinytorch.ipynb", "bug_sin_cos_swapped.ipynb"]
    assert reports[1]["score"] < 100


def test_hostile_files_cost_only_themselves_and_the_json_is_written(tmp_path: Path) -> None:
    from .conftest import code_cells, write_notebook
    from .test_load import yaml_alias_bomb

    hostile = write_notebook(tmp_path / "hostile.ipynb", [
        *code_cells(SUBMISSIONS / "correct_tinytorch.ipynb"),
        "def f(a, a):\n    pass\n", "x = " + "-" * 100_000 + "1\n", "!echo \ud800\n"])
    bomb = tmp_path / "bomb.py"
    bomb.write_text(yaml_alias_bomb(9), encoding="utf-8")
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{")
    out = tmp_path / "r.json"
    # --module: the bomb defines nothing, so with two units installed nothing else says which it is
    run = grader("grade", "--module", "embeddings", SUBMISSIONS / "correct_tinytorch.ipynb", hostile, broken, bomb,
                 SUBMISSIONS / "bug_sin_exponent.ipynb", "--json", out)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.count("error:") == 1 and "broken.ipynb: not valid JSON" in run.stderr
    reports = json.loads(out.read_text())
    assert [r["submission"] for r in reports] == ["correct_tinytorch.ipynb", "hostile.ipynb", "bomb.py",
                                                   "bug_sin_exponent.ipynb"]
    assert reports[1]["score"] == 100 and len(reports[1]["extraction"]["syntax_errors"]) == 2


def test_students_see_nothing_of_hidden_or_unreleased_checks_and_the_total_says_so() -> None:
    """Gradescope's visibility levels in the table: a hidden check never, an after_due_date one
    only from the due date on (--due-date, or the rubric's); --staff shows everything."""
    bug = SUBMISSIONS / "bug_backward_overwrite.ipynb"  # fails grad_batch (hidden) and its visible twin
    student = grader("grade", bug)
    assert student.returncode == 1
    assert "grad_batch " not in student.stdout and "layer_sin_values " not in student.stdout
    assert ("on the public checks; 1 hidden check and 1 check released after the due date (6 points) count only in "
            "the official grading") in " ".join(student.stdout.split())
    released = grader("grade", bug, "--due-date", "2000-01-01")
    assert "layer_sin_values " in released.stdout and "grad_batch " not in released.stdout
    assert "on the released checks; 1 hidden check (3 points) counts only in the official grading" in \
        " ".join(released.stdout.split())
    staff = grader("grade", bug, "--staff")
    assert "grad_batch " in staff.stdout and "checks shown" not in staff.stdout
    bad = grader("grade", bug, "--due-date", "soon")
    assert bad.returncode == 2 and "due date 'soon' is not a date" in bad.stderr and "Traceback" not in bad.stderr
