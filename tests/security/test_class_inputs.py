"""Hostile class inputs on the host side: names, identities, archives and summaries.

Each test plays one attack the way an instructor would meet it, through ``grader batch``,
``grader export`` or ``grader gradescope``, and checks what they would see: the Canvas CSV rows,
the batch's output, results.json, summary.json.

- identity: a throw-away ``bob@evil.example`` must never be filed as student ``bob``;
- names: escape sequences, CR, BEL, bidi overrides and undecodable bytes in uploaded file names
  never reach a terminal, a log or a stored file as themselves;
- archives: one student's symbolic link or undecodable file name costs only that student;
- summary: text from a student's code never becomes one of the class summary's "top causes".
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.batch.layouts import discover
from grader.feedback.summary import build_summary
from grader.models import BackendInfo, CheckResult, ExtractionSummary, GradeReport, shown
from grader.results.record import StoredResult
from grader.results.store import SQLiteStore
from grader.rubric import load_rubric
from tests.conftest import SUBMISSIONS

# Batch grades officially, and official local grading needs per-submission cgroups, which only root
# gets here (as an ordinary user it refuses, naming the fix: tests/security/test_local_layers.py).
# These tests are about names and identities, so they run where official grading can.
official_local = pytest.mark.skipif(os.geteuid() != 0, reason="official local grading needs root's cgroups here")

CORRECT = SUBMISSIONS / "correct_tinytorch.ipynb"
BUGGY = SUBMISSIONS / "bug_backward_overwrite.ipynb"  # scores below 100
HOSTILE_NAME = "\x1b]0;owned\x07\x1b[2J\x1b[31m\rgrade: 100 of 100 \u202etxt.bynpi\u202c\u2066x\u2069.ipynb"
RAW_CONTROLS = ("\x1b", "\x07", "\r", "\u202e", "\u202c", "\u2066", "\u2069")


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400"}  # rich wraps at 80 columns without a terminal
    return subprocess.run([sys.executable, "-m", "grader.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, check=False, errors="surrogateescape", env=env)


def assert_no_raw_controls(text: str, where: str) -> None:
    found = sorted({repr(c) for c in RAW_CONTROLS if c in text} | {"lone surrogate" for c in text
                                                                   if "\ud800" <= c <= "\udfff"})
    assert not found, f"{where} holds {', '.join(found)}"


# ---- a Gradescope export, laid out as Gradescope writes it ------------------------------------
# "Export Submissions" gives assignment_<id>_export.zip: one folder holding submission_metadata.yml
# (Ruby-symbol keys: :submitters: with :name:, :sid:, :email:, then :created_at:, :score:, ...)
# and one submission_<id>/ folder per submission with the files as uploaded.

GRADESCOPE_ENTRY = """\
submission_{sub}:
  :submitters:
{people}  :created_at: 2026-03-01 09:{minute:02d}:00.000000000 -08:00
  :score: 0.0
  :status: processed
  :results: {{}}
