"""A student in a real browser: sign in, upload, watch it graded, read the feedback with its
pictures and their own code, history and the difference between attempts; another student's
page stays out of reach."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from .conftest import (
    OUTPUT,
    SUBMISSIONS,
    Service,
    click_and_load,
    emulate,
    inspect_page,
    notebook_bytes,
    reset_emulation,
    sign_in,
    wait_for,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def by_css(driver: Any, selector: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, selector)


def all_css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def upload_with_picker(driver: Any, path: Path) -> str:
    """Choose the file in the form's picker and submit; returns the submission id it opens."""
    by_css(driver, "input[type=file]").send_keys(str(path))
    by_css(driver, "form[data-upload] button[type=submit]").click()
    wait_for(driver, lambda d: re.search(r"/s/[0-9a-f]{32}$", d.current_url), "the feedback page to open")
    return str(driver.current_url.rsplit("/", 1)[1])


def wait_feedback(driver: Any) -> None:
    """The page follows the grading live and reloads itself once the status is final."""
    wait_for(driver, lambda d: d.execute_script("const e = document.querySelector('[data-events]');"
                                                "return document.readyState === 'complete' && e && e.dataset.final")
             == "true", "the grading to finish and the page to show it")


def test_student_signs_in_uploads_and_reads_feedback_with_pictures(browser: Any, service: Service,
                                                                  tmp_path: Path) -> None:
    sign_in(browser, service, service.tokens["alice"])
    assert browser.current_url.endswith("/home")
    cookies = {c["name"]: c for c in browser.get_cookies()}
    assert cookies["grader_session"]["httpOnly"] and cookies["grader_session"]["sameSite"] == "Lax"
    inspect_page(browser, "student-home")
    click_and_load(browser, by_css(browser, "ul.cards a"))
    assert browser.current_url.endswith("/c/cs249/m11")

    submission = upload_with_picker(browser, SUBMISSIONS / "bug_sin_cos_swapped.ipynb")
    assert submission in browser.current_url
    wait_feedback(browser)
    page = by_css(browser, "main").text
    assert "Score: 87 / 100" in page or re.search(r"Score: \d+(\.\d+)? / 100", page), page
    assert "What to fix" in page and "sin_values" in page
    section = by_css(browser, "#check-sin_values")
    labels = [dt.text for dt in section.find_elements("css selector", "dt")]
    assert labels[:2] == ["Input", "Expected vs got"] and "Likely cause" in labels
    pictures = section.find_elements("css selector", ".maps img")
    assert len(pictures) >= 3  # yours, the reference, the difference
    assert all(browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", img)
               for img in pictures)
    listing = by_css(browser, "#check-sin_values figure.code")
    assert "create_sinusoidal_embeddings" in listing.text and re.search(r"^\s*1\s*def ", listing.text, re.M) is None
    assert all_css(browser, "#check-sin_values .ln")[0].text.isdigit()
    # A hidden check is listed without its result; its detail waits for the due date.
    hidden = [row.text for row in all_css(browser, "table tbody tr") if "layer_sin_values " in row.text + " "]
    assert hidden and "released after the due date" in hidden[0] and "?/" in hidden[0]
    inspect_page(browser, "student-feedback")
    browser.execute_script("document.getElementById('check-sin_values').scrollIntoView()")
    browser.save_screenshot(str(OUTPUT / "student-feedback-check-window.png"))


def test_times_show_in_the_viewers_time_zone(browser: Any, service: Service) -> None:
    sign_in(browser, service, service.tokens["alice"])
    emulate(browser, zone="Asia/Kolkata")
    try:
        browser.get(f"{service.url}/c/cs249/m11")
        stamp = by_css(browser, "main table time")
        at = datetime.fromisoformat(stamp.get_attribute("datetime")).astimezone(ZoneInfo("Asia/Kolkata"))
        text = stamp.text
        assert "UTC" not in text and f"{at:%M}" in text and str(at.hour % 12 or 12) in text, text
    finally:
        reset_emulation(browser)


def test_drag_and_drop_upload_history_and_the_difference_between_attempts(browser: Any, service: Service) -> None:
    sign_in(browser, service, service.tokens["carol"])
    browser.get(f"{service.url}/c/cs249/m11")
    first = upload_with_picker(browser, SUBMISSIONS / "bug_sin_cos_swapped.ipynb")
    wait_feedback(browser)
    browser.get(f"{service.url}/c/cs249/m11")
    # Drop a file on the drop zone, as a person dragging it from their file manager would.
    browser.execute_script(
        "const dt = new DataTransfer();"
        "dt.items.add(new File([arguments[0]], 'fixed.ipynb', {type: 'application/x-ipynb+json'}));"
        "document.querySelector('[data-drop]').dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true,"
        " cancelable: true}));", notebook_bytes("correct_tinytorch.ipynb").decode())
    wait_for(browser, lambda d: re.search(r"/s/[0-9a-f]{32}$", d.current_url) and first not in d.current_url,
             "the dropped file's feedback page")
    wait_feedback(browser)
    assert "Score: 100 / 100" in by_css(browser, "main").text
    assert "Every check shown in detail passed." in by_css(browser, "main").text

    browser.get(f"{service.url}/c/cs249/m11")
    rows = all_css(browser, "main table tbody tr")
    assert len(rows) == 2 and "fixed.ipynb" in rows[0].text and "bug_sin_cos_swapped.ipynb" in rows[1].text
    inspect_page(browser, "student-assignment")
    click_and_load(browser, by_css(browser, "form.compare button"))
    changed = [row.text for row in all_css(browser, "tbody tr.changed")]
    assert any(text.startswith("sin_values") for text in changed)
    assert not any(text.startswith("emb_shape") for text in changed)  # passed both times
    assert "checks changed" in by_css(browser, "main").text
    inspect_page(browser, "student-compare")


def test_another_students_result_and_the_staff_pages_are_refused(browser: Any, service: Service) -> None:
    alices = _upload_via_api(service, "alice", "bug_backward_overwrite.ipynb")
    sign_in(browser, service, service.tokens["bob"])
    for url in (f"/s/{alices}", f"/staff/s/{alices}", "/staff", "/staff/c/cs249/m11",
                "/staff/c/cs249/m11/export/canvas", f"/s/{alices[::-1]}", "/c/xss/m11"):
        browser.get(service.url + url)
        heading = by_css(browser, "h1").text
        assert heading in ("Not found", "Not allowed"), (url, heading)
        assert "bug_backward_overwrite" not in browser.page_source and "Alice" not in browser.page_source
    inspect_page(browser, "refused")
    # The same requests outside the browser, with Bob's cookie: no page of Alice's, no staff data.
    cookie = {c["name"]: c["value"] for c in browser.get_cookies()}
    import httpx2 as httpx

    with httpx.Client(base_url=service.url, cookies=cookie) as http:
        assert http.get(f"/s/{alices}").status_code == 404
        assert http.get(f"/s/{alices}/events").status_code == 404
        assert http.get("/staff/c/cs249/m11").status_code == 403
        assert http.get(f"/api/submissions/{alices}/result").status_code == 401  # the API takes no cookie


def _upload_via_api(service: Service, student: str, notebook: str) -> str:
    import httpx2 as httpx

    with httpx.Client(base_url=service.url, timeout=60,
                      headers={"Authorization": f"Bearer {service.tokens[student]}"}) as http:
        r = http.post("/api/courses/cs249/assignments/m11/submissions",
                      files={"file": (notebook, notebook_bytes(notebook))})
    assert r.status_code == 202, r.text
    submission: str = r.json()["id"]
    service.wait_graded(submission)
    return submission
