"""What a student must not get: another student's result, a hidden check's detail, staff
endpoints, oversize or wrong uploads, or an oracle through unlimited submissions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from grader.results.database import Database
from grader.results.tables import Staff, Student
from tests.service.conftest import ROSTER, SUBMISSIONS, Course, bearer, make_course


def test_no_token_or_a_wrong_one_is_401(course: Course) -> None:
    assert course.client.get("/api/courses").status_code == 401
    assert course.client.get("/api/courses", headers=bearer("staff_guessed")).status_code == 401
    assert course.client.get("/api/courses", headers={"Authorization": "Basic eDp5"}).status_code == 401


def test_a_student_cannot_read_another_students_submission(course: Course) -> None:
    sid = course.upload("alice", SUBMISSIONS / "correct_tinytorch.ipynb").json()["id"]
    course.wait(sid, "alice")
    for path in ("", "/result", "/events"):
        r = course.client.get(f"/api/submissions/{sid}{path}", headers=course.students["bob"])
        assert r.status_code == 404, path  # the same answer as for an id that does not exist
    listed = course.client.get(f"{course.base}/submissions", headers=course.students["bob"]).json()
    assert listed == []
    r = course.client.post(f"{course.base}/submissions", headers=course.students["bob"], data={"student_id": "alice"},
                           files={"file": ("x.ipynb", (SUBMISSIONS / "correct_tinytorch.ipynb").read_bytes())})
    assert r.status_code == 404  # a student cannot submit in another's name


def test_a_student_never_sees_a_hidden_checks_detail(course: Course) -> None:
    sid = course.upload("alice", SUBMISSIONS / "bug_backward_overwrite.ipynb").json()["id"]
    course.wait(sid, "alice")
    staff = course.result(sid, "staff").json()
    hidden = next(c for c in staff["report"]["checks"] if c["visibility"] == "hidden")
    assert hidden["status"] == "failed" and hidden["detail"]  # staff see why
    mine = course.result(sid, "alice").json()["result"]
    seen = next(c for c in mine["checks"] if c["id"] == hidden["id"])
    assert seen == {"id": hidden["id"], "title": hidden["title"], "max_score": hidden["max_score"],
                    "visibility": "hidden", "released": False, "release": "never released to students"}
    text = json.dumps(mine)
    assert hidden["detail"] not in text and "detail" not in text and "history" not in text


@pytest.mark.parametrize("method, path", [
    ("get", "/api/courses"), ("post", "/api/courses"), ("get", "/api/courses/cs249/students"),
    ("post", "/api/courses/cs249/roster"), ("patch", "/api/courses/cs249/assignments/m11"),
    ("post", "/api/courses/cs249/assignments/m11/regrade"), ("get", "/api/courses/cs249/assignments/m11/stats"),
    ("get", "/api/courses/cs249/assignments/m11/export/csv"), ("get", "/api/audit"),
])
def test_staff_endpoints_refuse_students(course: Course, method: str, path: str) -> None:
    r = getattr(course.client, method)(path, headers=course.students["alice"])
    assert r.status_code == 403, r.text


def test_staff_actions_on_a_submission_refuse_students(course: Course) -> None:
    sid = course.upload("alice", SUBMISSIONS / "correct_tinytorch.ipynb").json()["id"]
    r = course.client.post(f"/api/submissions/{sid}/override", json={"score": 100, "reason": "mine"},
                           headers=course.students["alice"])
    assert r.status_code == 403
    assert course.client.post(f"/api/submissions/{sid}/regrade", headers=course.students["alice"]).status_code == 403


def test_a_student_of_another_course_sees_nothing_of_this_one(course: Course) -> None:
    course.client.post("/api/courses", json={"slug": "other", "title": "Other"}, headers=course.staff)
    r = course.client.post("/api/courses/other/roster", headers=course.staff,
                           files={"roster": ("r.csv", b"student_id\nmallory\n", "text/csv")})
    mallory = bearer(r.json()["credentials"][0]["token"])
    assert course.client.get("/api/courses/cs249/assignments", headers=mallory).status_code == 404
    r = course.client.post(f"{course.base}/submissions", headers=mallory,
                           files={"file": ("x.ipynb", (SUBMISSIONS / "correct_tinytorch.ipynb").read_bytes())})
    assert r.status_code == 404


@pytest.mark.parametrize("path", ["/api/submissions/../../etc", "/api/submissions/XYZ", "/api/submissions/" + "a" * 33,
                                  "/api/courses/Bad Slug/assignments", "/api/courses/cs249/assignments/%2e%2e"])
def test_ids_are_validated(course: Course, path: str) -> None:
    assert course.client.get(path, headers=course.staff).status_code in (404, 422)


def test_uploads_are_checked_like_grader_grade(course: Course, tmp_path: Path) -> None:
    wrong_type = course.upload("alice", SUBMISSIONS / "correct_tinytorch.ipynb", name="solution.exe")
    assert wrong_type.status_code == 422 and "unsupported file type" in wrong_type.json()["detail"]
    not_json = course.upload("alice", SUBMISSIONS / "correct_tinytorch.ipynb", name="a.ipynb", content=b"{nope")
    assert not_json.status_code == 422
    huge = course.upload("alice", SUBMISSIONS / "correct_tinytorch.ipynb", content=b" " * (5 * 2**20 + 10))
    assert huge.status_code == 413 and "limit" in huge.json()["detail"]
    hostile = course.upload("alice", SUBMISSIONS / "correct_tinytorch.ipynb", name="../../evil\x1b[31m.ipynb")
    assert hostile.status_code == 202 and hostile.json()["file_name"] == "submission.ipynb"
    listed = course.client.get(f"{course.base}/submissions", headers=course.students["alice"]).json()
    assert len(listed) == 1  # refused uploads leave nothing behind


def test_the_rate_limit_stops_an_oracle(embedded: tuple[TestClient, str], tmp_path: Path) -> None:
    client, token = embedded
    course = make_course(client, token, rate_limit={"count": 2, "window_s": 3600})
    source = (SUBMISSIONS / "correct_source.py").read_bytes()
    for n in range(2):
        assert course.upload("alice", SUBMISSIONS / "x.py", content=source + f"# {n}\n".encode()).status_code == 202
    again = course.upload("alice", SUBMISSIONS / "x.py", content=source + b"# 0\n")
    assert again.status_code == 202 and again.json()["created"] is False  # an earlier file: not a new grading
    refused = course.upload("alice", SUBMISSIONS / "x.py", content=source + b"# 3\n")
    assert refused.status_code == 429 and 3500 < int(refused.headers["retry-after"]) <= 3601
    assert course.upload("bob", SUBMISSIONS / "x.py", content=source + b"# 3\n").status_code == 202  # per student


def test_credentials_are_stored_hashed(course: Course, settings: object) -> None:
    db = Database(course.client.app.state.settings.database_url)  # type: ignore[attr-defined]
    tokens = [h["Authorization"].split()[1] for h in (course.staff, *course.students.values())]
    stored = db.run(lambda s: [r.token_hash for r in s.query(Staff)] + [r.token_hash for r in s.query(Student)])
    db.dispose()
    assert len(stored) == 3 and not set(tokens) & set(stored)
    assert all(len(h) == 64 for h in stored)
    assert ROSTER  # the roster the credentials came from


@pytest.mark.parametrize("rubric", [
    "schema_version = 1\na = " + "[" * 50_000 + "]" * 50_000,  # RecursionError in tomllib
    "schema_version = 1\na = " + "{b = " * 5_000 + "1" + "}" * 5_000,
    "schema_version = 1\n" + ".".join(["a"] * 50_000) + " = 1",  # parses, but nests 50 000 tables deep
    "schema_version = 1\na = " + "[" * 40 + "]" * 40,
])
def test_a_rubric_nested_too_deeply_is_a_422_not_a_500(course: Course, rubric: str) -> None:
    for r in (course.client.post("/api/courses/cs249/assignments", headers=course.staff,
                                 json={"slug": "deep", "rubric_toml": rubric}),
              course.client.patch(course.base, headers=course.staff, json={"rubric_toml": rubric})):
        assert r.status_code == 422 and "nests tables or arrays too deeply (at most 32 levels)" in r.text, r.text[:500]


@pytest.mark.parametrize("body", [
    '{"slug": "deep", "policy": ' + "[" * 100_000 + "]" * 100_000 + "}",
    '{"slug": "deep", "title": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "}",
    '{"slug": "deep", "policy": {"checks": ' + "[" * 40 + "]" * 40 + "}}",
])
def test_a_json_body_nested_too_deeply_is_a_422_that_says_so(course: Course, body: str) -> None:
    headers = course.staff | {"Content-Type": "application/json"}
    r = course.client.post("/api/courses/cs249/assignments", headers=headers, content=body)
    assert r.status_code == 422, r.text[:500]
    assert r.json()["detail"] == [{"loc": ["body"], "msg": "the JSON body nests arrays or objects more than 32 "
                                                           "levels deep"}]
    # brackets inside strings are text, not nesting
    r = course.client.post("/api/courses/cs249/assignments", headers=course.staff,
                           json={"slug": "brackets", "title": "[" * 100 + '\\"{' * 20})
    assert r.status_code == 201, r.text
