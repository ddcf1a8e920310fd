"""Course setup in the browser without a browser (fast): staff create a course and an assignment,
import a roster, download the students' sign-ins (CSV or a printable sheet) and give one student a
new sign-in; bad input gives the form back with the problem; CSRF and staff-only on every route.
tests/browser/test_staff_pages.py does the same flow in chromium."""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.service.conftest import Course, bearer, browser
from tests.service.test_web import csrf_of, sign_in, token_of

ROSTER = ("student_id,name,email\nann,Ann Lee,ann@example.edu\nben,\"=HYPERLINK(\"\"http://x\"\")\",ben@example.edu\n"
          "../up,Up Dir,up@example.edu\n")


def alert(html: str) -> str:
    found = re.search(r'role="alert"[^>]*>(.*?)</p>', html, re.S)
    return found.group(1) if found else ""


def staff_client(embedded: tuple[TestClient, str]) -> tuple[TestClient, str, dict[str, str]]:
    client, token = embedded
    return client, sign_in(client, token), bearer(token)


def new_course(client: TestClient, csrf: str, slug: str = "ml", title: str = "ML Systems") -> None:
    r = client.post("/staff/courses", data={"csrf": csrf, "slug": slug, "title": title}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/staff/courses/{slug}", r.text


def import_roster(client: TestClient, csrf: str, roster: str = ROSTER, slug: str = "ml") -> Any:
    return client.post(f"/staff/courses/{slug}/roster", data={"csrf": csrf},
                       files={"roster": ("class.csv", roster.encode(), "text/csv")})


def sign_ins(client: TestClient, csrf: str, who: str = "new", fmt: str = "csv", slug: str = "ml") -> Any:
    return client.post(f"/staff/courses/{slug}/sign-ins", data={"csrf": csrf, "who": who, "format": fmt})


def rows_of(csv_text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(csv_text)))


def test_staff_create_a_course_and_an_assignment_with_its_due_date_policy_and_rate_limit(
        embedded: tuple[TestClient, str]) -> None:
    client, csrf, staff = staff_client(embedded)
    home = client.get("/staff").text
    assert "through the API" not in home and 'href="/staff/courses"' in home
    new_course(client, csrf)
    assert [(c["slug"], c["title"]) for c in client.get("/api/courses", headers=staff).json()] == [("ml", "ML Systems")]
    assert 'href="/staff/courses/ml"' in client.get("/staff").text

    r = client.post("/staff/courses/ml/assignments", follow_redirects=False, data={
        "csrf": csrf, "slug": "m11", "module": "embeddings", "title": "Embeddings", "due": "2026-10-01T23:59",
        "total": "after_published", "published": "on",
        "check": ["", "embeddings/sin_values=hidden", "embeddings/grad_batch=after_due_date", "attention/sdpa_values=hidden"],
        "rate_count": "5", "rate_minutes": "30"})
    assert r.status_code == 303, r.text
    page = client.get(r.headers["location"]).text
    assert "Assignment m11 created" in page and 'href="/staff/c/ml/m11"' in page
    made = client.get("/api/courses/ml/assignments/m11", headers=staff).json()
    assert made["title"] == "Embeddings" and made["due_at"] == "2026-10-01T23:59:00+00:00" and made["published"]
    assert made["policy"] == {"checks": {"sin_values": "hidden", "grad_batch": "after_due_date"},
                              "total": "after_published"}
    assert made["rate_limit"] == {"count": 5, "window_s": 1800}
    assert client.get("/staff/c/ml/m11").status_code == 200  # its dashboard
    actions = [a["action"] for a in client.get("/api/audit", headers=staff).json()]
    assert {"create_course", "create_assignment"} <= set(actions)


