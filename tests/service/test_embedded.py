"""The embedded mode end to end: upload a notebook, wait, read the result (real grading)."""

from __future__ import annotations

import json

from tests.service.conftest import ROOT, SIN_EXPONENT_SCORE, SUBMISSIONS, Course


def test_upload_is_graded_and_the_student_reads_the_result(course: Course) -> None:
    r = course.upload("alice", SUBMISSIONS / "bug_sin_exponent.ipynb")
    assert r.status_code == 202, r.text
    sub = r.json()
    assert sub["status"] in ("queued", "grading", "graded") and len(sub["id"]) == 32
    assert course.wait(sub["id"], "alice")["status"] == "graded"
    result = course.result(sub["id"], "alice").json()["result"]
    assert result["status"] == "graded" and result["score"] == SIN_EXPONENT_SCORE and result["max_score"] == 100.0
    failed = [c for c in result["checks"] if c.get("status") == "failed"]
    golden = json.loads((ROOT / "tests" / "golden" / "bug_sin_exponent.ipynb.json").read_text())
    visible_failures = [c["id"] for c in golden["checks"] if c["status"] == "failed" and c["visibility"] == "visible"]
    assert [c["id"] for c in failed] == visible_failures and "Called:" in failed[0]["message"]


def test_the_same_file_again_is_the_same_submission(course: Course) -> None:
    first = course.upload("alice", SUBMISSIONS / "correct_tinytorch.ipynb").json()
    again = course.upload("alice", SUBMISSIONS / "correct_tinytorch.ipynb").json()
    other = course.upload("bob", SUBMISSIONS / "correct_tinytorch.ipynb").json()
    assert again["id"] == first["id"] and again["created"] is False
    assert other["id"] != first["id"]
    assert course.wait(first["id"], "alice")["status"] == "graded"
    staff_view = course.result(first["id"], "staff").json()
    assert len(staff_view["history"]) == 1  # graded once, not once per upload
