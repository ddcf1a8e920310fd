"""``grader serve`` as a user runs it: one command, SQLite in a data folder, the staff sign-in
printed on the first start only, the whole flow over real HTTP, SIGTERM for a clean stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.service.conftest import ROOT, ROSTER, SUBMISSIONS
from tests.service.servers import free_port, stop_pid, wait_port

pytestmark = pytest.mark.slow


def serve(data: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "grader.cli", "serve", "--data", str(data), "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=os.environ | {"GRADER_NO_DAEMON": "1"})
    wait_port(port, 60)
    return proc


def test_grader_serve_alone_serves_the_whole_flow(tmp_path: Path) -> None:
    port, data = free_port(), tmp_path / "data"
    proc = serve(data, port, tmp_path / "first.log")
    try:
        lines = [line for line in (tmp_path / "first.log").read_text().splitlines() if "staff sign-in" in line]
        assert len(lines) == 1
        staff = {"Authorization": f"Bearer {lines[0].rsplit(' ', 1)[1]}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            assert http.post("/api/courses", json={"slug": "c", "title": "C"}, headers=staff).status_code == 201
            assert http.post("/api/courses/c/assignments", json={"slug": "a"}, headers=staff).status_code == 201
            creds = http.post("/api/courses/c/roster", files={"roster": ("r.csv", ROSTER.encode())},
                              headers=staff).json()["credentials"]
            alice = {"Authorization": f"Bearer {creds[0]['token']}"}
            sub = http.post("/api/courses/c/assignments/a/submissions", headers=alice,
                            files={"file": ("nb.ipynb", (SUBMISSIONS / "correct_tinytorch.ipynb").read_bytes())})
            assert sub.status_code == 202
            done = http.get(f"/api/submissions/{sub.json()['id']}", params={"wait": 60}, headers=alice).json()
            assert done["status"] == "graded"
            result = http.get(f"/api/submissions/{done['id']}/result", headers=alice).json()["result"]
            assert result["score"] == 100.0
            assert http.get("/docs").status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after a clean shutdown
    assert "Application shutdown complete" in (tmp_path / "first.log").read_text()
    assert (data / "grader.sqlite").is_file()
    again = serve(data, port, tmp_path / "second.log")
    time.sleep(0.5)
    stop_pid(again)
    assert "staff sign-in" not in (tmp_path / "second.log").read_text()


def test_a_worker_whose_broker_does_not_answer_says_so_once_and_keeps_trying(tmp_path: Path) -> None:
    """Celery would print "Cannot connect ... Trying again" on every try (a hundred, then give up)."""
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "grader.cli", "worker", "--broker", f"redis://127.0.0.1:{free_port()}/0",
                                 "--database", f"sqlite:///{tmp_path / 'db.sqlite'}"], stdout=out, stderr=subprocess.STDOUT,
                                cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while "does not answer" not in log.read_text(errors="replace") and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text(errors="replace")
            time.sleep(0.5)
        time.sleep(13)  # Celery's next tries come after 2, 4 and 6 s: three more, which must stay quiet
        assert proc.poll() is None, "the worker gave up on its broker"
        text = log.read_text(errors="replace")
        assert text.count("does not answer") == 1 and "Trying again" not in text, text
        assert "start it, or fix --broker" in text
    finally:
        stop_pid(proc, signal.SIGKILL)


def test_quiet_retries_say_an_outage_once_and_the_next_one_again() -> None:
    import logging

    from celery.worker.consumer.consumer import CONNECTION_ERROR

    from grader.service.tasks import QuietRetries

    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    consumer, connection = (logging.getLogger(f"celery.worker.consumer.{n}") for n in ("consumer", "connection"))
    handler, quiet = Keep(), QuietRetries().install()
    levels = [logger.level for logger in (consumer, connection)]
    for logger in (consumer, connection):
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)  # as the worker's --loglevel=INFO sets it
    try:
        for _ in range(3):
            consumer.error(CONNECTION_ERROR, "redis://127.0.0.1:9/0", "Connection refused.", "Trying again in 2 s")
        connection.info("Connected to %s", "redis://127.0.0.1:9/0")
        consumer.error(CONNECTION_ERROR, "redis://127.0.0.1:9/0", "Connection refused.", "Trying again in 2 s")
    finally:
        for logger, level in zip((consumer, connection), levels, strict=True):
            logger.removeHandler(handler)
            logger.removeFilter(quiet)
            logger.setLevel(level)
    assert [m.split(" does not answer")[0] for m in said] == ["the broker redis://127.0.0.1:9/0",
                                                                "Connected to redis://127.0.0.1:9/0",
                                                                "the broker redis://127.0.0.1:9/0"]
    assert not any("Trying again" in m for m in said)
