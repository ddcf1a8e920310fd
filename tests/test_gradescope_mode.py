"""``grader gradescope`` and the autograder/ pair, against a local folder laid out like /autograder."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from grader.errors import SubmissionError
from grader.gradescope_mode import (
    User,
    add_gradescope_parser,
    find_notebook,
    gradescope_command,
    read_metadata,
)
from grader.rubric import load_rubric
from grader.sandbox import HidingSandbox

from .conftest import code_cells, write_notebook

pytestmark = pytest.mark.usefixtures("toy_site")  # two units installed, as in a course: module 11 still grades with no --module

ROOT = Path(__file__).resolve().parents[1]
SUBMISSIONS = ROOT / "submissions"
AUTOGRADER = ROOT / "autograder"
METADATA = {
    "id": 123456, "created_at": "2026-03-01T09:30:00.000000-08:00",
    "assignment": {"id": 77, "title": "Module 11", "due_date": "2026-03-02T23:59:00.000000-08:00",
                   "total_points": "100.0"},
    "users": [{"email": "jane@example.org", "id": 4242, "name": "<script>alert(1)</script>"}],
    "previous_submissions": [],
}


def autograder_root(tmp_path: Path, notebook: str | None = "bug_sin_cos_swapped.ipynb",
                    upload_as: str = "11_embeddings.ipynb", metadata: dict[str, Any] | None = METADATA,
                    module: str | None = None) -> Path:
    """ROOT with source/ (a stand-in for the uploaded zip, with make_zip.sh's MODULE= as
    ``source/module``), submission/ and submission_metadata.json."""
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    if module is not None:
        (root / "source" / "module").write_text(module + "\n", encoding="utf-8")
    shutil.copy(AUTOGRADER / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    if notebook is not None:
        shutil.copy(SUBMISSIONS / notebook, root / "submission" / upload_as)
    (root / "submission" / "notes.txt").write_text("a stray file", encoding="utf-8")
    if metadata is not None:
        (root / "submission_metadata.json").write_text(json.dumps(metadata), encoding="utf-8")
    return root


def run_mode(root: Path) -> tuple[int, dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="grader")
    add_gradescope_parser(parser.add_subparsers(dest="command", required=True))
    code = gradescope_command(parser.parse_args(["gradescope", "--root", str(root)]))
    return code, json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


def test_graded_submission_gives_gradescope_results(tmp_path: Path) -> None:
    code, results = run_mode(autograder_root(tmp_path))
    rubric = load_rubric(module="embeddings")
    assert code == 0
    assert results["score"] == 88.0
    assert [t["visibility"] for t in results["tests"]] == [c.visibility for c in rubric.checks]
    assert sum(t["max_score"] for t in results["tests"]) == rubric.max_score
    tests = {t["tags"][0]: t for t in results["tests"]}
    assert tests["sin_pos0"]["status"] == "failed" and "Likely cause: row 0 starts [1, 0, ...]" in tests["sin_pos0"]["output"]
    hidden = tests["layer_sin_values"]
    assert hidden["visibility"] == "after_due_date" and hidden["status"] == "failed"
    # Gradescope shows it to students only after the due date: the full diagnosis is kept for then
    assert hidden["output"].startswith("Called: ") and "Did not pass" not in hidden["output"]
    assert results["extra_data"] == {"student_id": "4242", "status": "graded", "grader_version": "0.1.0",
                                     "rubric_id": rubric.id, "submission_id": "123456"}
    assert results["stdout_visibility"] == "hidden" and results["output_format"] == "text"
    assert "Practice run" not in results["output"]


def test_run_autograder_script_against_a_local_layout(tmp_path: Path) -> None:
    root = autograder_root(tmp_path, notebook="correct_tinytorch.ipynb", upload_as="my work.ipynb")
    env = {**os.environ, "GRADER_AUTOGRADER_ROOT": str(root), "GRADER_PYTHON": sys.executable}
    done = subprocess.run(["bash", str(root / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("graded: score 100")
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    assert results["score"] == 100.0 and all(t["status"] == "passed" for t in results["tests"])


@pytest.mark.parametrize(("notebook", "upload_as", "expected"), [
    pytest.param(None, "", "no notebook found", id="nothing-uploaded"),
    pytest.param("bug_sin_cos_swapped.ipynb", "a.ipynb", "notebooks (a.ipynb, b.ipynb) and none named", id="two"),
])
def test_a_submission_without_one_notebook_gets_score_0_and_the_reason(tmp_path: Path, notebook: str | None,
                                                                       upload_as: str, expected: str) -> None:
    # no notebook says which module: the assignment does (two units are installed)
    root = autograder_root(tmp_path, notebook=notebook, upload_as=upload_as, module="embeddings")
    if notebook is not None:
        shutil.copy(SUBMISSIONS / notebook, root / "submission" / "b.ipynb")
    code, results = run_mode(root)
    assert code == 0
    assert results["score"] == 0.0 and results["extra_data"]["status"] == "invalid"
    assert expected in results["output"]
    assert len(results["tests"]) == len(load_rubric(module="embeddings").checks)
    assert all(t["score"] == 0.0 for t in results["tests"])


@pytest.mark.usefixtures("no_standing_module")
def test_an_assignment_that_names_no_module_still_tells_the_student_why(tmp_path: Path) -> None:
    """Two units, nothing uploaded and no source/module: results.json says what is missing."""
    code, results = run_mode(autograder_root(tmp_path, notebook=None))
    assert code == 0
    assert results["score"] == 0.0 and results["extra_data"]["status"] == "invalid"
    assert "no notebook found" in results["output"] and results["tests"] == []


def test_a_broken_notebook_is_invalid_and_metadata_is_optional(tmp_path: Path) -> None:
    root = autograder_root(tmp_path, notebook=None, metadata=None)
    (root / "submission" / "11_embeddings.ipynb").write_text("{not json", encoding="utf-8")
    code, results = run_mode(root)
    assert code == 0 and results["score"] == 0.0
    assert "11_embeddings.ipynb: not valid JSON" in results["output"]
    assert "submission_id" not in results["extra_data"]


def test_student_code_cannot_read_the_uploaded_source_or_the_seed_secret(tmp_path: Path) -> None:
    root = autograder_root(tmp_path, notebook=None)
    secret = root / "source" / "seed_secret"
    secret.write_text("TOP-SECRET-SEED", encoding="utf-8")
    steal = (f"import os\nLEAK = open({str(secret)!r}).read() if os.path.exists({str(secret)!r}) else 'missing'\n"
             "class Embedding:\n    def __init__(self, vocab_size, embed_dim):\n"
             "        raise ValueError('LEAK:' + LEAK)\n")
    cells = code_cells(SUBMISSIONS / "correct_tinytorch.ipynb")
    write_notebook(root / "submission" / "11_embeddings.ipynb", [*cells, steal])
    _, results = run_mode(root)
    text = json.dumps(results)
    assert "LEAK:missing" in text  # the attempt ran, and found nothing
    assert "TOP-SECRET-SEED" not in text


def test_hiding_sandbox_adds_the_autograder_folders_to_every_run(tmp_path: Path) -> None:
    seen: list[tuple[Path, ...]] = []

    class Fake:
        def info(self) -> Any:
            return None

        def run(self, job: Any, chunks: Any, workdir: Path, hide: Any = ()) -> Any:
            seen.append(tuple(hide))

    sandbox = HidingSandbox(Fake(), (tmp_path / "source", tmp_path / "results"))
    sandbox.run(None, (), tmp_path, hide=(tmp_path / "cache",))  # type: ignore[arg-type]  # the fake ignores the job
    assert seen == [(tmp_path / "cache", tmp_path / "source", tmp_path / "results")]
    sandbox.start()
    sandbox.close()  # a sandbox without start/close is fine


def test_find_notebook_prefers_the_module_name_and_refuses_symlinks(tmp_path: Path) -> None:
    sub = tmp_path / "submission"
    (sub / "nested" / ".ipynb_checkpoints").mkdir(parents=True)
    (sub / "scratch.ipynb").write_text("{}", encoding="utf-8")
    (sub / "nested" / "11_embeddings.ipynb").write_text("{}", encoding="utf-8")
    (sub / "nested" / ".ipynb_checkpoints" / "11_embeddings-checkpoint.ipynb").write_text("{}", encoding="utf-8")
    assert find_notebook(sub) == sub / "nested" / "11_embeddings.ipynb"
    (sub / "nested" / "11_embeddings.ipynb").unlink()
    (sub / "scratch.ipynb").unlink()
    (sub / "11_embeddings.ipynb").symlink_to(tmp_path / "elsewhere.ipynb")
    with pytest.raises(SubmissionError, match="no notebook found"):
        find_notebook(sub)


def test_metadata_reader_keeps_going_on_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "submission_metadata.json"
    path.write_text("[1, 2", encoding="utf-8")
    meta, problem = read_metadata(path)
    assert meta.users == () and problem.startswith("submission_metadata.json unreadable")
    path.write_text(json.dumps({"id": True, "users": [{"id": 7, "name": ["x"]}, "junk"], "assignment": 3}),
                    encoding="utf-8")
    meta, problem = read_metadata(path)  # wrong types are ignored, field by field
    assert (meta.id, meta.users, problem) == ("", (User(id="7"),), "")


def test_setup_script_is_valid_bash_and_names_no_package_registry() -> None:
    for script in ("setup.sh", "run_autograder", "make_zip.sh"):
        path = AUTOGRADER / script
        assert os.access(path, os.X_OK), f"{script} must be executable"
        subprocess.run(["bash", "-n", str(path)], check=True)
        text = path.read_text(encoding="utf-8").lower()
        assert not any(host in text for host in ("pypi", "index-url", "http://", "https://", "files.python"))


def test_make_zip_puts_the_pair_at_the_top_of_the_repository_archive(tmp_path: Path) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    out = tmp_path / "autograder.zip"
    env = {**os.environ, "GRADER_SEED_SECRET": "s3cret"}
    subprocess.run(["bash", str(AUTOGRADER / "make_zip.sh"), str(out)], cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=60)
    with zipfile.ZipFile(out) as z:
        names = set(z.namelist())
        assert {"setup.sh", "run_autograder", "seed_secret", "pyproject.toml"} <= names
        assert z.read("seed_secret") == b"s3cret"
        assert (z.getinfo("run_autograder").external_attr >> 16) & 0o111  # executable once unpacked


def test_a_grader_fault_still_writes_results_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from grader.pipeline import Grader

    def broken(self: Grader, path: Path) -> None:
        raise IndexError("tuple index out of range")

    monkeypatch.setattr(Grader, "grade", broken)
    code, results = run_mode(autograder_root(tmp_path))
    assert code == 1  # shows in Gradescope's logs
    assert results["score"] == 0.0 and results["extra_data"]["status"] == "failed_to_grade"
    assert "a problem on the grading side" in results["output"]
    assert "internal grader error, please report it: IndexError" in capsys.readouterr().out  # the staff log


def test_student_controlled_strings_cannot_stop_results_json(tmp_path: Path) -> None:
    metadata = {**METADATA, "id": "12\ud800\x1b[2J",
                "users": [{"email": "a\udcff@example.org", "id": "42\ud800", "name": "\x1b]0;x\x07Eve"}]}
    root = autograder_root(tmp_path, notebook=None, metadata=metadata)
    write_notebook(root / "submission" / "11_embeddings.ipynb",
                   [*code_cells(SUBMISSIONS / "correct_tinytorch.ipynb"), "!echo \ud800\n", "def f(a, a):\n    pass\n"])
    code, results = run_mode(root)
    assert code == 0 and results["score"] == 100.0
    assert results["extra_data"]["student_id"] == "42\\ud800"
    assert results["extra_data"]["submission_id"] == "12\\ud800\\x1b[2J"
