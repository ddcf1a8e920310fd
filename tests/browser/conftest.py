"""A running ``grader serve`` and a real headless browser (Debian's chromium and chromedriver,
driven by Selenium) for the web pages' tests.

Every test here is marked ``browser``: without chromium/chromedriver (or selenium) they skip,
unless GRADER_REQUIRE_BROWSER=1 (CI), which makes a missing browser a failure. ``axe.min.js`` is
axe-core 4.14.1 (MPL-2.0, its licence header kept), vendored from its npm package so the tests
need no network. Screenshots of every page go to ``$GRADER_TEST_OUTPUT/browser`` (default
``test-output/browser`` in the checkout).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from tests.service.servers import free_port, stop_pid, wait_port

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "submissions"
AXE = Path(__file__).with_name("axe.min.js")
OUTPUT = Path(os.environ.get("GRADER_TEST_OUTPUT", ROOT / "test-output")) / "browser"
CHROME_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run")
ROSTER = ("student_id,name,email\nalice,Alice Liddell,alice@example.edu\nbob,Bob Stone,bob@example.edu\n"
          "carol,Carol Ng,carol@example.edu\ndave,Dave Oduya,dave@example.edu\n")
XSS = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>"
XSS_ROSTER = f'student_id,name,email\nmallory,"Mallory {XSS.replace(chr(34), chr(34) * 2)}",m@example.edu\n'


def _missing(what: str) -> None:
    if os.environ.get("GRADER_REQUIRE_BROWSER") == "1":
        pytest.fail(f"GRADER_REQUIRE_BROWSER=1 but {what}", pytrace=False)
    pytest.skip(what)


def browser_binaries() -> tuple[str, str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or ("/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None)
    if chromium is None or driver is None:
        _missing("chromium or chromedriver is not installed (apt-get install chromium chromium-driver)")
    assert chromium is not None and driver is not None
    return chromium, driver


@dataclass
class Service:
    """The running ``grader serve``: its URL, credentials, and API helpers for setting up."""

    url: str
    staff_token: str
    tokens: dict[str, str] = field(default_factory=dict)  # student id -> token

    def api(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60, headers={"Authorization": f"Bearer {self.staff_token}"})

    def setup_course(self, slug: str, title: str, roster: str, assignments: tuple[str, ...]) -> None:
        with self.api() as http:
            assert http.post("/api/courses", json={"slug": slug, "title": title}).status_code == 201
            for a in assignments:
                body = {"slug": a, "module": "embeddings", "rate_limit": {"count": 50}}
                r = http.post(f"/api/courses/{slug}/assignments", json=body)
                assert r.status_code == 201, r.text
            r = http.post(f"/api/courses/{slug}/roster", files={"roster": ("roster.csv", roster.encode())})
            assert r.status_code == 200, r.text
            self.tokens |= {c["student_id"]: c["token"] for c in r.json()["credentials"]}

    def wait_graded(self, submission_id: str, timeout: float = 90) -> dict[str, Any]:
        with self.api() as http:
            view: dict[str, Any] = http.get(f"/api/submissions/{submission_id}", params={"wait": timeout}).json()
        assert view["final"], view
        return view


@contextmanager
def running_serve(data: Path, port: int, workers: int = 2, env: dict[str, str] | None = None) -> Iterator[str]:
    """``grader serve`` as a course runs it (embedded: SQLite, in-process graders) on 127.0.0.1:port,
    with its data in ``data``; yields the staff token it announces."""
    log = data.parent / f"serve-{port}.log"
    env = os.environ | {"GRADER_NO_DAEMON": "1", "GRADER_POLL_INTERVAL_S": "0.2"} | (env or {})
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "grader.cli", "serve", "--data", str(data),
                                 "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)],
                                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    try:
        wait_port(port, 60)
        found = re.search(r"Bearer (staff_\S+)", log.read_text())
        assert found, log.read_text()
        yield found.group(1)
    finally:
        stop_pid(proc, signal.SIGTERM, timeout=60)
        if proc.returncode not in (0, -signal.SIGTERM):
            print(log.read_text()[-5000:])


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The service every page test shares, with two courses set up."""
    browser_binaries()
    pytest.importorskip("selenium", reason="pip install selenium (the dev extra)")
    port = free_port()
    with running_serve(tmp_path_factory.mktemp("serve") / "data", port) as staff_token:
        svc = Service(f"http://127.0.0.1:{port}", staff_token)
        svc.setup_course("cs249", "ML Systems", ROSTER, ("m11", "m11r"))
        svc.setup_course("xss", f"Class {XSS}", XSS_ROSTER, ("m11",))
        yield svc