@pytest.mark.parametrize(("form", "said"), [
    pytest.param({"slug": "ML Systems", "title": "ML"}, "Short name: use 1 to 64 lowercase", id="course-bad-slug"),
    pytest.param({"slug": "ml2", "title": "  "}, "Title:", id="course-empty-title"),
    pytest.param({"slug": "ml", "title": "Again"}, "exists already", id="course-twice"),
])
def test_a_bad_new_course_gives_the_form_back_with_the_problem(embedded: tuple[TestClient, str],
                                                                 form: dict[str, str], said: str) -> None:
    client, csrf, staff = staff_client(embedded)
    new_course(client, csrf)
    r = client.post("/staff/courses", data={"csrf": csrf} | form)
    assert 400 <= r.status_code < 500 and said in alert(r.text) and "Traceback" not in r.text
    assert f'value="{form["slug"]}"' in r.text  # what was typed stays in the form
    assert [c["slug"] for c in client.get("/api/courses", headers=staff).json()] == ["ml"]


@pytest.mark.parametrize(("form", "said"), [
    pytest.param({"slug": "M 11"}, "Short name: use 1 to 64 lowercase", id="bad-slug"),
    pytest.param({"slug": ""}, "Short name:", id="no-slug"),
    pytest.param({"slug": "m11", "due": "next friday"}, "is not a date and time", id="bad-date"),
    pytest.param({"slug": "m11", "rate_count": "-3"}, "Uploads allowed: Input should be greater than or equal to 1",
                 id="negative-rate-limit"),
    pytest.param({"slug": "m11", "rate_count": "ten"}, "Uploads allowed: write a whole number", id="rate-not-a-number"),
    pytest.param({"slug": "m11", "rate_minutes": "0"}, "Per how many minutes: from 1 to", id="zero-window"),
    pytest.param({"slug": "m11", "total": "sometimes"}, "Total score shown:", id="bad-visibility"),
    pytest.param({"slug": "m11", "check": "embeddings/no_such_check=hidden"}, "names checks the rubric does not have",
                 id="unknown-check"),
    pytest.param({"slug": "m11", "module": ""}, "Course module: choose which module the assignment grades",
                 id="no-module"),
    pytest.param({"slug": "m11", "module": "99_nothing"}, "no course module", id="unknown-module"),
    pytest.param({"slug": "m11", "title": "x" * 201}, "Title:", id="long-title"),
])
def test_a_bad_new_assignment_gives_the_course_page_back_with_the_problem(
        embedded: tuple[TestClient, str], form: dict[str, str], said: str) -> None:
    client, csrf, staff = staff_client(embedded)
    new_course(client, csrf)
    r = client.post("/staff/courses/ml/assignments", data={"csrf": csrf, "module": "embeddings"} | form)
    assert 400 <= r.status_code < 500 and said in alert(r.text).replace("&#39;", "'"), alert(r.text)
    assert "Traceback" not in r.text and 'id="new-assignment"' in r.text
    assert client.get("/api/courses/ml/assignments", headers=staff).json() == []


def test_an_assignment_twice_is_refused_on_the_page(embedded: tuple[TestClient, str]) -> None:
    client, csrf, _staff = staff_client(embedded)
    new_course(client, csrf)
    assert client.post("/staff/courses/ml/assignments", data={"csrf": csrf, "slug": "m11", "module": "embeddings"},
                       follow_redirects=False).status_code == 303
    r = client.post("/staff/courses/ml/assignments", data={"csrf": csrf, "slug": "m11", "module": "embeddings"})
    assert r.status_code == 409 and "exists already" in alert(r.text)


@pytest.mark.parametrize(("content", "said"), [
    pytest.param(b"", "Choose a roster CSV file", id="empty-file"),
    pytest.param(b"name,section\nAnn,1\n", "no student id column", id="no-id-column"),
    pytest.param(b"student_id,name\n", "a header but no students", id="no-rows"),
    pytest.param(b"student_id,name\n\xff\xfe,x\n", "not UTF-8", id="not-utf8"),
    pytest.param(b'student_id,name\nann,"unclosed\n', "not valid CSV", id="bad-quoting"),
])
def test_a_roster_that_cannot_be_used_gives_the_page_back_with_the_problem(
        embedded: tuple[TestClient, str], content: bytes, said: str) -> None:
    client, csrf, staff = staff_client(embedded)
    new_course(client, csrf)
    r = client.post("/staff/courses/ml/roster", data={"csrf": csrf}, files={"roster": ("class.csv", content)})
    assert 400 <= r.status_code < 500 and said in alert(r.text) and "Traceback" not in r.text
    assert client.get("/api/courses/ml/students", headers=staff).json() == []


