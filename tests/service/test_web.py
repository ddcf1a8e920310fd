"""The web pages without a browser (fast): sessions, CSRF, headers, who may see which page, the
release policy on the student's page, and escaping. The browser tests (tests/browser) cover the
same pages in chromium."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from grader.models import CodeCell
from grader.service.web.code import excerpt, excerpts_for, named_targets
from grader.service.web.sessions import read_session, session_value
from tests.service.conftest import EMBEDDINGS_RUBRIC, SUBMISSIONS, Course, browser, make_course

XSS = "<script>document.title='pwned'</script>"


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)


def sign_in(client: TestClient, token: str) -> str:
    """Sign the client's cookie jar in; returns the CSRF token of its forms (bound to the session)."""
    csrf = csrf_of(client.get("/signin").text)
    r = client.post("/signin", data={"token": token, "csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303, r.text
    return csrf_of(client.get("/signin").text)


def token_of(header: dict[str, str]) -> str:
    return header["Authorization"].split()[1]


def graded(course: Course, who: str, notebook: str) -> str:
    r = course.upload(who, SUBMISSIONS / notebook)
    assert r.status_code == 202, r.text
    course.wait(r.json()["id"], who)
    return str(r.json()["id"])


def test_sign_in_sets_a_session_cookie_that_is_httponly_samesite_and_holds_no_token(course: Course) -> None:
    client = course.client
    csrf = csrf_of(client.get("/signin").text)
    token = token_of(course.students["alice"])
    r = client.post("/signin", data={"token": token, "csrf": csrf}, follow_redirects=False)
    cookie = next(v for k, v in r.headers.multi_items() if k == "set-cookie" and v.startswith("grader_session="))
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Secure" not in cookie  # plain HTTP here
    assert token not in cookie and token[8:24] not in cookie
    assert client.get("/home").status_code == 200


def test_cookies_are_secure_behind_tls(settings: Any) -> None:
    """Over TLS the cookies are Secure and __Host- prefixed (Path=/, no Domain), so that no other
    site, a sibling subdomain included, can set them."""
    from grader.service.app import create_app

    printed: list[str] = []
    with browser(create_app(settings, announce=printed.append), base_url="https://grader.example") as client:
        page = client.get("/signin")
        assert page.headers["set-cookie"].startswith("__Host-grader_csrf=")
        r = client.post("/signin", data={"token": printed[0].rsplit(" ", 1)[1], "csrf": csrf_of(page.text)},
                        follow_redirects=False)
        cookies = [v for k, v in r.headers.multi_items() if k == "set-cookie"]
        assert cookies and all("Secure" in c and "HttpOnly" in c for c in cookies)
        assert all(c.startswith("__Host-") and "Path=/;" in c + ";" and "domain" not in c.lower() for c in cookies)
        assert client.get("/staff").status_code == 200  # read back by its prefixed name
        value = client.cookies["__Host-grader_session"]
        plain = browser(client.app, base_url="https://grader.example", cookies={"grader_session": value})
        assert plain.get("/staff", follow_redirects=False).status_code == 303  # an unprefixed one is not read


def test_a_wrong_token_is_refused_with_a_page_not_a_traceback(course: Course) -> None:
    csrf = csrf_of(course.client.get("/signin").text)
    r = course.client.post("/signin", data={"token": "student_nope", "csrf": csrf})
    assert r.status_code == 401 and "not known" in r.text and "grader_session" not in r.headers.get("set-cookie", "")


def test_every_form_post_needs_its_csrf_token(course: Course) -> None:
    client = course.client
    csrf = sign_in(client, course.staff["Authorization"].split()[1])
    sub = graded(course, "alice", "correct_tinytorch.ipynb")
    posts = [("/signout", {}), (f"/staff/s/{sub}/regrade", {}), ("/staff/c/cs249/m11/regrade", {}),
             (f"/staff/s/{sub}/override", {"score": "1", "reason": "because"})]
    for url, form in posts:
        assert client.post(url, data=form | {"csrf": "0" * 64}).status_code == 403, url
        assert client.post(url, data=form | {"csrf": csrf}, headers={"Origin": "https://evil.example"}
                           ).status_code == 403, url
    assert client.post("/signin", data={"token": token_of(course.students["alice"]), "csrf": "x"}).status_code == 403
    student = browser(client.app)
    student_csrf = sign_in(student, token_of(course.students["bob"]))
    r = student.post("/c/cs249/m11/upload", data={"csrf": student_csrf[::-1]},
                     files={"file": ("nb.ipynb", (SUBMISSIONS / "correct_tinytorch.ipynb").read_bytes())})
    assert r.status_code == 403
    # Nothing changed: no override, no new grading, no upload by bob.
    assert course.client.get(f"/api/submissions/{sub}/result", headers=course.staff).json()["overrides"] == []
    assert course.client.get(f"{course.base}/submissions", headers=course.students["bob"]).json() == []


def test_pages_carry_a_csp_without_inline_script_and_no_inline_script_or_style(course: Course) -> None:
    sign_in(course.client, token_of(course.students["alice"]))
    sub = graded(course, "alice", "bug_sin_cos_swapped.ipynb")
    for url in ("/signin", "/home", "/c/cs249/m11", f"/s/{sub}"):
        r = course.client.get(url)
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["cache-control"] == "no-store"
        assert re.search(r"<script(?![^>]*\bsrc=)", r.text) is None, url  # every script is a file
        assert " style=" not in r.text and "<style" not in r.text, url  # every style is a file too
        assert re.search(r"<[^>]+\son[a-z]+=", r.text) is None, url  # no event-handler attributes


def test_a_student_reaches_neither_anothers_pages_nor_staff_pages(course: Course) -> None:
    alices = graded(course, "alice", "bug_sin_cos_swapped.ipynb")
    bob = browser(course.client.app)
    sign_in(bob, token_of(course.students["bob"]))
    for url in (f"/s/{alices}", f"/s/{alices}/events"):
        assert bob.get(url).status_code == 404, url
    for url in ("/staff", "/staff/c/cs249/m11", f"/staff/s/{alices}", "/staff/c/cs249/m11/export/canvas"):
        r = bob.get(url)
        assert r.status_code == 403 and "Alice" not in r.text and "sin_values" not in r.text, url
    assert bob.get("/c/cs249/m11/compare", params={"a": alices, "b": alices}).status_code == 404
    anonymous = browser(course.client.app)
    r = anonymous.get(f"/s/{alices}", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/signin")


def test_a_forged_or_expired_session_or_a_rotated_token_signs_out() -> None:
    secret = b"k" * 32
    value = session_value(secret, "student", 7, "ab" * 32)
    assert read_session(secret, value) is not None
    assert read_session(b"other", value) is None
    assert read_session(secret, value.replace("student.7", "staff.7")) is None
    assert read_session(secret, session_value(secret, "student", 7, "ab" * 32, now=time.time() - 13 * 3600)) is None


def test_rotating_a_students_token_ends_their_browser_sessions(course: Course) -> None:
    alice = browser(course.client.app)
    sign_in(alice, token_of(course.students["alice"]))
    assert alice.get("/home").status_code == 200
    r = course.client.post("/api/courses/cs249/roster", params={"rotate": "true"}, headers=course.staff,
                           files={"roster": ("r.csv", b"student_id,name,email\nalice,Alice,a@example.edu\n")})
    assert r.status_code == 200
    assert alice.get("/home", follow_redirects=False).status_code == 303


def test_the_student_page_follows_the_release_policy(embedded: tuple[TestClient, str]) -> None:
    client, staff = embedded
    course = make_course(client, staff, due_at=(datetime.now(UTC) + timedelta(days=3)).isoformat(),
                         policy={"checks": {"sin_values": "after_due_date"}, "total": "after_published"})
    sub = graded(course, "alice", "bug_sin_cos_swapped.ipynb")
    sign_in(client, token_of(course.students["alice"]))
    page = client.get(f"/s/{sub}").text
    row = re.search(r"<tr><td>sin_values</td>.*?</tr>", page, re.S)
    points = re.search(r'id = "sin_values"\n[^\n]*\npoints = (\d+)', EMBEDDINGS_RUBRIC.read_text(encoding="utf-8"))
    assert row and points and "released after the due date" in row.group() and f"?/{points.group(1)}" in row.group()
    assert 'id="check-sin_values"' not in page and "Vaswani formula" in page  # title shown, detail not
    assert "released when scores are published" in page and "Score: <strong>" not in page
    assert 'id="check-sin_pos0"' in page  # a visible check that failed: shown in full
    api = client.get(f"/api/submissions/{sub}/result", headers=course.students["alice"]).json()["result"]
    assert api["score"] is None and not next(c for c in api["checks"] if c["id"] == "sin_values")["released"]


def test_staff_page_shows_hidden_detail_the_student_page_does_not(course: Course) -> None:
    sub = graded(course, "alice", "bug_sin_cos_swapped.ipynb")
    student = browser(course.client.app)
    sign_in(student, token_of(course.students["alice"]))
    mine = student.get(f"/s/{sub}").text
    sign_in(course.client, token_of(course.staff))
    staff = course.client.get(f"/staff/s/{sub}").text
    assert 'id="check-layer_sin_values"' in staff and 'id="check-layer_sin_values"' not in mine
    assert "Staff page" in staff and "Staff page" not in mine


def test_student_text_is_escaped_on_every_page(embedded: tuple[TestClient, str]) -> None:
    client, staff = embedded
    headers = {"Authorization": f"Bearer {staff}"}
    assert client.post("/api/courses", json={"slug": "x", "title": f"Class {XSS}"}, headers=headers).status_code == 201
    assert client.post("/api/courses/x/assignments", json={"slug": "a", "module": "embeddings", "title": XSS},
                       headers=headers).status_code == 201
    roster = f'student_id,name,email\neve,"Eve {XSS}",e@example.edu\n'.encode()
    creds = client.post("/api/courses/x/roster", files={"roster": ("r.csv", roster)}, headers=headers).json()
    eve = {"Authorization": f"Bearer {creds['credentials'][0]['token']}"}
    source = (SUBMISSIONS / "correct_source.py").read_text() + f"\n# %%\nclass Embedding:\n    '''{XSS}'''\n" \
        f"    def __init__(self, *a):\n        raise ValueError({XSS!r})\n"
    r = client.post("/api/courses/x/assignments/a/submissions", headers=eve,
                    files={"file": (f"{XSS}.py", source.encode())})
    assert r.status_code == 202, r.text
    sub = r.json()["id"]
    client.get(f"/api/submissions/{sub}", params={"wait": 60}, headers=eve)
    pages = []
    student = browser(client.app)
    sign_in(student, creds["credentials"][0]["token"])
    pages += [student.get(u).text for u in ("/home", "/c/x/a", f"/s/{sub}")]
    sign_in(client, staff)
    pages += [client.get(u).text for u in ("/staff", "/staff/c/x/a", f"/staff/s/{sub}")]
    for html in pages:
        assert XSS not in html and "&lt;script&gt;document.title=" in html


def test_code_excerpt_is_the_last_definition_the_check_calls() -> None:
    cells = (CodeCell(index=2, source="class Embedding:\n    pass\n"),
             CodeCell(index=5, source="import numpy as np\n\n@decorator\nclass Embedding:\n    def f(self):\n"
                                      "        return 1\n\nx = Embedding()\n"))
    assert named_targets("Called: Embedding(4, 2) backward of EmbeddingLayer", ("EmbeddingLayer", "Embedding")) \
        == ["Embedding", "EmbeddingLayer"]
    assert named_targets("no call line", ("Embedding",)) == []
    found = excerpt(cells, "Embedding")
    assert found is not None and found.cell == "the cell starting `import numpy as np`"
    assert found.lines[0] == (3, "@decorator") and found.lines[-1] == (6, "        return 1")
    assert excerpt(cells, "Missing") is None


def test_code_excerpt_is_the_failing_method_centred_on_the_line_it_names() -> None:
    """A backward bug deep in a long class is shown, not the class's first 60 lines; cells are named
    as Jupyter shows them (In [n]), or by their first line."""
    filler = "".join(f"    def helper{k}(self):\n        return {k}\n\n" for k in range(40))
    backward = ("    def backward(self, grad_output):\n        grad = np.zeros(3)\n"
                "        grad[self.ids] += grad_output  # the bug\n        return (grad,)\n")
    cells = (CodeCell(index=3, source="class Embedding:\n    def forward(self, x):\n        return x\n"),
             CodeCell(index=6, source="class EmbeddingFunction(Function):\n" + filler + backward,
                      execution_count=7))
    cause = ("Called: Embedding(4, 2) backward of ids (1, 1)\ngrad: differs\nLikely cause: row 0 received 1x the "
             "gradient instead of 2x")
    [shown] = excerpts_for(cause, ("Embedding",), cells)
    assert shown.name == "EmbeddingFunction.backward" and shown.cell == "In [7]"
    assert any("the bug" in text for _, text in shown.lines) and not any("helper" in t for _, t in shown.lines)
    traced = "Called: Embedding(4, 2)\nraised IndexError (In [7], line 124, in backward)"
    [at] = excerpts_for(traced, ("Embedding",), cells)
    assert at.focus == 124 and (124, "        grad[self.ids] += grad_output  # the bug") in at.lines
    [whole] = excerpts_for("Called: Embedding(4, 2).forward(ids)\nrows: differ", ("Embedding",), cells)
    assert whole.name == "Embedding" and whole.cell == "the cell starting `class Embedding:`"


@pytest.mark.parametrize("fmt", ["canvas", "csv", "gradescope", "moodle", "nbgrader", "otter"])
def test_every_export_button_downloads_its_file(course: Course, fmt: str) -> None:
    graded(course, "alice", "correct_tinytorch.ipynb")
    sign_in(course.client, token_of(course.staff))
    page = course.client.get("/staff/c/cs249/m11").text
    assert f'href="/staff/c/cs249/m11/export/{fmt}" download' in page
    r = course.client.get(f"/staff/c/cs249/m11/export/{fmt}")
    assert r.status_code == 200 and "attachment" in r.headers["content-disposition"] and r.content


def test_the_api_result_carries_the_pictures_of_released_visible_checks_only(course: Course) -> None:
    sub = graded(course, "alice", "bug_sin_cos_swapped.ipynb")
    checks = {c["id"]: c for c in course.result(sub, "alice").json()["result"]["checks"]}
    figure = checks["sin_values"]["figures"][0]
    assert figure["name"].startswith("table_d") and len(figure["got"]) == len(figure["expected"]) > 1
    assert "figures" not in checks["layer_sin_values"] and "message" not in checks["layer_sin_values"]


def test_the_dashboard_and_the_staff_list_show_every_roster_student_and_late_work(embedded: tuple[TestClient, str]
                                                                                  ) -> None:
    """Students who uploaded nothing are rows ("no submission"), in the dashboard and the API's staff
    list; an upload after the due date is tagged late, counted in the class section."""
    client, token = embedded
    past = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    course = make_course(client, token, due_at=past)
    graded(course, "alice", "correct_tinytorch.ipynb")
    listed = client.get(f"{course.base}/submissions", headers=course.staff).json()
    assert [(row["student_id"], row["status"]) for row in listed] == \
        [("alice", "graded")] + [(sid, "no_submission") for sid in sorted(course.students) if sid != "alice"]
    assert all(row["id"] is None for row in listed[1:]) and listed[1]["name"]
    sign_in(client, token)
    page = client.get("/staff/c/cs249/m11").text
    absent = len(course.students) - 1
    assert f"{len(course.students)} of {len(course.students)} roster students shown (1 with an upload, {absent} with none)" \
        in page
    assert page.count("<td>no submission</td>") == absent and '<span class="tag">late</span>' in page
    assert "1 late; " + str(absent) + " with no submission" in page
    only_missing = client.get("/staff/c/cs249/m11", params={"status": "missing"}).text
    assert f"{absent} of {len(course.students)} roster students shown" in only_missing
    assert "Regrade all (1)" in page


def test_signing_out_ends_the_session_in_the_store_so_a_copied_cookie_is_dead(course: Course) -> None:
    client = course.client
    csrf = sign_in(client, token_of(course.students["alice"]))
    copied = browser(client.app, cookies={"grader_session": client.cookies["grader_session"]})
    assert copied.get("/home").status_code == 200
    assert client.post("/signout", data={"csrf": csrf}, follow_redirects=False).status_code == 303
    assert copied.get("/home", follow_redirects=False).status_code == 303  # not 200 for the rest of its 12 h
    sign_in(client, token_of(course.students["alice"]))  # the token still signs in
    assert client.get("/home").status_code == 200


def test_staff_sign_out_everywhere_ends_every_browser_of_theirs(course: Course) -> None:
    laptop, phone = browser(course.client.app), browser(course.client.app)
    csrf = sign_in(laptop, token_of(course.staff))
    sign_in(phone, token_of(course.staff))
    home = laptop.get("/staff")
    assert 'action="/staff/signout-everywhere"' in home.text and "Sign out everywhere" in home.text
    r = laptop.post("/staff/signout-everywhere", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/signin"
    for b in (laptop, phone):
        assert b.get("/staff", follow_redirects=False).status_code == 303
    assert course.client.get("/api/courses", headers=course.staff).status_code == 200  # the token itself stays
    audit = course.client.get("/api/audit", headers=course.staff)
    assert audit.status_code == 200 and "signout_everywhere" in audit.text


def test_staff_sign_a_student_out_of_every_browser_from_the_roster(course: Course) -> None:
    alice = browser(course.client.app)
    sign_in(alice, token_of(course.students["alice"]))
    staff = browser(course.client.app)
    csrf = sign_in(staff, token_of(course.staff))
    page = staff.get("/staff/courses/cs249")
    assert 'action="/staff/courses/cs249/signout"' in page.text
    r = staff.post("/staff/courses/cs249/signout", data={"csrf": csrf, "student_id": "alice"})
    assert r.status_code == 200 and "alice is signed out of 1 browser session." in r.text, r.text
    assert alice.get("/home", follow_redirects=False).status_code == 303
    sign_in(alice, token_of(course.students["alice"]))  # her sign-in token still works
    assert alice.get("/home").status_code == 200
    assert staff.post("/staff/courses/cs249/signout", data={"csrf": csrf, "student_id": "nobody"}).status_code == 404


def test_the_api_signs_staff_out_of_every_browser_of_theirs(course: Course) -> None:
    """``DELETE /api/me/sessions``: what the staff pages' "Sign out everywhere" does, for a script
    (or from another device); the bearer token itself stays good."""
    laptop, phone, alice = browser(course.client.app), browser(course.client.app), browser(course.client.app)
    for b in (laptop, phone):
        sign_in(b, token_of(course.staff))
    sign_in(alice, token_of(course.students["alice"]))
    r = course.client.delete("/api/me/sessions", headers=course.staff)
    assert r.status_code == 200 and r.json() == {"ended": 2}, r.text
    for b in (laptop, phone):
        assert b.get("/staff", follow_redirects=False).status_code == 303
    assert alice.get("/home").status_code == 200  # a student's session is not the staff member's
    assert course.client.get("/api/courses", headers=course.staff).status_code == 200
    audit = course.client.get("/api/audit", headers=course.staff).json()
    assert audit[0]["action"] == "signout_everywhere" and audit[0]["detail"] == '{"sessions": 2}'
    assert course.client.delete("/api/me/sessions", headers=course.staff).json() == {"ended": 0}
    r = course.client.delete("/api/me/sessions", headers=course.students["alice"])
    assert r.status_code == 403  # students have no such button either
    assert course.client.delete("/api/me/sessions").status_code == 401


def test_the_api_signs_a_student_out_of_every_browser(course: Course) -> None:
    """``DELETE /api/courses/{course}/students/{student_id}/sessions``: the roster's "Sign out"
    button, for a script; the student's token still signs in."""
    one, two, bob = browser(course.client.app), browser(course.client.app), browser(course.client.app)
    for b in (one, two):
        sign_in(b, token_of(course.students["alice"]))
    sign_in(bob, token_of(course.students["bob"]))
    url = "/api/courses/cs249/students/alice/sessions"
    r = course.client.delete(url, headers=course.staff)
    assert r.status_code == 200 and r.json() == {"student_id": "alice", "ended": 2}, r.text
    for b in (one, two):
        assert b.get("/home", follow_redirects=False).status_code == 303
    assert bob.get("/home").status_code == 200
    audit = course.client.get("/api/audit", headers=course.staff).json()
    assert (audit[0]["action"], audit[0]["target"]) == ("signout_student", "cs249/alice")
    sign_in(one, token_of(course.students["alice"]))
    assert one.get("/home").status_code == 200
    assert course.client.delete("/api/courses/cs249/students/nobody/sessions", headers=course.staff).status_code == 404
    assert course.client.delete("/api/courses/nocourse/students/alice/sessions",
                                headers=course.staff).status_code == 404
    assert course.client.delete(url, headers=course.students["bob"]).status_code == 403
    assert course.client.delete(url, headers=course.students["alice"]).status_code == 403


def test_a_planted_csrf_cookie_and_its_token_do_not_pass_for_a_signed_in_browser(course: Course) -> None:
    """A site that can set the victim's cookies plants its own CSRF cookie, with the token it got
    for it: the token is bound to the victim's session, so the pair is refused."""
    sub = graded(course, "alice", "correct_tinytorch.ipynb")
    victim = browser(course.client.app)
    sign_in(victim, token_of(course.staff))
    attacker = browser(course.client.app)
    planted_token = csrf_of(attacker.get("/signin").text)
    planted = browser(course.client.app, cookies={"grader_session": victim.cookies["grader_session"],
                                                  "grader_csrf": attacker.cookies["grader_csrf"]})
    assert planted.get("/staff").status_code == 200  # the victim's session, with the attacker's CSRF cookie
    for url, form in ((f"/staff/s/{sub}/override", {"score": "0", "reason": "planted"}), ("/signout", {}),
                      (f"/staff/s/{sub}/regrade", {})):
        assert planted.post(url, data=form | {"csrf": planted_token}, follow_redirects=False).status_code == 403, url
    assert course.client.get(f"/api/submissions/{sub}/result", headers=course.staff).json()["overrides"] == []
    assert victim.get("/staff").status_code == 200


def test_a_form_post_without_origin_or_referer_or_from_another_site_is_refused(course: Course) -> None:
    client = course.client
    csrf = sign_in(client, token_of(course.staff))
    bare = TestClient(client.app, cookies=client.cookies)  # sends neither Origin nor Referer
    for url in ("/staff/c/cs249/m11/regrade", "/signout", "/staff/signout-everywhere", "/staff/courses"):
        assert bare.post(url, data={"csrf": csrf, "slug": "x", "title": "X"}).status_code == 403, url
        for header in ({"Origin": "null"}, {"Origin": "https://evil.example"},
                       {"Referer": "https://evil.example/page"}, {"Referer": "not a url"}):
            assert bare.post(url, data={"csrf": csrf, "slug": "x", "title": "X"}, headers=header).status_code == 403
    assert bare.post("/signin", data={"token": token_of(course.staff), "csrf": csrf}).status_code == 403
    r = bare.post("/staff/c/cs249/m11/regrade", data={"csrf": csrf}, headers={"Referer": "http://testserver/staff"},
                  follow_redirects=False)
    assert r.status_code == 303  # a Referer of this site will do when a browser sends no Origin
    assert client.get("/staff").status_code == 200
