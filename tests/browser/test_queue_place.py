"""A student whose upload waits behind others sees its place in the queue, and the place moves on
the open page (the status stream) as the uploads ahead of it are graded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.service.servers import free_port

from .conftest import ROSTER, SUBMISSIONS, Service, inspect_page, running_serve, sign_in, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def slow_notebook() -> bytes:
    """A correct notebook whose Embedding.forward sleeps a second a call: its grading holds the one
    grading worker for a while, with no check left hanging for good."""
    nb = json.loads((SUBMISSIONS / "correct_tinytorch.ipynb").read_text(encoding="utf-8"))
    old = "        ids = indices.data\n"
    [cell] = [c for c in nb["cells"] if c["cell_type"] == "code" and old in "".join(c["source"])]
    cell["source"] = "".join(cell["source"]).replace(old, "        import time\n        time.sleep(1)\n" + old, 1)
    return json.dumps(nb).encode()


@pytest.fixture
def one_worker(tmp_path: Path) -> Iterator[Service]:
    """A service of its own with one grading worker (the shared one has two, and other tests use it)."""
    port = free_port()
    with running_serve(tmp_path / "data", port, workers=1, env={"GRADER_SHUTDOWN_GRACE_S": "1"}) as staff:
        svc = Service(f"http://127.0.0.1:{port}", staff)
        svc.setup_course("cs249", "ML Systems", ROSTER, ("m11",))
        yield svc


def upload(service: Service, student: str, content: bytes) -> str:
    import httpx2 as httpx

    with httpx.Client(base_url=service.url, timeout=60,
                      headers={"Authorization": f"Bearer {service.tokens[student]}"}) as http:
        r = http.post("/api/courses/cs249/assignments/m11/submissions",
                      files={"file": (f"{student}.ipynb", content)})
    assert r.status_code == 202, r.text
    return str(r.json()["id"])


def place_text(driver: Any) -> str:
    return str(driver.execute_script("const e = document.querySelector('[data-queue-place]');"
                                     "return e ? e.textContent : '';"))


def test_a_queued_upload_shows_its_place_and_the_place_moves_live(browser: Any, one_worker: Service) -> None:
    bob = upload(one_worker, "bob", slow_notebook())  # the worker's for a while
    with one_worker.api() as http:
        wait_for(browser, lambda _: http.get(f"/api/submissions/{bob}").json()["status"] == "grading",
                 "bob's grading to start", timeout=120)
    upload(one_worker, "alice", slow_notebook())
    carol = upload(one_worker, "carol", (SUBMISSIONS / "correct_tinytorch.ipynb").read_bytes())
    sign_in(browser, one_worker, one_worker.tokens["carol"])
    browser.get(f"{one_worker.url}/s/{carol}")
    assert "number 2 in the queue" in place_text(browser), place_text(browser)
    inspect_page(browser, "queued-upload")
    # bob's grading ends, alice's starts: carol's open page says so without a reload
    marker = browser.execute_script("window.notReloaded = true; return window.notReloaded")
    assert marker is True
    wait_for(browser, lambda d: "number 1 in the queue" in place_text(d), "carol's place to move to 1", timeout=240)
    assert browser.execute_script("return window.notReloaded === true"), "the page reloaded instead of updating"