def test_roster_import_then_the_sign_in_csv_whose_links_and_tokens_sign_each_student_in(
        embedded: tuple[TestClient, str]) -> None:
    client, csrf, staff = staff_client(embedded)
    new_course(client, csrf)
    r = import_roster(client, csrf)
    assert r.status_code == 200 and "2 new students" in r.text
    assert "line 4" in r.text and "not imported" in r.text  # the bad row is named, not dropped silently
    assert "<strong>2</strong> not yet handed a sign-in" in r.text
    assert [s["student_id"] for s in client.get("/api/courses/ml/students", headers=staff).json()] == ["ann", "ben"]

    r = sign_ins(client, csrf)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert r.headers["content-disposition"] == 'attachment; filename="ml-sign-ins.csv"'
    assert r.headers["cache-control"] == "no-store"
    assert r.text.splitlines()[0] == "student_id,name,email,token,link"
    rows = rows_of(r.text)
    assert [(row["student_id"], row["email"]) for row in rows] == [("ann", "ann@example.edu"), ("ben", "ben@example.edu")]
    assert rows[0]["name"] == "Ann Lee" and rows[1]["name"] == "'=HYPERLINK(\"http://x\")"  # never a formula
    for row in rows:
        assert row["token"].startswith("student_")
        assert row["link"] == f"http://testserver/signin#token={row['token']}"  # after '#': never sent to a server
        assert client.get("/api/me", headers=bearer(row["token"])).json() == {"kind": "student",
                                                                             "name": row["student_id"]}
    student = browser(client.app)
    sign_in(student, rows[0]["token"])
    assert student.get("/home").status_code == 200
    assert "<strong>0</strong> not yet handed a sign-in" in client.get("/staff/courses/ml").text

    # Nobody is left to hand out to: said so, and nobody's sign-in changes.
    r = sign_ins(client, csrf)
    assert r.status_code == 409 and "Every student has been handed a sign-in already" in alert(r.text)
    assert client.get("/api/me", headers=bearer(rows[0]["token"])).status_code == 200

    # A printable sheet for everyone: new sign-ins, and the earlier ones stop working.
    r = sign_ins(client, csrf, who="all", fmt="sheet")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    tokens = re.findall(r"<code data-token>(student_[\w-]+)</code>", r.text)
    assert len(tokens) == 2 and not {row["token"] for row in rows} & set(tokens)
    assert all(f'href="http://testserver/signin#token={t}"' in r.text for t in tokens)
    assert "Ann Lee" in r.text and "ben@example.edu" not in r.text  # the sheet: name, id, link, token
    for old in rows:
        assert client.get("/api/me", headers=bearer(old["token"])).status_code == 401
    assert all(client.get("/api/me", headers=bearer(t)).status_code == 200 for t in tokens)
    assert student.get("/home", follow_redirects=False).status_code == 303  # ann's browser is signed out


def test_reimporting_the_roster_keeps_the_sign_ins_handed_out(embedded: tuple[TestClient, str]) -> None:
    client, csrf, _staff = staff_client(embedded)
    new_course(client, csrf)
    import_roster(client, csrf)
    first = rows_of(sign_ins(client, csrf).text)
    r = import_roster(client, csrf, ROSTER + "cat,Cat Ng,cat@example.edu\n")
    assert r.status_code == 200 and "1 new students" in r.text and "<strong>1</strong> not yet" in r.text
    assert [row["student_id"] for row in rows_of(sign_ins(client, csrf).text)] == ["cat"]
    assert all(client.get("/api/me", headers=bearer(row["token"])).status_code == 200 for row in first)