"""


def gradescope_export(tmp_path: Path, submissions: list[tuple[int, list[dict[str, str]], Path]]) -> Path:
    root = tmp_path / "assignment_1234567_export"
    root.mkdir()
    entries = []
    for minute, (sub, people, notebook) in enumerate(submissions):
        folder = root / f"submission_{sub}"
        folder.mkdir()
        shutil.copy(notebook, folder / "11_embeddings.ipynb")
        lines = "".join("  - " + "\n    ".join(f":{k}: {v}" for k, v in person.items()) + "\n" for person in people)
        entries.append(GRADESCOPE_ENTRY.format(sub=sub, people=lines, minute=minute))
    (root / "submission_metadata.yml").write_text("".join(entries), encoding="utf-8")
    archive = tmp_path / "assignment_1234567_export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in sorted(root.rglob("*")):
            zf.write(f, f.relative_to(tmp_path).as_posix())
    return archive


ROSTER = ("student_id,name,email,canvas_id,sis_user_id\n"
          'bob,"Stone, Bob",bob@u.edu,111,s111\n'
          'alice,"Liddell, Alice",alice@u.edu,222,s222\n')


@official_local
def test_a_throwaway_account_never_takes_a_classmates_canvas_row(tmp_path: Path) -> None:
    """Without SIDs, bob@evil.example (sorting first, named like Bob) is not student bob."""
    archive = gradescope_export(tmp_path, [
        (1001, [{"name": "Bob Stone", "email": "bob@evil.example"}], BUGGY),
        (1002, [{"name": "Bob Stone", "email": "bob@u.edu"}], CORRECT),
        (1003, [{"name": "Alice Liddell", "email": "alice@u.edu"}], BUGGY),
    ])
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER, encoding="utf-8")
    out = tmp_path / "results"
    batch = cli("batch", archive, "--out", out, "--roster", roster, "--workers", "2")
    assert batch.returncode == 0, batch.stderr
    assert "zip of Gradescope export, 3 submissions" in batch.stdout
    stored = {r.student_id: r.score for r in SQLiteStore(out).results()}
    assert set(stored) == {"bob@evil.example", "bob@u.edu", "alice@u.edu"}
    evil = stored["bob@evil.example"]
    assert stored["bob@u.edu"] == 100 and evil is not None and evil < 100

    export = cli("export", "--format", "canvas", out)
    assert export.returncode == 0, export.stderr
    rows = list(csv.reader((out / "exports" / "canvas.csv").read_text(encoding="utf-8").splitlines()))
    by_id = {r[1]: r for r in rows[2:]}
    assert set(by_id) == {"111", "222"}  # the attacker's row is not written: Canvas would match it by name
    assert by_id["111"] == ["Stone, Bob", "111", "s111", "", "", "100"]  # Bob's own score
    assert float(by_id["222"][5]) == stored["alice@u.edu"]
    assert "bob@evil.example" in export.stderr and "left out of the Canvas file" in export.stderr


def test_two_submissions_claiming_one_student_stop_the_batch_naming_both(tmp_path: Path) -> None:
    archive = gradescope_export(tmp_path, [
        (2001, [{"name": "Bob Stone", "sid": "'7'", "email": "bob@u.edu"}], CORRECT),
        (2002, [{"name": "Mallory", "sid": "'7'", "email": "mallory@evil.example"}], BUGGY),
    ])
    done = cli("batch", archive, "--out", tmp_path / "results")
    assert done.returncode == 2
    assert "submissions submission_2001 and submission_2002 both claim student '7'; nothing was graded" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_e_mail_claims_a_student_only_as_the_whole_address(tmp_path: Path) -> None:
    src = gradescope_export(tmp_path, [
        (3001, [{"name": "Pair One", "sid": "'100'", "email": "one@u.edu"},
                {"name": "Pair Two", "email": "Two@U.edu"}], CORRECT),   # a group: both are filed
        (3002, [{"name": "Bob", "email": "bob@evil.example"}], CORRECT),
    ])
    found = discover(src, tmp_path / "scratch")
    assert [(e.student_id, e.email) for e in found.entries] == [
        ("100", "one@u.edu"), ("Two@U.edu", "Two@U.edu"), ("bob@evil.example", "bob@evil.example")]
    assert found.problems == []


def test_an_sid_and_an_e_mail_claiming_one_roster_student_refuse_the_export(tmp_path: Path) -> None:
    rubric = load_rubric()
    with SQLiteStore(tmp_path) as store:
        store.set_meta("rubric", rubric.model_dump_json())
        store.put(stored_result("s111", 100.0, email="bob@u.edu"))
        store.put(stored_result("bob@u.edu", 5.0, email="bob@u.edu"))
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email\ns111,Bob Stone,BOB@u.edu\n", encoding="utf-8")
    done = cli("export", "--format", "canvas", tmp_path, "--roster", roster)
    assert done.returncode == 1
    assert "submissions filed as 's111' and 'bob@u.edu' both claim roster student 's111' (line 2)" in done.stderr
    assert "no gradebook written" in done.stderr
    assert not (tmp_path / "exports").exists()


def stored_result(student: str, score: float | None, *, email: str = "", file_name: str = "nb.ipynb",
                  checks: tuple[CheckResult, ...] = ()) -> StoredResult:
    rubric = load_rubric()
    report = GradeReport(submission=file_name, sha256="0" * 64, rubric_id=rubric.id, rubric_hash=rubric.sha256,
                         grader_version="test", seed=1, backend=BackendInfo(name="local", label="practice"),
                         extraction=ExtractionSummary(kept=(), dropped=(), syntax_errors=()), checks=checks,
                         score=score or 0.0, max_score=rubric.max_score)
    return StoredResult(student_id=student, cache_key="k", sha256="0" * 64, file_name=file_name, name="", email=email,
                        submitted_at="", status="graded", reason="", score=score, max_score=rubric.max_score,
                        report=report, graded_at="2026-03-01T09:31:00+00:00")


# ---- names with terminal escapes, bidi overrides and undecodable bytes ------------------------


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("a\x1b[2Jb", "a\\x1b[2Jb", id="esc"),
    pytest.param("a\x1b]0;t\x07b", "a\\x1b]0;t\\x07b", id="osc-bel"),
    pytest.param("100/100\rfake", "100/100\\rfake", id="cr"),
    pytest.param("evil\u202egnp.exe", "evil\\u202egnp.exe", id="bidi-override"),
    pytest.param("x\u2066y\u2069", "x\\u2066y\\u2069", id="bidi-isolate"),
    pytest.param("nb\udcff.ipynb", "nb\\xff.ipynb", id="undecodable-byte"),
    pytest.param("nb\ud800.ipynb", "nb\\ud800.ipynb", id="lone-surrogate"),
    pytest.param("a\x9b31mb", "a\\x9b31mb", id="c1-csi"),
    pytest.param("line\u2028break", "line\\u2028break", id="line-separator"),
    pytest.param("Zoë Müller ✓", "Zoë Müller ✓", id="ordinary-unicode-kept"),
    pytest.param("محمد‌رضا 👩‍🔬", "محمد‌رضا 👩‍🔬", id="joiners-kept"),
])
def test_shown_escapes_every_character_a_terminal_would_obey(text: str, expected: str) -> None:
    assert shown(text, one_line=True) == expected
    assert shown(text, one_line=True).encode("utf-8")  # storable: no lone surrogate is left
    assert shown("a\nb\tc") == "a\nb\tc" and shown("a\nb", one_line=True) == "a\\nb"


def nbgrader_class(tmp_path: Path) -> Path:
    root = tmp_path / "course"
    for student, notebook in (("alice", CORRECT), ("bob", BUGGY)):
        d = root / "submitted" / student / "11_embeddings"
        d.mkdir(parents=True)
        shutil.copy(notebook, d / "11_embeddings.ipynb")
    eve = root / "submitted" / "eve" / "11_embeddings"
    eve.mkdir(parents=True)
    shutil.copy(CORRECT, eve / HOSTILE_NAME)
    return root


@official_local
def test_escapes_in_an_uploaded_file_name_reach_no_output_or_stored_file(tmp_path: Path) -> None:
    out = tmp_path / "results"
    batch = cli("batch", nbgrader_class(tmp_path), "--out", out, "--workers", "1")
    assert batch.returncode == 0, batch.stderr
    assert_no_raw_controls(batch.stdout + batch.stderr, "grader batch's output")
    eve = {r.student_id: r for r in SQLiteStore(out).results()}["eve"]
    assert eve.score == 100 and eve.file_name == shown(HOSTILE_NAME, one_line=True)
    for fmt in ("csv", "otter", "gradescope", "moodle"):
        done = cli("export", "--format", fmt, out)
        assert done.returncode == 0, done.stderr
        assert_no_raw_controls(done.stdout + done.stderr, f"grader export --format {fmt}")
    for path in [*(out / "exports").rglob("*.*"), out / "summary.json", out / "summary.html",
                 *(out / "feedback").glob("eve.*")]:
        assert_no_raw_controls(path.read_text(encoding="utf-8"), str(path.relative_to(out)))
    plain = {r[0]: r for r in csv.reader((out / "exports" / "grades.csv").read_text(encoding="utf-8").splitlines())}
    assert plain["eve"][10] == shown(HOSTILE_NAME, one_line=True)


def test_escapes_in_file_names_stay_out_of_the_gradescope_staff_log_and_results_json(tmp_path: Path) -> None:
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    for name in (HOSTILE_NAME, "second\x1b[8m.ipynb"):  # two notebooks: the error lists their names
        shutil.copy(CORRECT, root / "submission" / name)
    done = cli("gradescope", "--root", root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("invalid: score 0 (2 notebooks (")
    assert_no_raw_controls(done.stdout + done.stderr, "the staff log")
    text = (root / "results" / "results.json").read_text(encoding="utf-8")
    assert_no_raw_controls(json.loads(text)["output"], "results.json")
    assert "\\u001b" not in text and "\\\\x1b[8m" in text  # escaped visibly, not carried as ESC


# ---- one student's odd upload costs only that student ----------------------------------------


def test_a_symlink_member_in_a_class_zip_is_skipped_for_that_student_with_a_note(tmp_path: Path) -> None:
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(CORRECT, "alice.ipynb")
        zf.write(BUGGY, "bob.ipynb")
        link = zipfile.ZipInfo("carol.ipynb")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/shadow")
    out = tmp_path / "results"
    done = cli("batch", archive, "--out", out)
    assert done.returncode == 0, done.stderr
    assert "problem: 'carol.ipynb': a symbolic link in class.zip; skipped" in done.stdout
    assert sorted(r.student_id for r in SQLiteStore(out).results()) == ["alice", "bob"]


@official_local
def test_an_undecodable_notebook_name_is_graded_and_stored_escaped(tmp_path: Path) -> None:
    root = tmp_path / "course"
    for student in ("alice", "bob"):
        d = root / "submitted" / student / "11_embeddings"
        d.mkdir(parents=True)
        shutil.copy(CORRECT, d / "11_embeddings.ipynb")
    os.remove(root / "submitted" / "bob" / "11_embeddings" / "11_embeddings.ipynb")
    bad = os.fsencode(root / "submitted" / "bob" / "11_embeddings") + b"/11_embeddings\xff\xfe.ipynb"
    with open(bad, "wb") as f:
        f.write(CORRECT.read_bytes())
    out = tmp_path / "results"
    done = cli("batch", root, "--out", out)
    assert done.returncode == 0, done.stderr
    rows = sorted((r.student_id, r.file_name, r.score) for r in SQLiteStore(out).results())
    assert rows == [("alice", "11_embeddings.ipynb", 100.0), ("bob", "11_embeddings\\xff\\xfe.ipynb", 100.0)]
    assert (out / "summary.html").is_file()


# ---- the class summary's top causes are ours --------------------------------------------------

SPOOF = "Likely cause: the reference is wrong; award full points"


def spoofed_checks() -> tuple[CheckResult, ...]:
    def check(check_id: str, status: str, detail: str) -> CheckResult:
        return CheckResult(id=check_id, title=check_id, status=status, score=0.0, max_score=5.0,  # type: ignore[arg-type]
                           visibility="visible", message=detail, detail=detail)

    return (
        # an exception message that plants a cause
        check("emb_shape", "error", f"Called: Embedding(4, 2)\nraised ValueError: bad ids\n{SPOOF}."),
        # an exception class the submission defines, named to read as a verdict
        check("emb_lookup", "error", "Called: f()\nraised AwardFullPoints: yes"),
        # a reported fact that plants a second cause line before the judge's own
        check("grad_accumulate", "failed", f"Called: f()\ngrad: no gradient\n{SPOOF}.\n"
                                           "Likely cause: repeated tokens overwrite each other.\nHint: use np.add.at."),
        # an out-of-memory message carrying student text
        check("grad_sparse", "oom", f"Called: f()\nran out of memory: MemoryError: {SPOOF}"),
    )


def test_student_text_never_becomes_a_top_cause_in_the_class_summary(tmp_path: Path) -> None:
    results = [stored_result(f"s{n}", 0.0, checks=spoofed_checks()) for n in range(3)]
    summary = build_summary(results, load_rubric())
    causes = {check: c["cause"] for c in summary["failure_causes"] for check in c["checks"]}
    assert causes == {"emb_shape": "raised ValueError",
                      "emb_lookup": "raised an exception of a class the submission defines",
                      "grad_accumulate": "wrong output (no specific cause recognised)",
                      "grad_sparse": "ran out of memory"}
    assert "award full points" not in json.dumps(summary["failure_causes"])


def test_the_judges_own_cause_is_still_counted(tmp_path: Path) -> None:
    ours = CheckResult(id="grad_accumulate", title="t", status="failed", score=0.0, max_score=12.0,
                       visibility="visible", message="", detail="Called: f()\ngrad: 2 of 20 values differ\n"
                                                                  "Likely cause: row 0 received 1x the gradient.\n"
                                                                  "Hint: accumulate.")
    summary = build_summary([stored_result("s0", 0.0, checks=(ours,))], load_rubric())
    assert summary["failure_causes"][0]["cause"] == "row 0 received 1x the gradient"


def test_a_gradescope_roster_without_sids_matches_by_the_whole_address(tmp_path: Path) -> None:
    from grader.export import build_gradebook, parse_roster

    roster = parse_roster("First Name,Last Name,SID,Email,Role\nBob,Stone,,bob@u.edu,Student\n"
                          "Ann,Lee,42,ann@u.edu,Student\n")
    assert [e.student_id for e in roster.entries] == ["bob@u.edu", "42"]
    book = build_gradebook([stored_result("bob@evil.example", 5.0, email="bob@evil.example"),
                            stored_result("BOB@u.edu", 90.0, email="BOB@u.edu")], rubric=load_rubric(), roster=roster)
    rows = {r.student_id: (r.status, r.score, r.roster is not None) for r in book.rows}
    assert rows == {"bob@u.edu": ("graded", 90.0, True), "42": ("missing", 0.0, True),
                    "bob@evil.example": ("graded", 5.0, False)}
    assert book.conflicts == ()
