"""Gradebook exports, field by field against docs/FORMATS.md, and the roster's edge cases."""

from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path

import pytest

from grader.export import EXPORTERS, Gradebook, RosterError, build_gradebook, parse_roster
from grader.export.cli import add_export_parser, export_command, load_gradebook
from grader.models import BackendInfo, CheckResult, ExtractionSummary, GradeReport
from grader.results.record import StoredResult
from grader.results.store import SQLiteStore
from grader.rubric import Rubric, load_rubric

SECRET = "SECRET-HIDDEN-DETAIL-777"
ROSTER = (
    "\ufeffStudent ID,Name,E-mail,SIS User ID,SIS Login ID,Section,Canvas ID\r\n"
    '"jdoe","Doe, Jane",jane.doe@example.org,s1234567,jdoe,CS249r-01,98765\r\n'
    '"zmuller","Müller, Zoë",Zoe.Muller@Example.org,s2,zmuller,CS249r-01,98766\r\n'
    "bob,Bob Stone,bob@example.org,s3,bob,CS249r-02,98767\r\n"
    "carol,Carol King,carol@example.org,s4,carol,CS249r-02,98768\r\n"
    "erin,Erin Gray,erin@example.org,s5,erin,CS249r-02,98769\r\n"
    '"mallory","=HYPERLINK(""http://evil.example"",""x"")",m@example.org,s6,mallory,CS249r-02,98770\r\n'
    "jdoe,Jane Again,jane2@example.org,s7,jdoe2,CS249r-01,98771\r\n"
)


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric()


def report(rubric: Rubric, score: float, failing: tuple[str, ...] = ()) -> GradeReport:
    """A report whose stored ``score`` is given (it need not equal the sum of its checks)."""
    checks = []
    for spec in rubric.checks:
        ok = spec.id not in failing
        message = "" if ok else (f"Called: f()\nout: differs\nLikely cause: {spec.id} is wrong." if spec.public
                                 else "Did not pass. Its details are for the course staff only.")
        checks.append(CheckResult(id=spec.id, title=spec.title, status="passed" if ok else "failed",
                                  score=spec.points if ok else 0.0, max_score=spec.points,
                                  visibility=spec.visibility, message=message,
                                  detail="" if ok else f"Called: {SECRET}\nLikely cause: {spec.id}."))
    return GradeReport(submission="nb.ipynb", sha256="0" * 64, rubric_id=rubric.id, rubric_hash=rubric.sha256,
                       grader_version="test", seed=1, backend=BackendInfo(name="local", label="practice"),
                       extraction=ExtractionSummary(kept=(), dropped=(), syntax_errors=()), checks=tuple(checks),
                       score=score, max_score=rubric.max_score)


def stored(student: str, rep: GradeReport | None, *, status: str = "graded", reason: str = "", name: str = "",
           file_name: str = "") -> StoredResult:
    return StoredResult(student_id=student, cache_key="k", sha256="0" * 64, file_name=file_name or f"{student}.ipynb",
                        name=name, email=f"{student}@submission.example", submitted_at="2026-03-01 09:30:00",
                        status=status, reason=reason,  # type: ignore[arg-type]
                        score=rep.score if rep else None, max_score=rep.max_score if rep else None, report=rep,
                        graded_at="2026-03-01T09:31:00+00:00")


@pytest.fixture()
def results_dir(tmp_path: Path, rubric: Rubric) -> Path:
    """A RESULTS_DIR as ``grader batch`` leaves it: store, rubric meta and the roster copy."""
    with SQLiteStore(tmp_path) as store:
        store.set_meta("rubric", rubric.model_dump_json())
        for result in (
            stored("jdoe", report(rubric, 77.25, failing=("sin_values", "grad_batch"))),
            stored("zmuller", report(rubric, 100.0)),
            stored("bob", None, status="invalid", reason="bob.ipynb: not valid JSON <script>x</script>"),
            stored("carol", None, status="failed_to_grade", reason="sandbox unavailable: docker is not running"),
            stored("dave", report(rubric, 50.0, failing=("emb_lookup",)), name="Dave, Eve",
                   file_name="11_embeddings.ipynb"),
        ):
            store.put(result)
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    return tmp_path


@pytest.fixture()
def book(results_dir: Path) -> Gradebook:
    return load_gradebook(results_dir, assignment="Module 11 Embeddings", canvas_assignment_id="123456",
                          due_date="2026-03-02 23:59:00")


def render(book: Gradebook, fmt: str) -> str:
    (only,) = EXPORTERS[fmt].render(book)
    return only.text


