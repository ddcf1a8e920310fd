"""LMS downloads: Canvas, Moodle and Blackboard zips laid out exactly as each LMS writes them
(grader/batch/lms.py cites where each naming comes from), mapped to roster ids, through
`grader batch` and `grader export`; ambiguous files, latest attempts and broken rosters."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.batch.identify import resolve
from grader.batch.layouts import discover
from grader.batch.runner import run_batch
from grader.errors import RosterError, SubmissionError
from grader.export import parse_roster
from grader.results.store import SQLiteStore

from .conftest import SUBMISSIONS

CORRECT = (SUBMISSIONS / "correct_tinytorch.ipynb").read_bytes()
BUGGY = (SUBMISSIONS / "bug_backward_overwrite.ipynb").read_bytes()

# Canvas's gradebook export (Grades > Export): "ID" is Canvas's user id, the student id its SIS Login ID.
CANVAS_ROSTER = ("Student,ID,SIS User ID,SIS Login ID,Section,Module 11 (77)\r\n"
                 "    Points Possible,,,,,100\r\n"
                 '"Doe, Jane",4321,s1,jdoe,S1,\r\n"Ng, Amélie",4322,s2,amy,S1,\r\n"Stone, Bob",4323,s3,bob,S2,\r\n')
# Moodle's grading worksheet (Download grading worksheet): "Identifier" is the download's participant id.
MOODLE_ROSTER = ("Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,"
                 "Last modified (submission),Last modified (grade),Feedback comments\n"
                 'Participant 1234567,Jane Doe,jane@u.edu,Submitted for grading,,100.00,Yes,'
                 '"Sunday, 30 November 2026, 12:00 PM",-,\n'
                 'Participant 1234568,Amélie Ng,amy@u.edu,Submitted for grading,,100.00,Yes,'
                 '"Sunday, 30 November 2026, 9:00 AM",-,\n')
# Blackboard's Grade Center download: "Student ID" is the course's id, "Username" the download's.
BLACKBOARD_ROSTER = ('"Last Name","First Name","Username","Student ID","Last Access","Availability"\n'
                     '"Doe","Jane","jdoe","S100","2026-11-30","Available"\n'
                     '"Ng","Amélie","amy_ng","S101","2026-11-30","Available"\n')


def make_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def canvas_zip(path: Path) -> Path:
    """ContentZipper: <sortable name>[_LATE]_<user id>_<attachment id>_<display name>."""
    return make_zip(path, {
        "doejane_4321_99001_11_embeddings.ipynb": CORRECT,
        "ngamelie_LATE_4322_99002_embeddings.ipynb": BUGGY,
        "stonebob_4323_99003_11_embeddings-1.ipynb": CORRECT,  # a re-upload of a file of the same name
        "stonebob_4323_99004_scratch.ipynb": BUGGY,
        "stonebob_4323_text.html": b"<p>see my notebook</p>",  # an online text entry: nothing to grade
    })


def moodle_zip(path: Path) -> Path:
    """downloader.php with "Download submissions in folders" on (Moodle's default)."""
    return make_zip(path, {
        "Jane Doe_1234567_assignsubmission_file/11_embeddings.ipynb": CORRECT,
        "Amélie Ng_1234568_assignsubmission_file/embeddings.ipynb": BUGGY,
        "Amélie Ng_1234568_assignsubmission_onlinetext/onlinetext.html": b"<p>hi</p>",
    })


def receipt(name: str, user: str, stamp: str, files: dict[str, str]) -> bytes:
    """A Blackboard receipt; ``files``: the name in the download -> the name the student uploaded."""
    listing = "".join(f"\tOriginal filename: {original}\n\tFilename: {f}\n" for f, original in files.items())
    return (f"Name: {name} ({user})\nAssignment: Module 11\nDate Submitted: {stamp}\nCurrent Grade: Needs Grading\n\n"
            f"Submission Field:\nThere is no student submission text data for this assignment.\n\nComments:\n"
            f"There are no student comments for this assignment.\n\nFiles:\n{listing}").encode()


def blackboard_zip(path: Path) -> Path:
    """Assignment File Download, all attempts: files and a receipt per attempt."""
    old, new, amy = ("Module 11_jdoe_attempt_2026-11-29-10-00-00", "Module 11_jdoe_attempt_2026-11-30-12-00-00",
                     "Module 11_amy_ng_attempt_2026-11-30-09-00-00")
    nb, first = "11_embeddings.ipynb", "embeddings.ipynb"
    return make_zip(path, {
        f"{old}_{nb}": BUGGY, f"{old}.txt": receipt("Jane Doe", "jdoe", "29 Nov", {f"{old}_{nb}": nb}),
        f"{new}_{nb}": CORRECT, f"{new}.txt": receipt("Jane Doe", "jdoe", "30 Nov", {f"{new}_{nb}": nb}),
        f"{amy}_{first}": BUGGY, f"{amy}.txt": receipt("Amélie Ng", "amy_ng", "30 Nov", {f"{amy}_{first}": first}),
    })


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def csv_rows(path: Path) -> list[list[str]]:
    return list(csv.reader(path.read_text(encoding="utf-8").splitlines()))


# ---- each layout through batch and export, every student matched -------------------------------


def test_canvas_download_through_batch_and_export_with_every_student_matched(tmp_path: Path) -> None:
    roster = tmp_path / "canvas-gradebook.csv"
    roster.write_text(CANVAS_ROSTER, encoding="utf-8")
    out = tmp_path / "results"
    run = cli("batch", canvas_zip(tmp_path / "submissions.zip"), "--out", out, "--roster", roster, "--workers", "2")
    assert run.returncode == 0, run.stderr
    assert "source: zip of Canvas download, 3 submissions" in run.stdout
    scores = {r.student_id: r.score for r in SQLiteStore(out).results()}
    assert set(scores) == {"jdoe", "amy", "bob"}  # the roster's ids, not Canvas's file names
    assert scores["jdoe"] == 100 and scores["bob"] == 100 and (scores["amy"] or 0) < 100  # bob: the learner file
    run = cli("export", "--format", "canvas", out, "--canvas-assignment-id", "77")
    assert run.returncode == 0, run.stderr
    assert "3 students (3 graded, 0 invalid, 0 could not be graded, 0 missing)" in run.stdout
    rows = {r[1]: r for r in csv_rows(out / "exports" / "canvas.csv")[2:]}
    assert {i: float(r[5]) for i, r in rows.items()} == {"4321": 100.0, "4322": scores["amy"], "4323": 100.0}
    assert json.loads(next(v for k, v in SQLiteStore(out).meta().items() if k == "lms_ids"))["amy"]["late"] is True


def test_the_canvas_export_updates_the_rosters_own_assignment_column(tmp_path: Path) -> None:
    """Canvas's gradebook export names each assignment column "<name> (<id>)": the export takes the
    id of the column named like the assignment (a header without it makes a duplicate column), says
    when no column matches, and refuses an id that is not Canvas's."""
    roster = tmp_path / "canvas-gradebook.csv"
    roster.write_text(CANVAS_ROSTER.replace("Module 11 (77)", "Module 11: Embeddings (123456),Quiz 1 (555)")
                      .replace("S1,\r\n", "S1,,\r\n").replace("S2,\r\n", "S2,,\r\n")
                      .replace(",,,,,100\r\n", ",,,,,100,10\r\n"), encoding="utf-8")
    out = tmp_path / "results"
    zipped = make_zip(tmp_path / "s.zip", {"doejane_4321_99001_11_embeddings.ipynb": CORRECT})
    assert cli("batch", zipped, "--out", out, "--roster", roster).returncode == 0
    run = cli("export", "--format", "canvas", out, "--roster", roster)
    assert run.returncode == 0, run.stderr
    assert csv_rows(out / "exports" / "canvas.csv")[0][5] == "Module 11: Embeddings (123456)"
    assert "columns not used" not in run.stderr
    renamed = cli("export", "--format", "canvas", out, "--roster", roster, "--assignment-name", "Embeddings lab")
    assert renamed.returncode == 0 and "no assignment column of the Canvas roster is named 'Embeddings lab'" in \
        renamed.stderr and "Module 11: Embeddings (123456)" in renamed.stderr
    for bad in ("abc", "-5", "0", "12x"):
        refused = cli("export", "--format", "canvas", out, "--canvas-assignment-id", bad)
        assert refused.returncode == 2 and "is not a Canvas assignment id" in refused.stderr, bad
        assert "Traceback" not in refused.stderr


def test_canvas_export_without_a_roster_carries_the_downloads_user_id(tmp_path: Path) -> None:
    out = tmp_path / "results"
    zipped = make_zip(tmp_path / "s.zip", {"doejane_4321_99001_11_embeddings.ipynb": CORRECT})
    assert run_batch(zipped, out, workers=1).graded == 1
    assert cli("export", "--format", "canvas", out).returncode == 0
    rows = csv_rows(out / "exports" / "canvas.csv")
    assert rows[2][:2] == ["doejane", "4321"] and float(rows[2][5]) == 100  # Canvas matches the row by its ID


def test_moodle_download_maps_participant_ids_through_the_grading_worksheet(tmp_path: Path) -> None:
    roster = tmp_path / "worksheet.csv"
    roster.write_text(MOODLE_ROSTER, encoding="utf-8")
    out = tmp_path / "results"
    run = cli("batch", moodle_zip(tmp_path / "m.zip"), "--out", out, "--roster", roster, "--workers", "2")
    assert run.returncode == 0, run.stderr
    assert "Moodle download" in run.stdout
    scores = {r.student_id: r.score for r in SQLiteStore(out).results()}
    assert scores.keys() == {"jane@u.edu", "amy@u.edu"} and scores["jane@u.edu"] == 100  # identified by e-mail
    run = cli("export", "--format", "moodle", out)
    assert run.returncode == 0, run.stderr
    rows = {r[5]: r for r in csv_rows(out / "exports" / "moodle.csv")[1:]}
    assert rows["jane@u.edu"][6] == "100" and float(rows["amy@u.edu"][6]) < 100


def test_blackboard_download_latest_attempt_counts_and_usernames_map_to_student_ids(tmp_path: Path) -> None:
    roster = tmp_path / "gc.csv"
    roster.write_text(BLACKBOARD_ROSTER, encoding="utf-8")
    out = tmp_path / "results"
    run = cli("batch", blackboard_zip(tmp_path / "gradebook_Module11.zip"), "--out", out, "--roster", roster)
    assert run.returncode == 0, run.stderr
    assert "Blackboard download" in run.stdout and "the latest (2026-11-30 12:00:00) counts" in run.stdout
    rows = {r.student_id: r for r in SQLiteStore(out).results()}
    assert rows.keys() == {"S100", "S101"}  # amy_ng: the receipt's username holds an underscore
    assert rows["S100"].score == 100 and rows["S100"].submitted_at == "2026-11-30 12:00:00"
    assert not (out / "reports" / "attempts").exists()
    run = cli("export", "--format", "csv", out)
    assert run.returncode == 0 and "0 missing" in run.stdout


def test_keep_all_grades_every_attempt_but_the_latest_counts(tmp_path: Path) -> None:
    out = tmp_path / "results"
    outcome = run_batch(blackboard_zip(tmp_path / "b.zip"), out, workers=1, keep="all")
    assert outcome.graded == 2
    older = json.loads((out / "reports" / "attempts" / "jdoe" / "2026-11-29-10-00-00.json").read_text())
    assert older["score"] < 100
    assert {r.student_id: r.score for r in SQLiteStore(out).results()}["jdoe"] == 100
    again = run_batch(blackboard_zip(tmp_path / "b.zip"), out, workers=1, keep="all")
    assert (again.graded, again.skipped) == (0, 2)  # nothing changed: nothing graded, the attempt neither
    assert json.loads((out / "reports" / "attempts" / "jdoe" / "2026-11-29-10-00-00.json").read_text()) == older


# ---- discovery: each layout recognises its own files; ambiguity is an error naming the file ------


@pytest.mark.parametrize(("members", "layout", "ids"), [
    pytest.param({"doejane_LATE_4321_99001_x.ipynb": b"{}", "anon_Xy12Z_99002_11_embeddings.ipynb": b"{}",
                  "LATE_anon_Qq3_99003_embeddings.ipynb": b"{}"}, "Canvas download",
                 {"4321": True, "anon_Xy12Z": False, "anon_Qq3": True}, id="canvas-late-and-anonymous"),
    pytest.param({"doe-jane-late_4321_99001_x.ipynb": b"{}"}, "Canvas download", {"4321": True}, id="canvas-older"),
    pytest.param({"Jane Doe_1234567_assignsubmission_file_11_embeddings.ipynb": b"{}",
                  "Participant_1234568_assignsubmission_file_embeddings.ipynb": b"{}"}, "Moodle download",
                 {"1234567": False, "1234568": False}, id="moodle-no-folders"),
    pytest.param({"Jane Doe_1234567_assignsubmission_file_/11_embeddings.ipynb": b"{}"},
                 "Moodle download (a folder per student)", {"1234567": False}, id="moodle-3x-folders"),
], )
def test_each_layout_recognises_its_own_names(tmp_path: Path, members: dict[str, bytes], layout: str,
                                             ids: dict[str, bool]) -> None:
    found = discover(make_zip(tmp_path / "s.zip", members), tmp_path / "scratch")
    assert found.layout == f"zip of {layout}" and not found.ambiguous
    assert {e.student_id: e.late for e in found.entries} == ids


@pytest.mark.parametrize(("members", "named"), [
    pytest.param({"doejane_4321_99001_11_embeddings.ipynb": b"{}", "notes.ipynb": b"{}"}, "notes.ipynb",
                 id="stray-file-in-canvas"),
    pytest.param({"doejane_4321_99001_a.ipynb": b"{}", "doejane_4321_99002_b.ipynb": b"{}"}, "a.ipynb, ",
                 id="two-notebooks-one-submission"),
    pytest.param({"alice.ipynb": b"{}", "alice.py": b"# %%\n"}, "alice.ipynb, alice.py", id="flat-same-student"),
    pytest.param({"Jane Doe_1234567_assignsubmission_file/x.ipynb": b"{}", "loose.ipynb": b"{}"}, "loose.ipynb",
                 id="loose-file-beside-moodle-folders"),
])
def test_an_ambiguous_file_stops_the_batch_naming_it(tmp_path: Path, members: dict[str, bytes], named: str) -> None:
    found = discover(make_zip(tmp_path / "s.zip", members), tmp_path / "scratch")
    with pytest.raises(SubmissionError, match="ambiguous") as e:
        resolve(found, None)
    assert named in str(e.value) and "nothing was graded" in str(e.value)


def test_a_download_the_roster_cannot_map_stops_at_batch_time(tmp_path: Path) -> None:
    found = discover(canvas_zip(tmp_path / "s.zip"), tmp_path / "scratch")
    with pytest.raises(RosterError, match="cannot match a zip of Canvas download: it needs a Canvas ID column"):
        resolve(found, parse_roster("student_id,name\njdoe,Jane Doe\n"))


def test_a_download_id_missing_from_the_roster_is_reported_and_kept(tmp_path: Path) -> None:
    found = discover(canvas_zip(tmp_path / "s.zip"), tmp_path / "scratch")
    resolve(found, parse_roster(CANVAS_ROSTER.replace("4323", "9999")))
    assert {e.student_id for e in found.entries} == {"jdoe", "amy", "4323"}
    assert any("Canvas user 4323 (stonebob)" in p and "on no roster row" in p for p in found.problems)


# ---- a gradebook never zeroes anyone silently ----------------------------------------------------


def test_export_refuses_when_roster_students_have_no_result_and_results_match_no_one(tmp_path: Path) -> None:
    out = tmp_path / "results"
    assert run_batch(make_zip(tmp_path / "s.zip", {"doejane_4321_99001_11_embeddings.ipynb": CORRECT}), out,
                     workers=1).graded == 1  # graded without the roster: stored under Canvas's id
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name\njdoe,Jane Doe\n", encoding="utf-8")
    run = cli("export", "--format", "canvas", out, "--roster", roster)
    assert run.returncode == 1 and not (out / "exports" / "canvas.csv").exists()
    assert "1 roster student(s) have no result: jdoe" in run.stderr and "match no roster student: 4321" in run.stderr
    assert "--allow-unmatched" in run.stderr and "Traceback" not in run.stderr
    run = cli("export", "--format", "canvas", out, "--roster", roster, "--allow-unmatched")
    assert run.returncode == 0 and (out / "exports" / "canvas.csv").is_file()


@pytest.mark.parametrize(("content", "message"), [
    pytest.param(b"student_id,name\na1,Ann\na1,Ann Again\n", "student id 'a1' already on line 2", id="duplicate-ids"),
    pytest.param(b"name,section\nAnn,S1\n", "no student id column", id="no-id-column"),
    pytest.param("student_id,name\na1,Zoë\n".encode("latin-1"), "not UTF-8", id="encoding"),
    pytest.param(b"", "empty", id="empty-file"),
    pytest.param(b"student_id,name\n", "a header but no students", id="header-only"),
])
def test_batch_validates_the_roster_before_grading(tmp_path: Path, content: bytes, message: str) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_bytes(content)
    src = tmp_path / "src"
    src.mkdir()
    (src / "alice.ipynb").write_bytes(CORRECT)
    run = cli("batch", src, "--out", tmp_path / "r", "--roster", roster)
    assert run.returncode == 2 and message in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "r" / "results.sqlite").exists()