def test_one_button_gives_one_student_a_new_sign_in_and_the_old_one_stops_working(course: Course) -> None:
    client = course.client
    csrf = sign_in(client, token_of(course.staff))
    page = client.get("/staff/courses/cs249").text
    assert page.count('action="/staff/courses/cs249/rotate"') == 2  # one button per student
    assert "<strong>0</strong> not yet handed a sign-in" in page  # the API's import handed them out
    alice = browser(client.app)
    sign_in(alice, token_of(course.students["alice"]))

    r = client.post("/staff/courses/cs249/rotate", data={"csrf": csrf, "student_id": "alice"})
    assert r.status_code == 200 and "New sign-in for Alice Liddell" in r.text
    (new,) = re.findall(r"<code data-token>(student_[\w-]+)</code>", r.text)
    assert f'href="http://testserver/signin#token={new}"' in r.text
    assert client.get("/api/me", headers=course.students["alice"]).status_code == 401
    assert client.get("/api/me", headers=bearer(new)).json()["name"] == "alice"
    assert client.get("/api/me", headers=course.students["bob"]).status_code == 200  # bob keeps his
    assert alice.get("/home", follow_redirects=False).status_code == 303  # her browser is signed out
    sign_in(alice, new)
    assert alice.get("/home").status_code == 200
    audit = client.get("/api/audit", headers=course.staff).json()
    assert (audit[0]["action"], audit[0]["target"], audit[0]["actor"]) == ("rotate_token", "cs249/alice", "admin")
    assert client.post("/staff/courses/cs249/rotate", data={"csrf": csrf, "student_id": "nobody"}).status_code == 404


def test_setup_forms_need_their_csrf_token_and_a_staff_sign_in(course: Course) -> None:
    client = course.client
    csrf = sign_in(client, token_of(course.staff))
    posts: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        ("/staff/courses", {"slug": "other", "title": "Other"}, {}),
        ("/staff/courses/cs249/assignments", {"slug": "m12", "module": "embeddings"}, {}),
        ("/staff/courses/cs249/roster", {}, {"files": {"roster": ("r.csv", b"student_id\nzed\n")}}),
        ("/staff/courses/cs249/sign-ins", {"who": "all", "format": "csv"}, {}),
        ("/staff/courses/cs249/rotate", {"student_id": "alice"}, {}),
    ]
    for url, form, extra in posts:
        assert client.post(url, data=form | {"csrf": "0" * 64}, **extra).status_code == 403, url
        assert client.post(url, data=form | {"csrf": csrf}, headers={"Origin": "https://evil.example"},
                           **extra).status_code == 403, url
    bob = browser(client.app)
    bob_csrf = sign_in(bob, token_of(course.students["bob"]))
    for url in ("/staff/courses", "/staff/courses/cs249"):
        r = bob.get(url)
        assert r.status_code == 403 and "Alice" not in r.text, url
    for url, form, extra in posts:
        r = bob.post(url, data=form | {"csrf": bob_csrf}, **extra)
        assert r.status_code == 403 and "student_" not in r.text, url
    anonymous = browser(client.app)
    r = anonymous.get("/staff/courses/cs249", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/signin")
    anonymous_csrf = csrf_of(anonymous.get("/signin").text)
    assert anonymous.post("/staff/courses/cs249/rotate", data={"csrf": anonymous_csrf, "student_id": "alice"}
                          ).status_code == 401
    # Nothing changed: no new course, assignment or student, and every sign-in still works.
    assert [c["slug"] for c in client.get("/api/courses", headers=course.staff).json()] == ["cs249"]
    assert [a["slug"] for a in client.get("/api/courses/cs249/assignments", headers=course.staff).json()] == ["m11"]
    assert len(client.get("/api/courses/cs249/students", headers=course.staff).json()) == 2
    assert all(client.get("/api/me", headers=h).status_code == 200 for h in course.students.values())


def test_a_rostered_name_is_escaped_on_the_setup_pages(embedded: tuple[TestClient, str]) -> None:
    client, csrf, _staff = staff_client(embedded)
    new_course(client, csrf, title="<b>Class</b>")
    xss = "<script>document.title='pwned'</script>"
    import_roster(client, csrf, f'student_id,name,email\neve,"Eve {xss}",e@example.edu\n')
    pages = [client.get("/staff/courses").text, client.get("/staff/courses/ml").text,
             sign_ins(client, csrf, fmt="sheet").text,
             client.post("/staff/courses/ml/rotate", data={"csrf": csrf, "student_id": "eve"}).text]
    for html in pages:
        assert "<b>Class</b>" not in html and xss not in html and "&lt;" in html