def rows_of(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def by_first(rows: list[list[str]], column: int = 0) -> dict[str, list[str]]:
    return {r[column]: r for r in rows}


# ---- the gradebook ------------------------------------------------------------------------


def test_gradebook_keeps_everyone_and_reports_every_problem(book: Gradebook) -> None:
    assert [(r.student_id, r.status, r.score) for r in book.rows] == [
        ("jdoe", "graded", 77.25), ("zmuller", "graded", 100.0), ("bob", "invalid", 0.0),
        ("carol", "failed_to_grade", 0.0), ("erin", "missing", 0.0), ("mallory", "missing", 0.0),
        ("dave", "graded", 50.0)]
    problems = "\n".join(book.problems)
    assert "line 8: student id 'jdoe' already on line 2; this row is ignored" in problems
    assert "2 student(s) in the roster have no submission; exported with 0 and status 'missing': erin, mallory" in problems
    assert "1 submission(s) have no roster entry (unknown id); exported with the identity their submission gives: dave" \
        in problems
    assert "bob: exported with 0 because it was not graded (invalid submission: bob.ipynb" in problems
    assert "carol: exported with a blank score, not 0, because the grader failed (could not be graded: sandbox " \
        "unavailable" in problems


def test_scores_are_the_stored_ones_never_recomputed(rubric: Rubric) -> None:
    rep = report(rubric, 12.5)  # every check passed, yet the stored score is 12.5
    book = build_gradebook([stored("x", rep)], rubric=rubric, roster=None)
    assert book.rows[0].score == 12.5
    assert rows_of(render(book, "canvas"))[2][-1] == "12.5"
    assert rows_of(render(book, "nbgrader"))[1][7] == "12.5"


def test_a_result_graded_with_another_rubric_version_is_reported(rubric: Rubric) -> None:
    rep = report(rubric, 10.0).model_copy(update={"rubric_hash": "f" * 64})
    book = build_gradebook([stored("x", rep)], rubric=rubric)
    assert any("another version of the rubric: x" in p for p in book.problems)


# ---- Canvas -------------------------------------------------------------------------------


def test_canvas_header_points_possible_row_and_rows_field_by_field(book: Gradebook) -> None:
    text = render(book, "canvas")
    lines = text.split("\r\n")
    assert lines[0] == "Student,ID,SIS User ID,SIS Login ID,Section,Module 11 Embeddings (123456)"
    assert lines[1] == "Points Possible,,,,,100.00"
    rows = rows_of(text)
    assert all(len(r) == 6 for r in rows)
    students = by_first(rows[2:], 1)
    assert students["98765"] == ["Doe, Jane", "98765", "s1234567", "jdoe", "CS249r-01", "77.25"]
    assert students["98766"] == ["Müller, Zoë", "98766", "s2", "zmuller", "CS249r-01", "100"]
    assert students["98767"][-1] == "0" and students["98768"][-1] == ""  # invalid: 0; failed_to_grade: blank
    assert students["98769"] == ["Erin Gray", "98769", "s5", "erin", "CS249r-02", "0"]  # missing
    assert students["98770"][0] == "'=HYPERLINK(\"http://evil.example\",\"x\")"  # never a formula
    # unknown to the roster: left out, since Canvas would match it by the name the submission gives
    assert not any(r[0] == "Dave, Eve" or r[-1] == "50" for r in rows)
    assert '"Doe, Jane",98765' in text and '"Müller, Zoë"' in text


def test_canvas_without_an_assignment_id_creates_a_new_assignment(results_dir: Path) -> None:
    book = load_gradebook(results_dir, assignment="Module 11 Embeddings")
    assert rows_of(render(book, "canvas"))[0][-1] == "Module 11 Embeddings"


def test_canvas_file_is_utf8_without_bom(results_dir: Path, book: Gradebook) -> None:
    args = parse(["export", "--format", "canvas", str(results_dir), "--canvas-assignment-id", "123456",
                  "--allow-unmatched"])
    assert export_command(args) == 0
    data = (results_dir / "exports" / "canvas.csv").read_bytes()
    assert not data.startswith(b"\xef\xbb\xbf") and "Müller, Zoë".encode() in data
    assert data.count(b"\r\n") == len(book.rows) + 2 - 1  # dave is in no roster: left out


# ---- Moodle -------------------------------------------------------------------------------


def test_moodle_columns_and_rows_field_by_field(book: Gradebook) -> None:
    rows = rows_of(render(book, "moodle"))
    assert rows[0] == ["First name", "Surname", "ID number", "Institution", "Department", "Email address",
                       "Assignment: Module 11 Embeddings (Real)", "Feedback: Module 11 Embeddings"]
    students = by_first(rows[1:], 2)
    zoe = students["s2"]
    assert zoe[:7] == ["Zoë", "Müller", "s2", "", "", "Zoe.Muller@Example.org", "100"]  # e-mail case kept
    assert zoe[7].startswith("Score on the checks shown: 94/94.")  # a hidden and an after-due-date check: not shown
    jane = students["s1234567"]
    assert jane[:7] == ["Jane", "Doe", "s1234567", "", "", "jane.doe@example.org", "77.25"]
    assert "Checks to fix: sin_values." in jane[7] and SECRET not in jane[7]
    assert "Not shown yet: 1 check, released after the due date." in jane[7] and "hidden" not in jane[7]
    assert "the gradebook gets the score on all" in jane[7]
    bob = students["s3"]
    assert bob[6] == "0" and "not valid JSON &lt;script&gt;x&lt;/script&gt;" in bob[7] and "<script>" not in bob[7]
    assert students["s4"][6] == "" and "problem on the grading side" in students["s4"][7]  # blank, not 0
    assert students["s5"][6:] == ["0", "No submission was received."]
    assert students["dave"][:2] == ["Eve", "Dave"]  # no roster: ID number falls back to the student id


# ---- nbgrader -----------------------------------------------------------------------------


def test_nbgrader_columns_and_score_is_raw_minus_penalty(book: Gradebook) -> None:
    rows = rows_of(render(book, "nbgrader"))
    assert rows[0] == ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
                       "raw_score", "late_submission_penalty", "score", "max_score"]
    students = by_first(rows[1:], 3)
    assert students["jdoe"] == ["Module 11 Embeddings", "2026-03-02 23:59:00", "2026-03-01 09:30:00", "jdoe", "Doe",
                                "Jane", "jane.doe@example.org", "77.25", "0.0", "77.25", "100.0"]
    assert students["erin"][2] == "" and students["erin"][7:] == ["0.0", "0.0", "0.0", "100.0"]  # missing
    assert students["bob"][2] == "2026-03-01 09:30:00" and students["bob"][9] == "0.0"  # submitted, invalid
    assert students["carol"][7:10] == ["", "", ""]  # the grader failed: blank, never 0
    for r in rows[1:]:
        if r[3] != "carol":
            assert float(r[9]) == max(0.0, float(r[7]) - float(r[8]))
    assert len(rows) == 1 + len(book.rows)


