"""`grader batch`: every source layout, hostile archives and names, resume after a kill."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from grader.batch.archive import extract_zip
from grader.batch.layouts import discover
from grader.batch.runner import run_batch
from grader.errors import SubmissionError
from grader.results.store import SQLiteStore

from .conftest import EMBEDDINGS_RUBRIC, SUBMISSIONS

pytestmark = pytest.mark.usefixtures("toy_site")  # two units installed, as in a course: module 11 still grades with no --module

CORRECT = SUBMISSIONS / "correct_tinytorch.ipynb"
BUGGY = SUBMISSIONS / "bug_backward_overwrite.ipynb"


def folder_layout(root: Path) -> Path:
    root.mkdir()
    shutil.copy(CORRECT, root / "alice.ipynb")
    shutil.copy(BUGGY, root / "bob.ipynb")
    (root / "notes.txt").write_text("not a submission")
    return root


def nbgrader_layout(root: Path) -> Path:
    for student, src in (("alice", CORRECT), ("bob", BUGGY)):
        d = root / "submitted" / student / "11_embeddings"
        d.mkdir(parents=True)
        shutil.copy(src, d / "11_embeddings.ipynb")
        (d / "timestamp.txt").write_text("2026-11-30 12:00:00 UTC")
    return root


def gradescope_layout(root: Path) -> Path:
    root.mkdir()
    meta = {}
    for n, (sid, src) in enumerate((("alice", CORRECT), ("bob", BUGGY)), start=1):
        d = root / f"submission_{1000 + n}"
        d.mkdir()
        shutil.copy(src, d / "embeddings.ipynb")
        meta[f"submission_{1000 + n}"] = {":submitters": [{":name": sid.title(), ":sid": sid, ":email": f"{sid}@u.edu"}],
                                          ":created_at": "2026-11-30 12:00:00"}
    import yaml

    (root / "submission_metadata.yml").write_text(yaml.safe_dump(meta))
    return root


def zipped(folder: Path, dest: Path) -> Path:
    with zipfile.ZipFile(dest, "w") as zf:
        for f in sorted(folder.rglob("*")):
            zf.write(f, f.relative_to(folder.parent).as_posix())
    return dest


@pytest.mark.parametrize(
    ("make", "layout"),
    [(folder_layout, "folder of files"), (nbgrader_layout, "nbgrader submitted/"), (gradescope_layout, "Gradescope export")],
    ids=["folder", "nbgrader", "gradescope"],
)
@pytest.mark.parametrize("as_zip", [False, True], ids=["plain", "zip"])
def test_every_layout_is_detected_and_graded(tmp_path: Path, make, layout: str, as_zip: bool) -> None:  # type: ignore[no-untyped-def]
    source = make(tmp_path / "src")
    if as_zip:
        source = zipped(source, tmp_path / "class.zip")
    outcome = run_batch(source, tmp_path / "results", workers=2)
    assert outcome.layout == (f"zip of {layout}" if as_zip else layout)
    assert (outcome.total, outcome.graded) == (2, 2)
    scores = {r.student_id: r.score for r in SQLiteStore(tmp_path / "results").results()}
    bob = scores["bob"]
    assert scores["alice"] == 100 and bob is not None and bob < 100
    assert json.loads((tmp_path / "results" / "reports" / "alice.json").read_text())["score"] == 100


def _zip_with(tmp_path: Path, name: str, *, link: bool = False, data: bytes = b"{}") -> Path:
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        if link:
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, data)
    return path


@pytest.mark.parametrize(
    ("name", "kwargs", "reason"),
    [
        pytest.param("../escape.ipynb", {}, "climbs out", id="dot-dot"),
        pytest.param("/etc/evil.ipynb", {}, "absolute path", id="absolute"),
        pytest.param("bomb.ipynb", {"data": b"0" * 5_000_000}, "zip bomb", id="bomb"),
    ],
)
def test_hostile_archives_are_refused_before_anything_is_written(tmp_path: Path, name: str, kwargs: dict, reason: str) -> None:  # type: ignore[type-arg]
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(SubmissionError, match=reason):
        extract_zip(_zip_with(tmp_path, name, **kwargs), dest)
    assert list(dest.iterdir()) == []
    assert not (tmp_path / "escape.ipynb").exists()


def test_hostile_names_and_symlinks_are_reported_not_graded(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(CORRECT, src / "alice.ipynb")
    shutil.copy(CORRECT, src / "; touch pwned;.ipynb")
    shutil.copy(CORRECT, src / "-rf.ipynb")
    (src / "link.ipynb").symlink_to(CORRECT)
    found = discover(src, tmp_path / "scratch")
    assert [e.student_id for e in found.entries] == ["alice"]
    assert len(found.problems) == 3
    assert any("symbolic link" in p for p in found.problems)


def test_a_malformed_submission_is_recorded_and_the_batch_goes_on(tmp_path: Path) -> None:
    src = folder_layout(tmp_path / "src")
    (src / "carol.ipynb").write_text("{broken")
    outcome = run_batch(src, tmp_path / "results", workers=1)
    assert (outcome.graded, outcome.invalid) == (2, 1)
    rows = {r.student_id: r for r in SQLiteStore(tmp_path / "results").results()}
    assert rows["carol"].status == "invalid" and "not valid JSON" in rows["carol"].reason


def test_rerun_grades_only_what_changed_and_force_regrades(tmp_path: Path) -> None:
    src = folder_layout(tmp_path / "src")
    assert run_batch(src, tmp_path / "r", workers=2).graded == 2
    again = run_batch(src, tmp_path / "r", workers=2)
    assert (again.graded, again.skipped) == (0, 2)
    shutil.copy(CORRECT, src / "bob.ipynb")  # bob fixed his bug
    fixed = run_batch(src, tmp_path / "r", workers=2)
    assert (fixed.graded, fixed.skipped) == (1, 1)
    assert {r.student_id: r.score for r in SQLiteStore(tmp_path / "r").results()}["bob"] == 100
    assert run_batch(src, tmp_path / "r", workers=2, force=True).graded == 2


def test_killing_a_batch_loses_nothing_and_grades_nothing_twice(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for n in range(12):
        shutil.copy(CORRECT if n % 2 else BUGGY, src / f"s{n:02d}.ipynb")
    out = tmp_path / "r"
    proc = subprocess.Popen([sys.executable, "-m", "grader.cli", "batch", str(src), "--out", str(out), "--workers", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    db = out / "results.sqlite"
    deadline = time.monotonic() + 60
    done: list[tuple[str, str]] = []
    while time.monotonic() < deadline and len(done) < 3:
        time.sleep(0.1)
        if db.exists():
            with sqlite3.connect(db) as conn:
                try:
                    done = conn.execute("SELECT student_id, graded_at FROM results").fetchall()
                except sqlite3.OperationalError:
                    done = []
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 3 <= len(done) < 12, "the batch should have been killed part-way"
    with sqlite3.connect(db) as conn:
        before = dict(conn.execute("SELECT student_id, graded_at FROM results").fetchall())
    outcome = run_batch(src, out, workers=2)
    assert outcome.skipped == len(before) and outcome.graded == 12 - len(before)
    after = {r.student_id: r.graded_at for r in SQLiteStore(out).results()}
    assert len(after) == 12
    assert all(after[s] == t for s, t in before.items())  # nothing graded twice


def test_instructor_flow_from_a_zip_to_a_canvas_csv(tmp_path: Path) -> None:
    """The README's course flow, through the command line: zip → grader batch → grader export."""
    import csv

    src = tmp_path / "class"
    src.mkdir()
    shutil.copy(CORRECT, src / "jdoe.ipynb")
    shutil.copy(BUGGY, src / "amy.ipynb")
    archive = zipped(src, tmp_path / "class.zip")
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email,canvas_id,sis_user_id\n"
                      'jdoe,"Doe, Jane",jane@u.edu,98765,s1\namy,Amélie Ng,amy@u.edu,98766,s2\n'
                      "zed,Zed Absent,zed@u.edu,98767,s3\n", encoding="utf-8")
    out = tmp_path / "results"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "grader.cli", *args], capture_output=True, text=True, timeout=300)

    run = cli("batch", str(archive), "--out", str(out), "--roster", str(roster), "--workers", "2")
    assert run.returncode == 0, run.stderr
    assert "zip of folder of files" in run.stdout and (out / "summary.html").is_file()
    run = cli("export", "--format", "canvas", str(out), "--canvas-assignment-id", "123456")
    assert run.returncode == 0, run.stderr
    rows = list(csv.reader((out / "exports" / "canvas.csv").read_text(encoding="utf-8").splitlines()))
    assert rows[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] and rows[0][5].endswith("(123456)")
    assert rows[1][0] == "Points Possible" and float(rows[1][5]) == 100
    by_name = {r[0]: r for r in rows[2:]}
    assert float(by_name["Doe, Jane"][5]) == 100 and by_name["Doe, Jane"][1] == "98765"
    assert float(by_name["Amélie Ng"][5]) < 100
    assert float(by_name["Zed Absent"][5]) == 0  # on the roster, no submission


