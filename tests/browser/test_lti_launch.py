"""From the LMS to the gradebook in a real browser: a learner opens the assignment in a
third-party LTI 1.3 platform (lti1p3platform, tests/service/lti_platform.py), lands signed in on
the assignment's page, uploads, is graded, and the score arrives in the platform's gradebook."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from tests.service.servers import free_port

from .conftest import SUBMISSIONS, Service, click_and_load, inspect_page, running_serve, screenshot, wait_for
from .test_student_pages import upload_with_picker, wait_feedback

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def lti_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, Any]]:
    from tests.service.lti_platform import LMS, Served, lti_toml

    port = free_port()
    tool = f"http://127.0.0.1:{port}"
    lms = LMS(tool_url=tool, html=True)
    served = Served(lms)
    lms.tool_jwks = lambda: httpx.get(f"{tool}/lti/jwks").json()
    data = tmp_path_factory.mktemp("lti-serve") / "data"
    data.mkdir()
    (data / "lti.toml").write_text(lti_toml(lms, tool, 0.5))
    try:
        with running_serve(data, port) as staff_token:
            svc = Service(tool, staff_token)
            with svc.api() as http:
                assert http.post("/api/courses", json={"slug": "cs249", "title": "ML Systems"}).status_code == 201
                body = {"slug": "m11", "module": "embeddings", "policy": {"total": "visible"}}
                r = http.post("/api/courses/cs249/assignments", json=body)
                assert r.status_code == 201, r.text
                lms.custom = {"grader_link": http.get("/lti/courses/cs249/assignments/m11/link").json()["value"]}
            yield svc, served
    finally:
        served.stop()


INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership%23Instructor"


def staff_opens_the_link_once(browser: Any, service: Service, served: Any) -> None:
    """Only course staff link a new LMS course to the grader: the instructor opens the link, signs in
    with a staff token and confirms the LMS account is theirs; then the browser forgets them."""
    from selenium.webdriver.common.by import By

    browser.get(f"{served.lms.url}/start?sub=t0&role={INSTRUCTOR}")
    wait_for(browser, lambda d: "/signin" in d.current_url, "the grader to ask the instructor to sign in once")
    browser.find_element(By.ID, "token").send_keys(service.staff_token)
    click_and_load(browser, browser.find_element(By.CSS_SELECTOR, "form.card button[type=submit]"))
    confirm_the_lms_account(browser)
    wait_for(browser, lambda d: d.current_url.endswith("/staff/c/cs249/m11"), "the assignment's staff page")
    browser.delete_all_cookies()


def confirm_the_lms_account(browser: Any) -> None:
    from selenium.webdriver.common.by import By

    wait_for(browser, lambda d: "/lti/staff-link" in d.current_url, "the grader to ask to link the LMS account")
    assert "Link my LMS account" in browser.find_element(By.CSS_SELECTOR, "main").text
    click_and_load(browser, browser.find_element(By.CSS_SELECTOR, "form.card button[type=submit]"))


def test_launch_upload_grade_and_the_score_reaches_the_lms_gradebook(browser: Any, lti_world: Any,
                                                                     tmp_path: Path) -> None:
    service, served = lti_world
    staff_opens_the_link_once(browser, service, served)
    browser.get(f"{served.lms.url}/start?lineitem=item-b")
    wait_for(browser, lambda d: d.current_url.endswith("/c/cs249/m11"), "the launch to land on the assignment")
    assert "alice@example.edu" in browser.find_element("css selector", "header .who").text
    screenshot(browser, "lti-launch-assignment")

    submission = upload_with_picker(browser, SUBMISSIONS / "bug_sin_cos_swapped.ipynb")
    wait_feedback(browser)
    with service.api() as http:
        result = http.get(f"/api/submissions/{submission}/result").json()
    [grading] = result["history"]
    assert grading["status"] == "graded" and 0 < result["score"] < grading["max_score"], result

    deadline = time.monotonic() + 60  # the passback loop sends every few seconds
    while time.monotonic() < deadline and not httpx.get(f"{served.lms.url}/gradebook").json()["scores"]:
        time.sleep(0.5)
    [score] = httpx.get(f"{served.lms.url}/gradebook").json()["scores"]
    assert score["lineitem"] == "item-b" and score["userId"] == "lms-user-1"
    assert (score["scoreGiven"], score["scoreMaximum"]) == (result["score"], grading["max_score"])
    assert (score["activityProgress"], score["gradingProgress"]) == ("Completed", "FullyGraded")


def test_an_instructor_places_an_assignment_by_deep_linking(browser: Any, lti_world: Any) -> None:
    from selenium.webdriver.common.by import By

    service, served = lti_world
    browser.get(f"{served.lms.url}/start?dl=1&sub=t9&role={INSTRUCTOR}")
    wait_for(browser, lambda d: "/signin" in d.current_url, "the grader to ask the instructor to sign in once")
    assert "from your LMS as an instructor" in browser.find_element(By.CSS_SELECTOR, "main").text
    browser.find_element(By.ID, "token").send_keys(service.staff_token)
    click_and_load(browser, browser.find_element(By.CSS_SELECTOR, "form.card button[type=submit]"))
    confirm_the_lms_account(browser)
    wait_for(browser, lambda d: d.current_url.endswith("/lti/deep-link"), "the assignment picker")
    inspect_page(browser, "lti-deep-link")
    browser.find_element(By.CSS_SELECTOR, "form.card button[type=submit]").click()
    wait_for(browser, lambda d: d.current_url.startswith(served.lms.url), "the answer to reach the LMS")
    [item] = served.lms.deep_links
    assert item["custom"]["grader_link"].startswith("cs249/m11.") and item["url"] == f"{service.url}/lti/launch"