# ---- Otter --------------------------------------------------------------------------------


def test_otter_points_per_question_row_and_grading_status(book: Gradebook, rubric: Rubric) -> None:
    rows = rows_of(render(book, "otter"))
    ids = sorted(c.id for c in rubric.checks)
    assert rows[0] == ["file", *ids, "total_points_earned", "percent_correct", "grading_status"]
    points = {c.id: c.points for c in rubric.checks}
    assert rows[1] == ["points-per-question", *(str(float(points[i])) for i in ids), "100.0", "1.0", "--"]
    body = rows[2:]
    assert [r[0] for r in body] == sorted(r[0] for r in body)
    files = by_first(body)
    jane = dict(zip(rows[0], files["jdoe.ipynb"], strict=True))
    assert (jane["sin_values"], jane["emb_shape"]) == ("0.0", "4.0")
    assert (jane["total_points_earned"], jane["percent_correct"], jane["grading_status"]) == ("77.25", "0.7725",
                                                                                                "Completed")
    bob = dict(zip(rows[0], files["bob.ipynb"], strict=True))
    assert bob["grading_status"].startswith("invalid submission: bob.ipynb: not valid JSON")
    assert all(bob[i] == "0.0" for i in ids) and bob["total_points_earned"] == "0.0"
    assert files["carol.ipynb"][-1] == "could not be graded: sandbox unavailable: docker is not running"
    assert set(files["carol.ipynb"][1:-1]) == {""}  # blank, never 0
    assert files["erin"][-1] == "no submission"
    assert "dave/11_embeddings.ipynb" in files  # a file name that does not say whose it is


# ---- Gradescope ---------------------------------------------------------------------------