@pytest.mark.parametrize("as_zip", [False, True], ids=["folder", "zip"])
def test_an_empty_source_is_an_error_not_graded_0(tmp_path: Path, as_zip: bool) -> None:
    source = tmp_path / "empty"
    source.mkdir()
    (source / "readme.txt").write_text("nothing here")
    if as_zip:
        source = make_zip(tmp_path / "empty.zip", {})
    run = cli("batch", source, "--out", tmp_path / "r")
    assert run.returncode == 2 and "no submission to grade" in run.stderr and "Traceback" not in run.stderr


def test_canvas_re_uploads_the_newest_is_graded_and_the_others_are_named_and_kept(tmp_path: Path) -> None:
    """Canvas renames a re-upload name-1, name-2: the newest (by Canvas's attachment id, not by name
    sorting, which would pick -1) is graded; the batch output and the student's report say which,
    and --keep all writes the older ones to reports/attempts/."""
    source = make_zip(tmp_path / "s.zip", {
        "doejane_4321_99001_11_embeddings.ipynb": BUGGY,
        "doejane_4321_99007_11_embeddings-1.ipynb": BUGGY,
        "doejane_4321_99012_11_embeddings-2.ipynb": CORRECT,
    })
    found = discover(source, tmp_path / "scratch")
    resolve(found, parse_roster(CANVAS_ROSTER))
    [entry] = found.entries
    assert entry.student_id == "jdoe" and entry.path.name.endswith("11_embeddings-2.ipynb")
    assert [e.path.name for e in found.superseded] == ["doejane_4321_99001_11_embeddings.ipynb",
                                                      "doejane_4321_99007_11_embeddings-1.ipynb"]
    assert all(e.student_id == "jdoe" for e in found.superseded)
    [note] = [p for p in found.problems if "uploads of the notebook" in p]
    assert "graded 11_embeddings-2.ipynb, the newest by the LMS's upload ids" in note
    assert "left out 11_embeddings.ipynb, 11_embeddings-1.ipynb" in note
    out, roster = tmp_path / "results", tmp_path / "canvas-gradebook.csv"
    roster.write_text(CANVAS_ROSTER, encoding="utf-8")
    run = cli("batch", source, "--out", out, "--roster", roster, "--keep", "all")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "graded 11_embeddings-2.ipynb" in run.stdout + run.stderr
    report = json.loads((out / "reports" / "jdoe.json").read_text(encoding="utf-8"))
    assert report["score"] == report["max_score"] and any("left out" in n for n in report["extraction"]["notes"])
    attempts = sorted(p.name for p in (out / "reports" / "attempts" / "jdoe").iterdir())
    assert attempts == ["doejane_4321_99001_11_embeddings.json", "doejane_4321_99007_11_embeddings-1.json"]