def test_hostile_submissions_cost_only_their_student(tmp_path: Path) -> None:
    """Each of these used to stop the whole class, on every rerun: a file name that is not UTF-8, a
    lone surrogate in a shell line (valid JSON), a jupytext header built to expand forever, cells
    Python itself refuses."""
    from .conftest import code_cells, write_notebook
    from .test_load import yaml_alias_bomb

    src = nbgrader_layout(tmp_path / "class")
    folder = {s: src / "submitted" / s / "11_embeddings" for s in ("carol", "dave", "erin")}
    for d in folder.values():
        d.mkdir(parents=True)
    shutil.copy(os.fsencode(CORRECT), os.fsencode(folder["carol"]) + b"/embeddings\xff\x1b[2J.ipynb")
    write_notebook(folder["dave"] / "11_embeddings.ipynb", [
        *code_cells(CORRECT), "!echo \ud800\n", "def f(a, a):\n    pass\n", "x = " + "-" * 100_000 + "1\n"])
    (folder["erin"] / "11_embeddings.py").write_text(yaml_alias_bomb(9), encoding="utf-8")
    out = tmp_path / "results"
    run = subprocess.run([sys.executable, "-m", "grader.cli", "batch", str(src), "--out", str(out), "--workers", "2"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stdout + run.stderr and (out / "summary.html").is_file()
    rows = {r.student_id: r for r in SQLiteStore(out).results()}
    assert {s: r.status for s, r in rows.items()} == dict.fromkeys(("alice", "bob", "carol", "dave", "erin"), "graded")
    assert rows["carol"].file_name == "embeddings\\xff\\x1b[2J.ipynb" and rows["carol"].score == 100
    assert rows["dave"].score == 100 and rows["dave"].report is not None
    assert len(rows["dave"].report.extraction.syntax_errors) == 2
    assert rows["erin"].report is not None and rows["erin"].report.score == 0  # graded: it defines nothing
    again = subprocess.run([sys.executable, "-m", "grader.cli", "batch", str(src), "--out", str(out)],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "5 up to date" in again.stdout


def test_a_stored_report_that_cannot_be_read_fails_only_that_student_and_is_graded_again(tmp_path: Path) -> None:
    """A results folder written by another grader version (or damaged): the exports and feedback
    of the class still come out, that student is listed as not graded, and the next batch regrades it."""
    import sqlite3

    from grader.results.record import UNREADABLE

    src = tmp_path / "in"
    src.mkdir()
    for name in ("alice", "bob"):
        shutil.copy(CORRECT, src / f"{name}.ipynb")
    out = tmp_path / "results"
    first = subprocess.run([sys.executable, "-m", "grader.cli", "batch", str(src), "--out", str(out)],
                           capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    with sqlite3.connect(out / SQLiteStore.FILE) as db:  # a duration no report may hold any more
        (stored,) = db.execute("SELECT report FROM results WHERE student_id = 'bob'").fetchone()
        report = json.loads(stored)
        report["checks"][0]["duration_ms"] = float("inf")
        db.execute("UPDATE results SET report = ? WHERE student_id = 'bob'", (json.dumps(report),))
    rows = {r.student_id: r for r in SQLiteStore(out).results()}
    assert rows["alice"].status == "graded" and rows["alice"].score == 100
    assert (rows["bob"].status, rows["bob"].reason, rows["bob"].report) == ("failed_to_grade", UNREADABLE, None)
    export = subprocess.run([sys.executable, "-m", "grader.cli", "export", "--format", "canvas", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert export.returncode == 0 and "Traceback" not in export.stderr, export.stderr
    again = subprocess.run([sys.executable, "-m", "grader.cli", "batch", str(src), "--out", str(out)],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "1 up to date" in again.stdout, again.stdout
    assert {r.student_id: r.score for r in SQLiteStore(out).results()} == {"alice": 100, "bob": 100}


def test_a_result_holding_text_no_encoder_accepts_is_still_stored(tmp_path: Path) -> None:
    """The last line of defence: student text is made safe where it enters a report, but a lone
    surrogate that got in anyway is escaped, not allowed to stop the class's store and files."""
    from grader import Grader
    from grader.batch.runner import write_student_report
    from grader.results.record import StoredResult, now

    with Grader(EMBEDDINGS_RUBRIC, backend="local", public_only=True) as g:
        report = g.grade(CORRECT)
    check = report.checks[0].model_copy(update={"message": "bad \ud800 text"})
    report = report.model_copy(update={"checks": (check, *report.checks[1:])})
    result = StoredResult(student_id="s\udcff", cache_key="k", sha256="0", file_name="a\udcff.ipynb", name="\x1b[2J",
                          email="", submitted_at="", status="graded", reason="", score=report.score,
                          max_score=report.max_score, report=report, graded_at=now())
    with SQLiteStore(tmp_path) as store:
        store.put(result)
        (back,) = store.results()
    assert back.report is not None and back.report.checks[0].message == "bad \\ud800 text"
    assert (back.student_id, back.file_name, back.name) == ("s\\xff", "a\\xff.ipynb", "\\x1b[2J")
    written = write_student_report(tmp_path, result)
    assert written is not None and "bad \\\\ud800 text" in written.read_text(encoding="utf-8")