def test_gradescope_results_json_per_submission_with_visibility_per_check(book: Gradebook, rubric: Rubric) -> None:
    files = {str(f.path): json.loads(f.text) for f in EXPORTERS["gradescope"].render(book)}
    assert sorted(files) == sorted(f"{s}/results.json" for s in ("jdoe", "zmuller", "bob", "dave"))  # carol: failed
    jane = files["jdoe/results.json"]
    assert jane["score"] == 77.25 and jane["stdout_visibility"] == "hidden"
    assert [t["visibility"] for t in jane["tests"]] == [c.visibility for c in rubric.checks]
    assert [t["max_score"] for t in jane["tests"]] == [c.points for c in rubric.checks]
    tests = {t["tags"][0]: t for t in jane["tests"]}
    assert tests["sin_values"]["status"] == "failed" and tests["sin_values"]["score"] == 0.0
    assert tests["sin_values"]["output"].startswith("Called: f()\nout: differs")
    # Gradescope withholds a hidden test from students: the file keeps the staff diagnosis for staff
    assert tests["grad_batch"]["visibility"] == "hidden" and SECRET in tests["grad_batch"]["output"]
    assert tests["emb_shape"] == {"score": 4.0, "max_score": 4.0, "status": "passed",
                                  "name": "emb_shape: Embedding output shapes for 1-D, 2-D and empty ids",
                                  "name_format": "text", "number": "1", "output": "", "output_format": "text",
                                  "tags": ["emb_shape"], "visibility": "visible"}
    assert SECRET not in jane["output"] and not any(SECRET in t["output"] for t in jane["tests"]
                                                    if t["visibility"] == "visible")
    bob = files["bob/results.json"]
    assert bob["score"] == 0.0 and bob["extra_data"]["status"] == "invalid"
    assert all(t["score"] == 0.0 and t["status"] == "failed" for t in bob["tests"])
    assert "not valid JSON" in bob["output"]
    assert "sandbox unavailable" not in json.dumps(files)  # a grader fault stays staff-side


# ---- plain CSV ----------------------------------------------------------------------------


def test_plain_csv_has_status_and_reason_for_everyone(book: Gradebook) -> None:
    rows = rows_of(render(book, "csv"))
    header = rows[0]
    assert header[:12] == ["student_id", "name", "email", "section", "status", "score", "max_score", "percent",
                           "submitted_at", "late", "file", "reason"]
    students = {r[0]: dict(zip(header, r, strict=True)) for r in rows[1:]}
    assert {s: r["status"] for s, r in students.items()} == {
        "jdoe": "graded", "zmuller": "graded", "bob": "invalid", "carol": "failed_to_grade", "erin": "missing",
        "mallory": "missing", "dave": "graded"}
    assert students["jdoe"]["percent"] == "77.25" and students["jdoe"]["sin_values"] == "0"
    assert students["bob"]["score"] == "0" and students["bob"]["emb_shape"] == ""
    assert students["carol"]["reason"] == "sandbox unavailable: docker is not running"
    assert (students["carol"]["score"], students["carol"]["percent"]) == ("", "")


# ---- roster -------------------------------------------------------------------------------


@pytest.mark.parametrize("header", [
    pytest.param("student_id,name,email", id="canonical"),
    pytest.param("\ufeffStudent ID,Full Name,E-mail", id="bom-and-spaces"),
    pytest.param("SID,Student Name,Email Address", id="synonyms"),
    pytest.param("Username,Display name,MAIL", id="upper-case"),
])
def test_roster_header_spellings(header: str) -> None:
    roster = parse_roster(f"{header}\na1,Ann Lee,ann@example.org\n")
    (entry,) = roster.entries
    assert (entry.student_id, entry.name, entry.email, entry.first_name, entry.last_name) == (
        "a1", "Ann Lee", "ann@example.org", "Ann", "Lee")
    assert roster.problems == ()


def test_roster_semicolons_first_and_last_names() -> None:
    (entry,) = parse_roster("id;First name;Surname;ID number\nz9;Zoë;Müller;12\n").entries
    assert (entry.student_id, entry.name, entry.sis_user_id) == ("z9", "Zoë Müller", "12")


def test_roster_reports_blank_ids_duplicates_and_shared_emails_never_silently() -> None:
    roster = parse_roster("student_id,name,email,canvas_id\n"
                          "a1,Ann,ann@example.org,1\n,Nobody,,\n\n"
                          "a1,Ann Twin,twin@example.org,2\nb2,Bea,ANN@example.org,1\n../x,Hax,,\n")
    assert [e.student_id for e in roster.entries] == ["a1", "b2", "../x"]
    assert roster.problems == (
        "line 3: no student id; row ignored (Nobody)",
        "line 5: student id 'a1' already on line 2; this row is ignored",
        "line 6: e-mail of 'b2' is also given to 'a1' (line 2)",
        "line 6: Canvas id of 'b2' is also given to 'a1' (line 2)",
        "line 7: student id '../x' is not a safe submission name, so no submission can match it; it is exported "
        "as missing",
    )