def test_late_work_and_students_without_a_submission_reach_the_summary_feedback_and_export(tmp_path: Path) -> None:
    """Canvas's _LATE_ flag, and nbgrader's timestamp against --due-date, are shown where staff and
    the student look: the class summary, the student's feedback page and the plain CSV; a roster
    student who handed in nothing is a row of the summary, by name."""
    roster = tmp_path / "canvas-gradebook.csv"
    roster.write_text(CANVAS_ROSTER + '"Roe, Ray",4324,s4,ray,S2,\r\n', encoding="utf-8")
    out = tmp_path / "results"
    run = cli("batch", canvas_zip(tmp_path / "submissions.zip"), "--out", out, "--roster", roster, "--workers", "2")
    assert run.returncode == 0, run.stderr
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    students = {s["student_id"]: s for s in summary["students"]}
    assert {sid for sid, s in students.items() if s["late"]} == {"amy"} and summary["counts"]["late"] == 1
    assert students["ray"] == {"student_id": "ray", "name": "Roe, Ray", "status": "missing", "score": None,
                               "max_score": None, "late": False, "submitted_at": ""}
    page = (out / "summary.html").read_text(encoding="utf-8")
    assert "1 handed in late" in page and "no submission" in page and "Roe, Ray" in page
    assert "handed in after the due date" in (out / "feedback" / "amy.html").read_text(encoding="utf-8")
    assert "handed in after the due date" not in (out / "feedback" / "jdoe.html").read_text(encoding="utf-8")
    assert cli("export", "--format", "csv", out).returncode == 0
    rows = csv_rows(out / "exports" / "grades.csv")
    late = rows[0].index("late")
    assert {r[0]: r[late] for r in rows[1:]} == {"jdoe": "", "amy": "yes", "bob": "", "ray": ""}

    nbgrader = tmp_path / "course" / "submitted"
    for who, stamp in (("early", "2026-11-30 10:00:00"), ("tardy", "2026-12-02 08:00:00.123456 UTC")):
        (nbgrader / who / "embeddings").mkdir(parents=True)
        (nbgrader / who / "embeddings" / "embeddings.ipynb").write_bytes(CORRECT)
        (nbgrader / who / "embeddings" / "timestamp.txt").write_text(stamp + "\n", encoding="utf-8")
    out2 = tmp_path / "results2"
    assert cli("batch", nbgrader, "--out", out2, "--due-date", "2026-12-01").returncode == 0
    late2 = {s["student_id"]: s["late"] for s in json.loads((out2 / "summary.json").read_text())["students"]}
    assert late2 == {"early": False, "tardy": True}
