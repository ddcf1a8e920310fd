"""Staff in a real browser: the dashboard (filters, histogram, pass rates, failure causes with
who), one student's report with hidden detail, regrade after a rubric change, an override with
its reason, the exports (a valid Canvas CSV), queue and worker health; and student-controlled
text (notebook, file name, class name, roster name) shown inert everywhere."""

from __future__ import annotations

import csv
import io
import json
import re
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from .conftest import ROOT, XSS, Service, click_and_load, inspect_page, notebook_bytes, sign_in, wait_for
from .test_student_pages import all_css, by_css, wait_feedback

pytestmark = [pytest.mark.browser, pytest.mark.slow]
RUBRIC = ROOT / "grader" / "modules" / "embeddings" / "rubric.toml"


def upload(service: Service, course: str, assignment: str, student: str, name: str, content: bytes) -> str:
    with httpx.Client(base_url=service.url, timeout=60,
                      headers={"Authorization": f"Bearer {service.tokens[student]}"}) as http:
        r = http.post(f"/api/courses/{course}/assignments/{assignment}/submissions", files={"file": (name, content)})
    assert r.status_code == 202, r.text
    submission: str = r.json()["id"]
    service.wait_graded(submission)
    return submission


def test_dashboard_filters_shows_the_class_and_exports_a_valid_canvas_csv(browser: Any, service: Service) -> None:
    upload(service, "cs249", "m11", "alice", "bug_backward_overwrite.ipynb", notebook_bytes("bug_backward_overwrite.ipynb"))
    upload(service, "cs249", "m11", "bob", "correct.ipynb", notebook_bytes("correct_tinytorch.ipynb"))
    sign_in(browser, service, service.staff_token)
    assert browser.current_url.endswith("/staff")
    assert "worker" in by_css(browser, "#health-title").find_element("xpath", "..").text
    inspect_page(browser, "staff-home")
    click_and_load(browser, by_css(browser, "a[href='/staff/c/cs249/m11']"))

    assert by_css(browser, ".chart svg[role=img]").get_attribute("aria-label").startswith("Scores of")
    rates = {row.find_element("css selector", "td").text.split("\n")[0]: row.text
             for row in all_css(browser, "table[class=''] tbody tr, section table tbody tr") if "%" in row.text}
    assert rates, "no pass rate per check"
    rows = all_css(browser, "table.subs tbody tr")
    assert {"alice", "bob"} <= {r.text.split()[0] for r in rows}
    causes = by_css(browser, "[aria-label='failure causes table']").text
    assert "alice" in causes and "bob" not in causes
    inspect_page(browser, "staff-dashboard")

    # Filters: a failed check, a score range, late or not, a status.
    from selenium.webdriver.support.select import Select

    rows = all_css(browser, "table.subs tbody tr")
    failed = next(r.find_elements("css selector", "td")[-1].text for r in rows if r.text.startswith("alice"))
    Select(by_css(browser, "#f-check")).select_by_value(failed.split(", ")[0])
    click_and_load(browser, by_css(browser, ".filters button"))
    shown = [r.text.split()[0] for r in all_css(browser, "table.subs tbody tr")]
    assert "alice" in shown and "bob" not in shown
    browser.get(f"{service.url}/staff/c/cs249/m11?min_score=100")
    assert [r.text.split()[0] for r in all_css(browser, "table.subs tbody tr")] == ["bob"]
    browser.get(f"{service.url}/staff/c/cs249/m11?late=yes")
    assert all_css(browser, "table.subs tbody tr") == []  # no due date: nobody is late
    browser.get(f"{service.url}/staff/c/cs249/m11?status=invalid")
    assert all_css(browser, "table.subs tbody tr") == []

    # Every batch format has a button; the Canvas one downloads a CSV Canvas can import.
    browser.get(f"{service.url}/staff/c/cs249/m11")
    buttons = [a.text for a in all_css(browser, "a.button[download]")]
    assert set(buttons) == {"canvas", "csv", "gradescope", "moodle", "nbgrader", "otter"}
    by_css(browser, "a.button[href$='/export/canvas']").click()
    target = browser.downloads / "canvas.csv"
    wait_for(browser, lambda _d: target.exists() and target.stat().st_size > 0, "the Canvas CSV to download", 30)
    table = list(csv.reader(io.StringIO(target.read_text(encoding="utf-8"))))
    assert table[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert table[0][5].startswith("Module 11: Embeddings") and table[1][0] == "Points Possible"
    scores = {row[0]: float(row[5]) for row in table[2:]}
    assert scores["Bob Stone"] == 100.0 and 0 < scores["Alice Liddell"] < 100


def test_staff_read_hidden_detail_override_with_a_reason_and_regrade_after_a_rubric_change(
        browser: Any, service: Service) -> None:
    submission = upload(service, "cs249", "m11r", "dave", "dave.ipynb", notebook_bytes("bug_sin_cos_swapped.ipynb"))
    sign_in(browser, service, service.staff_token)
    browser.get(f"{service.url}/staff/s/{submission}")
    page = by_css(browser, "main").text
    before = float(re.search(r"Score: ([\d.]+) / 100", page).group(1))  # type: ignore[union-attr]
    # The hidden check's detail, which the student never sees, is on the staff page.
    hidden = by_css(browser, "#check-layer_sin_values").text
    assert "Input\nEmbeddingLayer(" in hidden and "Likely cause" in hidden and "its details are not shown" not in hidden
    inspect_page(browser, "staff-submission")

    # Override with a reason: the score that counts changes, the reason is kept.
    by_css(browser, "#ov-score").send_keys("95")
    by_css(browser, "#ov-reason").send_keys("late-day waiver <b>agreed</b>")
    click_and_load(browser, by_css(browser, "form[action$='/override'] button"))
    page = by_css(browser, "main").text
    assert "Score: 95 / 100" in page and "set by an override" in page and "late-day waiver <b>agreed</b>" in page

    # A rubric change (sin_values worth 5 more points), then "Regrade all" on the dashboard.
    rubric = RUBRIC.read_text(encoding="utf-8")
    changed = re.sub(r'(id = "sin_values"\n[^\n]*\npoints = )(\d+)', lambda m: f"{m.group(1)}{int(m.group(2)) + 5}",
                     rubric)
    assert changed != rubric
    with service.api() as http:
        assert http.patch("/api/courses/cs249/assignments/m11r", json={"rubric_toml": changed}).status_code == 200
    browser.get(f"{service.url}/staff/c/cs249/m11r")
    click_and_load(browser, by_css(browser, "form[action$='/regrade'] button"))
    assert "Regrading 1 upload" in by_css(browser, "main").text
    browser.get(f"{service.url}/staff/s/{submission}")
    wait_feedback(browser)  # the page follows the regrade live
    page = by_css(browser, "main").text
    assert "Score: 95 / 105" in page and "set by an override" in page, page  # a staff decision stands
    assert "The override stands through regrades until you remove it. Automatic score:" in page
    assert len(all_css(browser, "[aria-label='gradings table'] tbody tr")) == 2

    # The student's page shows the new maximum, and sin_values out of its new points.
    browser.delete_all_cookies()
    sign_in(browser, service, service.tokens["dave"])
    browser.get(f"{service.url}/s/{submission}")
    assert "/ 105" in by_css(browser, ".score").text
    new_points = int(re.search(r'id = "sin_values"\n[^\n]*\npoints = (\d+)', changed).group(1))  # type: ignore[union-attr]
    assert f"0/{new_points}" in next(r.text for r in all_css(browser, "tbody tr") if r.text.startswith("sin_values "))
    assert before < 100


def test_student_text_is_shown_inert_on_every_page(browser: Any, service: Service, tmp_path: Path) -> None:
    """A payload in the notebook's code and error messages, in the file name, in the class
    (course) name and in the roster name: each shown as text, none runs."""
    nb = json.loads(notebook_bytes("correct_tinytorch.ipynb"))
    nb["cells"].append({"cell_type": "code", "execution_count": None, "id": "pwn", "metadata": {}, "outputs": [],
                        "source": f"def create_sinusoidal_embeddings(max_len, d):\n    raise ValueError({XSS!r})\n"})
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    name = f"{XSS}.ipynb"

    sign_in(browser, service, service.tokens["mallory"])
    assert XSS in browser.find_element("css selector", "h1").text  # the class name, as text
    browser.get(f"{service.url}/c/xss/m11")
    # The file name travels with the upload (a drop keeps any name the student's system allows).
    browser.execute_script(
        "const dt = new DataTransfer(); dt.items.add(new File([arguments[0]], arguments[1]));"
        "document.querySelector('[data-drop]').dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true,"
        " cancelable: true}));", path.read_text(encoding="utf-8"), name)
    wait_for(browser, lambda d: "/s/" in d.current_url, "the upload")
    wait_feedback(browser)
    submission = browser.current_url.rsplit("/", 1)[1]
    pages = [browser.current_url, f"{service.url}/c/xss/m11", f"{service.url}/home"]
    assert XSS in by_css(browser, "#check-sin_pos0").text or XSS in by_css(browser, "main").text
    _assert_inert(browser, pages, "student")
    inspect_page(browser, "xss-student-feedback")

    browser.delete_all_cookies()
    sign_in(browser, service, service.staff_token)
    staff_pages = [f"{service.url}/staff", f"{service.url}/staff/c/xss/m11", f"{service.url}/staff/s/{submission}"]
    _assert_inert(browser, staff_pages, "staff")
    assert XSS in by_css(browser, "main").text  # the roster name and the code, as text


def _assert_inert(browser: Any, pages: list[str], who: str) -> None:
    for url in pages:
        browser.get(url)
        time.sleep(0.3)
        assert browser.title != "pwned", f"{who} page {url} ran the payload"
        assert not browser.execute_script("return document.querySelectorAll('main img[src=x], main script').length")
        assert "&lt;script&gt;" in browser.page_source or XSS in by_css(browser, "body").text



def test_staff_set_up_a_course_import_its_roster_hand_out_sign_ins_and_give_one_a_new_one(
        browser: Any, service: Service, tmp_path: Path) -> None:
    """The whole course setup in the browser: a course, an assignment (due date, policy, rate
    limit), the roster, the sign-ins CSV, a student signing in with their link, one new sign-in."""
    from selenium.webdriver.support.select import Select

    sign_in(browser, service, service.staff_token)
    click_and_load(browser, by_css(browser, "a[href='/staff/courses']"))
    by_css(browser, "#course-title").send_keys("Setup Demo")
    by_css(browser, "#course-slug").send_keys("setup-demo")
    click_and_load(browser, by_css(browser, "form[action='/staff/courses'] button"))
    assert browser.current_url.endswith("/staff/courses/setup-demo"), browser.current_url
    assert by_css(browser, "h1").text == "Setup Demo"

    by_css(browser, "#a-slug").send_keys("m11")
    Select(by_css(browser, "#a-module")).select_by_value("embeddings")
    browser.execute_script("arguments[0].value = '2026-10-01T23:59'", by_css(browser, "#a-due"))
    Select(by_css(browser, "#a-total")).select_by_value("after_published")
    by_css(browser, "#new-assignment summary").click()
    sin_values = by_css(browser, "option[value='embeddings/sin_values=hidden']").find_element("xpath", "..")
    Select(sin_values).select_by_value("embeddings/sin_values=hidden")
    by_css(browser, "#a-rate-count").clear()
    by_css(browser, "#a-rate-count").send_keys("5")
    click_and_load(browser, by_css(browser, "#new-assignment button[type=submit]"))
    assert "Assignment m11 created" in by_css(browser, "main").text
    with service.api() as http:
        made = http.get("/api/courses/setup-demo/assignments/m11").json()
    assert made["due_at"] == "2026-10-01T23:59:00+00:00" and made["rate_limit"]["count"] == 5
    assert made["policy"] == {"checks": {"sin_values": "hidden"}, "total": "after_published"}

    roster = tmp_path / "class.csv"
    roster.write_text("student_id,name,email\nerin,Erin Vale,erin@example.edu\nfinn,Finn Okoro,finn@example.edu\n"
                      "../x,Bad Row,bad@example.edu\n", encoding="utf-8")
    by_css(browser, "#roster-file").send_keys(str(roster))
    click_and_load(browser, by_css(browser, "#roster-import button"))
    assert "2 new students" in by_css(browser, "#notice").text
    assert "line 4" in by_css(browser, "#roster-problems").text
    assert [r.text.split()[0] for r in all_css(browser, "#students tbody tr")] == ["erin", "finn"]
    inspect_page(browser, "staff-course-setup")

    by_css(browser, "#hand-out button[value=csv]").click()  # a download: the page stays
    target = browser.downloads / "setup-demo-sign-ins.csv"
    wait_for(browser, lambda _d: target.exists() and target.stat().st_size > 0, "the sign-ins CSV to download", 60)
    rows = list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"))))
    assert [(r["student_id"], r["name"]) for r in rows] == [("erin", "Erin Vale"), ("finn", "Finn Okoro")]
    assert all(r["link"] == f"{service.url}/signin#token={r['token']}" for r in rows)

    # Erin opens her link: the token is in the form, not in the address bar; she presses Sign in.
    browser.delete_all_cookies()
    browser.get(rows[0]["link"])
    wait_for(browser, lambda d: by_css(d, "#token").get_attribute("value") == rows[0]["token"], "the token filled in")
    assert "#" not in browser.current_url and rows[0]["token"] not in browser.current_url
    click_and_load(browser, by_css(browser, "form.card button[type=submit]"))
    assert browser.current_url.endswith("/home") and "Setup Demo" in by_css(browser, "h1").text

    # One button gives Finn a new sign-in; his old one stops working.
    browser.delete_all_cookies()
    sign_in(browser, service, service.staff_token)
    browser.get(f"{service.url}/staff/courses/setup-demo")
    row = next(r for r in all_css(browser, "#students tbody tr") if r.text.startswith("finn"))
    click_and_load(browser, row.find_element("css selector", "button"))
    assert "New sign-in for Finn Okoro" in by_css(browser, "h1").text
    new = by_css(browser, "[data-token]").text
    assert new.startswith("student_") and new != rows[1]["token"]
    inspect_page(browser, "staff-new-sign-in")
    with httpx.Client(base_url=service.url, timeout=60) as http:
        assert http.get("/api/me", headers={"Authorization": f"Bearer {rows[1]['token']}"}).status_code == 401
        assert http.get("/api/me", headers={"Authorization": f"Bearer {new}"}).json()["name"] == "finn"
        assert http.get("/api/me", headers={"Authorization": f"Bearer {rows[0]['token']}"}).status_code == 200