def test_a_canvas_gradebook_export_works_as_a_roster() -> None:
    roster = parse_roster("Student,ID,SIS User ID,SIS Login ID,Section,Quiz 1 (77)\n"
                          "    Points Possible,,,,,10\n\"Doe, Jane\",98765,s1234567,jdoe,S1,9\n")
    (entry,) = roster.entries
    assert (entry.student_id, entry.name, entry.canvas_id, entry.first_name, entry.last_name) == (
        "jdoe", "Doe, Jane", "98765", "Jane", "Doe")
    assert roster.problems == () and roster.assignments == (("Quiz 1", "77"),)  # an assignment column, not noise


def test_roster_that_cannot_be_used_raises_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(RosterError, match="no student id column"):
        parse_roster("name,section\nAnn,S1\n")
    with pytest.raises(RosterError, match="a header but no students"):
        parse_roster("student_id,name\n\n")
    with pytest.raises(RosterError, match="empty"):
        parse_roster("")
    with pytest.raises(RosterError, match="line 3: not valid CSV"):
        parse_roster('student_id,name\na1,"Ann\nb2,Bob\n')
    latin1 = tmp_path / "roster.csv"
    latin1.write_bytes("student_id,name\na1,Zoë\n".encode("latin-1"))
    from grader.export import read_roster

    with pytest.raises(RosterError, match="not UTF-8"):
        read_roster(latin1)


# ---- the command --------------------------------------------------------------------------


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="grader")
    add_export_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_export_command_writes_the_default_file_and_reports_problems(results_dir: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert export_command(parse(["export", "--format", "nbgrader", str(results_dir), "--allow-unmatched"])) == 0
    out, err = capsys.readouterr()
    assert (results_dir / "exports" / "nbgrader.csv").is_file()
    assert "7 students (3 graded, 1 invalid, 1 could not be graded, 2 missing)" in out
    assert "warning: 2 student(s) in the roster have no submission" in err
    assert export_command(parse(["export", "--format", "nbgrader", str(results_dir), "--strict",
                                 "--allow-unmatched"])) == 1


def test_export_command_out_paths_and_gradescope_folder(results_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "grades.csv"
    assert export_command(parse(["export", "--format", "csv", str(results_dir), "--out", str(target),
                                 "--allow-unmatched"])) == 0
    assert target.read_text(encoding="utf-8").startswith("student_id,")
    folder = tmp_path / "gs"
    assert export_command(parse(["export", "--format", "gradescope", str(results_dir), "--out", str(folder),
                                 "--allow-unmatched"])) == 0
    assert sorted(p.name for p in folder.iterdir()) == ["bob", "dave", "jdoe", "zmuller"]  # carol: grader failed
    assert json.loads((folder / "jdoe" / "results.json").read_text(encoding="utf-8"))["score"] == 77.25


def test_export_command_errors_are_one_line_with_exit_2(tmp_path: Path, results_dir: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert export_command(parse(["export", "--format", "canvas", str(tmp_path / "nothing")])) == 2
    assert "run 'grader batch SOURCE --out" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("name\nAnn\n", encoding="utf-8")  # no id, no e-mail
    assert export_command(parse(["export", "--format", "canvas", str(results_dir), "--roster", str(bad)])) == 2
    assert "no student id column" in capsys.readouterr().err


def test_export_command_does_not_echo_terminal_escapes(tmp_path: Path, rubric: Rubric,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with SQLiteStore(tmp_path) as store:
        store.set_meta("rubric", rubric.model_dump_json())
        store.put(stored("eve", None, status="invalid", reason="bad\x1b]0;pwned\x07 name"))
    assert export_command(parse(["export", "--format", "csv", str(tmp_path)])) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b]0;pwned\\x07" in err


def test_every_format_has_one_exporter_module() -> None:
    from grader.export import FORMATS, exporters

    found = exporters()
    assert tuple(found) == FORMATS
    assert len({type(e).__module__ for e in found.values()}) == len(FORMATS)
    assert [e.per_submission for e in found.values()] == [f == "gradescope" for f in FORMATS]


def test_an_empty_store_is_reported_not_exported_silently() -> None:
    book = build_gradebook([], rubric=None)
    assert book.rows == () and any("no results are stored yet" in p for p in book.problems)