@pytest.fixture
def browser(tmp_path: Path, service: Service) -> Iterator[Any]:
    """A fresh headless chromium (its own profile and download folder), 1200 x 1000."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    chromium, driver_path = browser_binaries()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    options.add_argument("--window-size=1200,1000")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                              "download.prompt_for_download": False})
    driver = webdriver.Chrome(options=options, service=DriverService(executable_path=driver_path))
    driver.set_page_load_timeout(60)
    driver.downloads = downloads  # type: ignore[attr-defined]
    try:
        yield driver
    finally:
        driver.quit()


# ---- helpers -------------------------------------------------------------------------------------------


def sign_in(driver: Any, service: Service, token: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(f"{service.url}/signin")
    driver.find_element(By.ID, "token").send_keys(token)
    click_and_load(driver, driver.find_element(By.CSS_SELECTOR, "form.card button[type=submit]"))
    assert "/signin" not in driver.current_url, "the sign-in did not go through"


def wait_for(driver: Any, condition: Any, what: str, timeout: float = 90) -> Any:
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    # A page that reloads itself (the live status) can vanish under a lookup, and chromedriver can
    # answer a lookup made mid-navigation with "unhandled inspector error": try again until the deadline.
    transient = (WebDriverException,)
    return WebDriverWait(driver, timeout, poll_frequency=0.2, ignored_exceptions=transient).until(
        condition, f"timed out waiting for {what}")


def click_and_load(driver: Any, element: Any) -> None:
    """Click something that loads a new page, and wait until the new page is there."""
    from selenium.webdriver.support import expected_conditions

    old = driver.find_element("tag name", "html")
    element.click()
    wait_for(driver, expected_conditions.staleness_of(old), "the next page to load")
    wait_for(driver, lambda d: d.execute_script("return document.readyState") == "complete", "the page to load")


def axe_violations(driver: Any) -> list[dict[str, Any]]:
    """axe-core's WCAG rules on the current page (injected through WebDriver, not the page's CSP)."""
    if not driver.execute_script("return typeof window.axe !== 'undefined'"):
        driver.execute_script(AXE.read_text(encoding="utf-8"))
    driver.set_script_timeout(60)
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']}).then(r => done(r.violations.map("
        "v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)}))),"
        " e => done([{id: 'axe-error', help: String(e), nodes: []}]));")
    return list(result)


def emulate(driver: Any, *, width: int | None = None, dark: bool | None = None, zone: str | None = None) -> None:
    """A narrow phone screen, the system's dark setting, or another time zone (Chrome DevTools)."""
    if width is not None:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": width, "height": 800, "deviceScaleFactor": 1, "mobile": True})
    if dark is not None:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                               {"features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]})
    if zone is not None:
        driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": zone})


def reset_emulation(driver: Any) -> None:
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def screenshot(driver: Any, name: str) -> Path:
    """The whole page (not only the window) as a PNG in the test output folder."""
    OUTPUT.mkdir(parents=True, exist_ok=True)
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 8000), "scale": 1}})
    path = OUTPUT / f"{name}.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def inspect_page(driver: Any, name: str) -> None:
    """Every page's manners: axe-core passes in light and dark, nothing is wider than a 360 px
    screen, and screenshots (wide, dark, 360 px) are saved to the test output folder."""
    try:
        screenshot(driver, name)
        driver.save_screenshot(str(OUTPUT / f"{name}-window.png"))  # what a 1200 x 1000 window shows first
        assert axe_violations(driver) == [], f"{name}: accessibility violations"
        emulate(driver, dark=True)
        background = driver.execute_script("return getComputedStyle(document.body).backgroundColor")
        assert background != "rgb(255, 255, 255)", f"{name}: the dark setting is not followed"
        assert axe_violations(driver) == [], f"{name}: accessibility violations in the dark theme"
        screenshot(driver, f"{name}-dark")
        emulate(driver, width=360, dark=False)
        time.sleep(0.2)
        wide = driver.execute_script("return document.documentElement.scrollWidth")
        culprits = driver.execute_script(
            "return [...document.querySelectorAll('body *')]"
            ".filter(e => !e.closest('.scroll') && (e.getBoundingClientRect().right > 361"
            " || (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX === 'visible'))).slice(0, 5)"
            ".map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))")
        assert wide <= 360, f"{name}: {wide} px wide on a 360 px screen: {culprits}"
        screenshot(driver, f"{name}-360")
    finally:
        reset_emulation(driver)


def notebook_bytes(name: str) -> bytes:
    return (SUBMISSIONS / name).read_bytes()
